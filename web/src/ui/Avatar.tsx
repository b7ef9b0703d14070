// A person's or agent's picture (kind 0 `picture`, https only), else a generated one: their
// initial on a colour taken from their key. Decorative: the name is always written beside it.
import { useState } from 'preact/hooks'
import type { Workspace } from '../workspace'

const COLOURS = 10

export function Avatar({ ws, pubkey, size = 'small' }: { ws: Workspace; pubkey: string; size?: 'small' | 'large' }) {
  const profile = ws.profiles.get(pubkey)
  const [failed, setFailed] = useState('')
  const picture = profile?.picture ?? ''
  const agent = profile?.owner ? ' agent' : ''
  if (picture && failed !== picture) {
    return <img class={`avatar ${size}${agent}`} src={picture} alt="" loading="lazy" decoding="async" referrerpolicy="no-referrer" onError={() => setFailed(picture)} />
  }
  const initial = [...(profile?.name || pubkey).trim()][0]?.toUpperCase() ?? '?'
  const colour = parseInt(pubkey.slice(0, 6), 16) % COLOURS
  return <span class={`avatar ${size} gen c${colour}${agent}`} aria-hidden="true">{initial}</span>
}
