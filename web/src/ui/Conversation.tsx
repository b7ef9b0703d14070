// The open channel: header, the timeline (role log "Messages"), typing line and composer.
import { useState } from 'preact/hooks'
import type { Channel, Workspace } from '../workspace'
import { act } from './hooks'
import { Timeline } from './Timeline'
import { Composer } from './Composer'
import { ChannelSettings } from './ChannelSettings'
import { Toast } from './Toast'

type Props = { ws: Workspace; channel: Channel; onThread: (id: string) => void; onMembers: () => void; onHuddle: () => void; onWorkflows?: () => void; onPrivate: (peers: string[]) => void }

export function Conversation({ ws, channel, onThread, onMembers, onHuddle, onWorkflows, onPrivate }: Props) {
  const [settings, setSettings] = useState(false)
  const typing = ws.typingIn(channel.id)
  const label = ws.channelLabel(channel)
  const inHuddle = ws.inHuddle(channel.id).map((pk) => ws.nameOf(pk))
  return (
    <section class="conversation" aria-label={label}>
      <header class="chan-head">
        <div class="chan-title">
          <h1>{channel.type === 'dm' ? label : `# ${label}`}</h1>
          {channel.about && <p class="about">{channel.about}</p>}
        </div>
        <div class="chan-actions">
          {inHuddle.length > 0 && <span class="huddle-live" title={inHuddle.join(', ')}>In the huddle: {inHuddle.join(', ')}</span>}
          {channel.member && channel.type !== 'dm' && <button type="button" class="quiet" onClick={onHuddle}>Huddle</button>}
          {channel.type === 'dm' && (
            <button type="button" class="quiet" title="Messages only you and them can read (NIP-17)" onClick={() => onPrivate(channel.peers.filter((p) => p !== ws.me.pubkey))}>
              🔒 End-to-end encrypted
            </button>
          )}
          {onWorkflows && channel.type !== 'dm' && <button type="button" class="quiet" onClick={onWorkflows}>Workflows</button>}
          <button type="button" class="quiet" onClick={onMembers}>Members</button>
          {channel.member && <button type="button" class="quiet" onClick={() => setSettings(true)}>Channel settings</button>}
        </div>
      </header>
      {channel.archived && <p class="banner">This channel is archived: it is read-only.</p>}
      <Timeline ws={ws} channel={channel.id} onThread={onThread} />
      <Toast ws={ws} />
      <p class="typing" aria-live="polite">{typing.length ? `${typing.join(', ')} ${typing.length > 1 ? 'are' : 'is'} typing…` : ''}</p>
      {channel.member ? (
        <Composer ws={ws} channel={channel.id} label="Message" button="Send" placeholder={`Message ${channel.type === 'dm' ? label : '#' + label}`} />
      ) : (
        <div class="join-bar">
          <span>You are not a member of this channel.</span>
          {channel.visibility === 'open' && <button type="button" onClick={() => void act(ws, () => ws.join(channel.id))}>Join channel</button>}
        </div>
      )}
      {settings && <ChannelSettings ws={ws} channel={channel} onClose={() => setSettings(false)} />}
    </section>
  )
}
