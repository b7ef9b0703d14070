import { useEffect, useRef, useState } from 'preact/hooks'
import type { Channel, Workspace } from '../workspace'
import { humanError } from './hooks'
import { NotificationSettings } from './NotificationSettings'

/** My notifications (every member); rename, about, archive (kind 9002; owners and admins). */
export function ChannelSettings({ ws, channel, onClose }: { ws: Workspace; channel: Channel; onClose: () => void }) {
  const ref = useRef<HTMLDialogElement>(null)
  const [name, setName] = useState(channel.name)
  const [about, setAbout] = useState(channel.about)
  const [error, setError] = useState('')
  useEffect(() => ref.current?.showModal(), [])
  const elevated = ws.isElevated(channel.id)
  const run = async (fields: { name?: string; about?: string; archived?: boolean }) => {
    try {
      await ws.editChannel(channel.id, fields)
      onClose()
    } catch (e) {
      setError(humanError(e))
    }
  }
  return (
    <dialog ref={ref} aria-label="Channel settings" onClose={onClose} onCancel={onClose}>
      <form onSubmit={(e) => { e.preventDefault(); void run({ name: name.trim(), about: about.trim() }) }}>
        <h2>Channel settings</h2>
        <NotificationSettings ws={ws} channel={channel} />
        {elevated && <label>Channel name<input type="text" value={name} onInput={(e) => setName(e.currentTarget.value)} /></label>}
        {elevated && <label>About<input type="text" value={about} onInput={(e) => setAbout(e.currentTarget.value)} /></label>}
        {error && <p class="error" role="alert">{error}</p>}
        <div class="row">
          {elevated && <button type="submit">Save</button>}
          {elevated && <button type="button" class="quiet" onClick={() => void run({ archived: !channel.archived })}>{channel.archived ? 'Unarchive channel' : 'Archive channel'}</button>}
          <button type="button" class="quiet" onClick={onClose}>{elevated ? 'Cancel' : 'Close'}</button>
        </div>
      </form>
    </dialog>
  )
}
