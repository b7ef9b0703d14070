// A direct message with one or more people and agents (issue 29 item 8: group DMs). The relay
// opens — or reuses — the one DM of exactly that set of participants (41010 with 1–8 `p`).
import { useEffect, useRef, useState } from 'preact/hooks'
import type { Workspace } from '../workspace'
import { humanError } from './hooks'

export const MAX_DM_PEOPLE = 8 // relay.md §4.8: 1–8 other participants

export function NewDmDialog({ ws, onClose, onOpened }: { ws: Workspace; onClose: () => void; onOpened: (id: string) => void }) {
  const ref = useRef<HTMLDialogElement>(null)
  const [filter, setFilter] = useState('')
  const [picked, setPicked] = useState<string[]>([])
  const [error, setError] = useState('')
  const [busy, setBusy] = useState(false)
  useEffect(() => ref.current?.showModal(), [])

  const want = filter.trim().toLowerCase()
  const people = [...ws.profiles.entries()]
    .filter(([pk, p]) => pk !== ws.me.pubkey && p.name && (!want || p.name.toLowerCase().includes(want) || picked.includes(pk)))
    .sort((a, b) => a[1].name.localeCompare(b[1].name))
  const toggle = (pk: string, on: boolean) => setPicked(on ? [...picked, pk] : picked.filter((p) => p !== pk))

  const open = async (e: Event) => {
    e.preventDefault()
    if (!picked.length) return setError('Choose at least one person.')
    setBusy(true)
    try {
      onOpened(await ws.openDm(picked))
    } catch (err) {
      setError(humanError(err))
      setBusy(false)
    }
  }

  return (
    <dialog ref={ref} aria-label="New message" onClose={onClose} onCancel={onClose}>
      <form onSubmit={open}>
        <h2>New message</h2>
        <label>Find people<input type="search" value={filter} onInput={(e) => setFilter(e.currentTarget.value)} /></label>
        <fieldset class="dm-people">
          <legend>People and agents ({picked.length} of at most {MAX_DM_PEOPLE} chosen)</legend>
          {people.map(([pk, p]) => (
            <label class="check" key={pk}>
              <input type="checkbox" checked={picked.includes(pk)} disabled={!picked.includes(pk) && picked.length >= MAX_DM_PEOPLE}
                onChange={(e) => toggle(pk, e.currentTarget.checked)} />
              {p.name}{p.owner && <span class="tag">agent</span>}
            </label>
          ))}
          {!people.length && <p class="hint">Nobody matches “{filter}”.</p>}
        </fieldset>
        {error && <p class="error" role="alert">{error}</p>}
        <div class="row">
          <button type="submit" disabled={busy || !picked.length}>Open conversation</button>
          <button type="button" class="quiet" onClick={onClose}>Cancel</button>
        </div>
      </form>
    </dialog>
  )
}
