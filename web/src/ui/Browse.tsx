import type { Workspace } from '../workspace'
import { act } from './hooks'
import { Panel } from './Panel'

/** Open channels I have not joined. */
export function BrowsePanel({ ws, onClose, onOpen }: { ws: Workspace; onClose: () => void; onOpen: (id: string) => void }) {
  const open = [...ws.channels.values()].filter((c) => !c.member && c.type !== 'dm' && c.visibility === 'open').sort((a, b) => a.name.localeCompare(b.name))
  return (
    <Panel name="Browse channels" onClose={onClose}>
      {!open.length && <p class="hint">You are in every open channel.</p>}
      <ul class="browse">
        {open.map((c) => (
          <li>
            <div>
              <strong>#{c.name}</strong>
              {c.about && <p class="about">{c.about}</p>}
            </div>
            <div class="row">
              <button type="button" class="quiet" aria-label={`Preview ${c.name}`} onClick={() => onOpen(c.id)}>Preview</button>
              <button type="button" aria-label={`Join ${c.name}`} onClick={() => void act(ws, async () => { await ws.join(c.id); onOpen(c.id) })}>Join</button>
            </div>
          </li>
        ))}
      </ul>
    </Panel>
  )
}
