// My channels and DMs. Each link's accessible name is exactly the channel's name; the unread
// count is its description (aria-describedby), so screen readers and tests see both apart.
// Mentions of me and direct messages get a badge of their own (red), apart from plain unread.
import type { Channel, Workspace } from '../workspace'
import { useState } from 'preact/hooks'
import { NewDmDialog } from './NewDm'
import { InboxLink } from './Inbox'
import { MAX_COUNTED } from '../unread'
import { PrivateRows } from './PrivateDms'

type Props = {
  ws: Workspace
  onOpen: (id: string) => void
  onNew: () => void
  onBrowse: () => void
  onAgents: () => void
  onDirectory: () => void
  directory: boolean // its panel is the open one: the link shows it, and only then
  privateActive: string[] | null
  onPrivate: (peers: string[]) => void
  inbox: boolean
  onInbox: () => void
}

export function Sidebar({ ws, onOpen, onNew, onBrowse, onAgents, onDirectory, directory, privateActive, onPrivate, inbox, onInbox }: Props) {
  const mine = ws.myChannels().filter((c) => !c.ttl) // huddle channels open from their parent's huddle panel
  const channels = mine.filter((c) => c.type !== 'dm').sort(byName)
  const dms = mine.filter((c) => c.type === 'dm')
  const [newDm, setNewDm] = useState(false)
  return (
    <nav class="sidebar" aria-label="Channels">
      <div class="side-actions">
        <button type="button" onClick={onNew}>New channel</button>
        <button type="button" class="quiet" onClick={onBrowse}>Browse channels</button>
      </div>
      <InboxLink ws={ws} open={inbox} onOpen={onInbox} />
      <h2 class="side-heading">Channels</h2>
      <ul>
        {channels.map((c) => <Item ws={ws} c={c} label={c.name} onOpen={onOpen} shadowed={!!privateActive} />)}
        {!channels.length && <li class="hint">{ws.channelsLoaded ? 'No channels yet.' : 'Loading…'}</li>}
      </ul>
      <div class="side-heading-row">
        <h2 class="side-heading">Direct messages</h2>
        <button type="button" class="quiet" aria-label="New message" title="New message" onClick={() => setNewDm(true)}>+</button>
      </div>
      <ul>
        {dms.map((c) => <Item ws={ws} c={c} label={ws.channelLabel(c)} onOpen={onOpen} shadowed={!!privateActive} />)}
        <PrivateRows ws={ws} active={privateActive} onOpen={onPrivate} />
      </ul>
      {newDm && <NewDmDialog ws={ws} onClose={() => setNewDm(false)} onOpened={(id) => { setNewDm(false); onOpen(id) }} />}
      <div class="side-actions bottom">
        <a href="#directory" class={`side-link ${directory ? 'active' : ''}`} aria-current={directory ? 'page' : undefined} onClick={(e) => { e.preventDefault(); onDirectory() }}>Directory</a>
        <button type="button" class="quiet" onClick={onAgents}>My agents</button>
      </div>
    </nav>
  )
}

function Item({ ws, c, label, onOpen, shadowed }: { ws: Workspace; c: Channel; label: string; onOpen: (id: string) => void; shadowed: boolean }) {
  const current = ws.active === c.id && !shadowed // a private conversation is open instead
  const muted = ws.reads.muted.has(c.id)
  const unread = muted ? 0 : ws.unread.get(c.id) ?? 0 // a muted channel shows mentions only
  const descId = `unread-${c.id}`
  const forMe = ws.reads.mentions.get(c.id) ?? 0
  const dm = c.type === 'dm'
  const described = [unread && descId, forMe && !dm && `mention-${c.id}`].filter(Boolean).join(' ')
  return (
    <li key={c.id}>
      <a
        href={`#${c.id}`}
        aria-label={label}
        aria-describedby={described || undefined}
        aria-current={current ? 'page' : undefined}
        class={`chan ${current ? 'active' : ''} ${unread ? 'unread' : ''} ${muted ? 'muted' : ''}`}
        onClick={(e) => {
          e.preventDefault()
          onOpen(c.id)
        }}
      >
        <span aria-hidden="true" class="sigil">{c.type === 'dm' ? '@' : c.visibility === 'private' ? '🔒' : '#'}</span>
        <span class="chan-name" aria-hidden="true">{label}</span>
        {c.archived && <span class="tag" aria-hidden="true">archived</span>}
        {unread > 0 && <span id={descId} class={`badge ${dm ? 'mention' : ''}`}>{unread >= MAX_COUNTED ? `${MAX_COUNTED}+` : unread} unread</span>}
        {forMe > 0 && !dm && <span id={`mention-${c.id}`} class="badge mention">{forMe} {forMe === 1 ? 'mention' : 'mentions'}</span>}
      </a>
    </li>
  )
}

const byName = (a: Channel, b: Channel) => a.name.localeCompare(b.name)
