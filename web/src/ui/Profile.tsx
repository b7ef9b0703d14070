// Who I am and where my key lives: display name (kind 0), keep the key across reloads
// (NIP-49 ncryptsec under a passphrase, in this browser only), export, sign out.
import { useEffect, useRef, useState } from 'preact/hooks'
import { MemorySigner, forgetStored, npub, storeEncrypted, storedKey } from '../identity'
import type { Workspace } from '../workspace'
import { humanError } from './hooks'

export function ProfileDialog({ ws, fresh, onClose }: { ws: Workspace; fresh: boolean; onClose: () => void }) {
  const ref = useRef<HTMLDialogElement>(null)
  const mine = ws.profiles.get(ws.me.pubkey)
  const [name, setName] = useState(mine?.name ?? '')
  const [status, setStatus] = useState(ws.presenceBook.text)
  const [pass, setPass] = useState('')
  const [shown, setShown] = useState(false)
  const [note, setNote] = useState('')
  const [busy, setBusy] = useState(false)
  const [stored, setStored] = useState(!!storedKey())
  useEffect(() => ref.current?.showModal(), [])
  const local = ws.me instanceof MemorySigner ? ws.me : null

  const save = async (e: Event) => {
    e.preventDefault()
    try {
      await ws.setProfile(name.trim(), mine?.about ?? '')
      if (status.trim() !== ws.presenceBook.text) await ws.presenceBook.setText(status)
      setNote('Profile saved.')
    } catch (err) {
      setNote(humanError(err))
    }
  }
  const remember = () => {
    if (!local) return
    if (pass.length < 8) {
      setNote('Use a passphrase of at least 8 characters.')
      return
    }
    setBusy(true)
    setTimeout(() => {
      storeEncrypted(local.secretBytes(), pass)
      setPass('')
      setStored(true)
      setBusy(false)
      setNote('Your key is stored encrypted in this browser.')
    }, 30)
  }

  let where = 'Your key is held by your browser extension; buzz never sees it.'
  if (local) where = stored
    ? 'Your key is in this tab’s memory and stored in this browser encrypted with your passphrase (NIP-49). It is never sent anywhere.'
    : 'Your key is only in this tab’s memory: closing or reloading the tab signs you out. Set a passphrase to stay signed in, or export the key.'

  return (
    <dialog ref={ref} aria-label="Profile" onClose={onClose} onCancel={onClose}>
      <form onSubmit={save}>
        <h2>{fresh ? 'Welcome to buzz' : 'Profile'}</h2>
        <label>Display name<input type="text" value={name} maxLength={80} onInput={(e) => setName(e.currentTarget.value)} /></label>
        <label>Status<input type="text" value={status} maxLength={100} placeholder="What are you up to?" onInput={(e) => setStatus(e.currentTarget.value)} /></label>
        <button type="submit">Save profile</button>
        <p class="fine">Public key: <code>{npub(ws.me.pubkey)}</code></p>
        <h3>Your key</h3>
        <p class="where">{where}</p>
        {local && !stored && (
          <div class="row">
            <label class="grow">Passphrase<input type="password" autocomplete="new-password" value={pass} onInput={(e) => setPass(e.currentTarget.value)} /></label>
            <button type="button" disabled={busy} onClick={remember}>{busy ? 'Encrypting…' : 'Remember on this device'}</button>
          </div>
        )}
        {local && stored && <button type="button" class="quiet" onClick={() => { forgetStored(); setStored(false) }}>Forget stored key</button>}
        {local && (
          <div>
            <button type="button" class="quiet" onClick={() => setShown(!shown)}>{shown ? 'Hide secret key' : 'Show secret key'}</button>
            {shown && <p><code class="nsec" aria-label="Secret key (nsec)">{local.nsec()}</code></p>}
          </div>
        )}
        {typeof Notification !== 'undefined' && Notification.permission === 'default' && (
          <button type="button" class="quiet" onClick={() => void Notification.requestPermission().then(() => setNote('Notifications: ' + Notification.permission + '.'))}>
            Enable notifications for mentions
          </button>
        )}
        {note && <p role="status">{note}</p>}
        <div class="row">
          <button type="button" class="quiet" onClick={() => { const d = ref.current; if (d) d.close() }}>Close</button>
          <button type="button" class="quiet" onClick={() => location.reload()}>Sign out</button>
        </div>
      </form>
    </dialog>
  )
}
