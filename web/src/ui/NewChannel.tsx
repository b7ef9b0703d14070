import { useEffect, useRef, useState } from 'preact/hooks'
import type { Workspace } from '../workspace'
import { humanError } from './hooks'

export function NewChannelDialog({ ws, onClose, onCreated }: { ws: Workspace; onClose: () => void; onCreated: (id: string) => void }) {
  const ref = useRef<HTMLDialogElement>(null)
  const [name, setName] = useState('')
  const [visibility, setVisibility] = useState<'open' | 'private'>('open')
  const [about, setAbout] = useState('')
  const [error, setError] = useState('')
  const [busy, setBusy] = useState(false)
  useEffect(() => ref.current?.showModal(), [])

  const create = async (e: Event) => {
    e.preventDefault()
    const clean = name.trim().replace(/^#+/, '').trim()
    if (!clean) {
      setError('A channel needs a name.')
      return
    }
    setBusy(true)
    try {
      onCreated(await ws.createChannel(clean, visibility, about.trim()))
    } catch (err) {
      setError(humanError(err))
      setBusy(false)
    }
  }

  return (
    <dialog ref={ref} aria-label="New channel" onClose={onClose} onCancel={onClose}>
      <form onSubmit={create}>
        <h2>New channel</h2>
        <label>Channel name<input type="text" value={name} onInput={(e) => setName(e.currentTarget.value)} maxLength={100} /></label>
        <label>
          Visibility
          <select value={visibility} onChange={(e) => setVisibility(e.currentTarget.value as 'open' | 'private')}>
            <option value="open">Open: anyone in the workspace can join</option>
            <option value="private">Private: members are added by an owner or admin</option>
          </select>
        </label>
        <label>About<input type="text" value={about} onInput={(e) => setAbout(e.currentTarget.value)} maxLength={500} /></label>
        {error && <p class="error" role="alert">{error}</p>}
        <div class="row">
          <button type="submit" disabled={busy}>Create</button>
          <button type="button" class="quiet" onClick={onClose}>Cancel</button>
        </div>
      </form>
    </dialog>
  )
}
