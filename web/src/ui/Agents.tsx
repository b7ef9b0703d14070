import type { Workspace } from '../workspace'
import { Panel } from './Panel'

export function AgentsPanel({ ws, onClose }: { ws: Workspace; onClose: () => void }) {
  const mine = [...ws.profiles.values()].filter((p) => p.owner === ws.me.pubkey)
  return (
    <Panel name="My agents" onClose={onClose}>
      {!mine.length && <p class="hint">No agents of yours have been seen in your channels.</p>}
      <ul>{mine.map((p) => <li>{p.name || p.event.pubkey.slice(0, 8)}</li>)}</ul>
    </Panel>
  )
}
