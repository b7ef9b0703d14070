// Someone's card, from a click on their name or a mention: picture, name, agent and owner,
// about, npub, presence, and a direct message. A modal dialog named after them.
import { useEffect, useRef, useState } from 'preact/hooks'
import { npub } from '../identity'
import type { Workspace } from '../workspace'
import { Avatar } from './Avatar'
import { act } from './hooks'
import { copyText } from './MessageBody'

type Props = { ws: Workspace; pubkey: string; onClose: () => void; onProfile: (pk: string) => void; onOpen: (channel: string) => void }

export function ProfileCard({ ws, pubkey, onClose, onProfile, onOpen }: Props) {
  const ref = useRef<HTMLDialogElement>(null)
  const [copied, setCopied] = useState(false)
  useEffect(() => {
    const d = ref.current
    if (d && !d.open) d.showModal()
  }, [])
  useEffect(() => ws.needProfiles([pubkey]), [pubkey])
  const p = ws.profiles.get(pubkey)
  const name = ws.nameOf(pubkey)
  const key = npub(pubkey)
  const presence = ws.presence.get(pubkey)
  const close = () => ref.current?.close()
  return (
    <dialog ref={ref} class="profile-card" aria-label={name} onClose={onClose} onCancel={onClose}
      onClick={(e) => { if (e.target === ref.current) close() /* a click on the backdrop */ }}>
      <div class="card-top">
        <Avatar ws={ws} pubkey={pubkey} size="large" />
        <div>
          <h2>{name}</h2>
          {p?.owner && (
            <p class="owner">
              <span class="tag agent">agent</span> of{' '}
              <button type="button" class="link" onClick={() => onProfile(p.owner as string)}>{ws.nameOf(p.owner)}</button>
            </p>
          )}
          {presence && <p class="presence">{presence === 'online' ? 'Online' : presence}</p>}
        </div>
      </div>
      {p?.about && <p class="about">{p.about}</p>}
      <p class="npub"><code>{key}</code></p>
      <div class="row">
        <button type="button" class="quiet" onClick={() => void copyText(key).then(setCopied)}>{copied ? 'Copied' : 'Copy npub'}</button>
        {pubkey !== ws.me.pubkey && (
          <button type="button" class="quiet" onClick={() => void act(ws, async () => { const id = await ws.openDm(pubkey); close(); onOpen(id) })}>
            Direct message
          </button>
        )}
        <button type="button" onClick={close}>Close</button>
      </div>
    </dialog>
  )
}
