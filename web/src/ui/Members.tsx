// Members with roles; agents are marked (role `bot`, or a valid NIP-OA owner on the profile)
// with their owner. Owners and admins add (npub or hex), change roles and remove.
import { useState } from 'preact/hooks'
import { npub, parsePubkey } from '../identity'
import type { Channel, Role, Workspace } from '../workspace'
import { act } from './hooks'
import { Panel } from './Panel'

const ROLES: Role[] = ['owner', 'admin', 'member', 'guest', 'bot']
const ORDER: Record<string, number> = { owner: 0, admin: 1, member: 2, bot: 3, guest: 4 }

export function MembersPanel({ ws, channel, onClose }: { ws: Workspace; channel: Channel; onClose: () => void }) {
  const [who, setWho] = useState('')
  const [error, setError] = useState('')
  const roles = ws.roles.get(channel.id)
  const elevated = ws.isElevated(channel.id)
  const rows = [...(roles?.entries() ?? [])].sort((a, b) => (ORDER[a[1]] ?? 9) - (ORDER[b[1]] ?? 9) || ws.nameOf(a[0]).localeCompare(ws.nameOf(b[0])))

  const add = (e: Event) => {
    e.preventDefault()
    const pk = parsePubkey(who)
    if (!pk) {
      setError('Paste an npub1… or a 64-character hex public key.')
      return
    }
    setError('')
    void act(ws, () => ws.putMember(channel.id, pk)).then(() => setWho(''))
  }

  return (
    <Panel name="Members" title={`Members (${rows.length})`} onClose={onClose}>
      {elevated && (
        <form class="add-member" onSubmit={add}>
          <input type="text" aria-label="Add member" placeholder="npub1… or hex public key" value={who} onInput={(e) => setWho(e.currentTarget.value)} />
          <button type="submit">Add</button>
          {error && <p class="error" role="alert">{error}</p>}
        </form>
      )}
      <ul class="members" aria-label="Member list">
        {rows.map(([pk, role]) => {
          const p = ws.profiles.get(pk)
          const agent = role === 'bot' || !!p?.owner
          const online = ws.presenceBook.status(pk) !== 'offline'
          const activity = agent ? ws.presenceBook.activity(pk) : null
          const text = ws.presenceBook.statusText(pk)
          return (
            <li key={pk} class="member">
              <span class={`dot ${online ? 'on' : ''} ${activity ?? ''}`} aria-label={online ? 'online' : 'offline'} role="img" />
              <div class="who">
                <span class="name">{ws.nameOf(pk)}{pk === ws.me.pubkey ? ' (you)' : ''}</span>
                {agent && <span class="tag agent">agent</span>}
                {activity && <span class="activity">{activity}</span>}
                {text && <span class="status-text">{text}</span>}
                {p?.owner && <span class="owner">owned by {ws.nameOf(p.owner)}</span>}
                <span class="npub" title={npub(pk)}>{npub(pk).slice(0, 16)}…</span>
              </div>
              {elevated && pk !== ws.me.pubkey ? (
                <>
                  <select aria-label={`Role of ${ws.nameOf(pk)}`} value={role} onChange={(e) => void act(ws, () => ws.putMember(channel.id, pk, e.currentTarget.value as Role))}>
                    {ROLES.map((r) => <option value={r}>{r}</option>)}
                  </select>
                  <button type="button" class="quiet" aria-label={`Remove ${ws.nameOf(pk)}`} onClick={() => void act(ws, () => ws.removeMember(channel.id, pk))}>Remove</button>
                </>
              ) : (
                <span class="role">{role}</span>
              )}
              {pk !== ws.me.pubkey && channel.type !== 'dm' && (
                <button type="button" class="quiet" aria-label={`Message ${ws.nameOf(pk)}`} onClick={() => void act(ws, async () => { const id = await ws.openDm(pk); await ws.openChannel(id) })}>DM</button>
              )}
            </li>
          )
        })}
      </ul>
      {channel.member && channel.type !== 'dm' && (
        <button type="button" class="quiet" onClick={() => void act(ws, () => ws.leave(channel.id))}>Leave channel</button>
      )}
    </Panel>
  )
}
