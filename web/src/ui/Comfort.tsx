// Comfort (issue 29 item 8): the "Dark theme" switch, the Ctrl/Cmd+K "Jump to" dialog over
// channels and people, Esc to close the side panel, and ↑ in an empty box to edit my last
// message (the message picks the request up: ws.editRequest).
import { useEffect, useRef, useState } from 'preact/hooks'
import { useTheme } from '../theme'
import type { Workspace } from '../workspace'
import { act } from './hooks'
import { privateLabel } from './PrivateDms'
import { privateDms } from '../private-dms'

export function ThemeSwitch() {
  const [dark, setDark] = useTheme()
  return (
    <button type="button" role="switch" aria-checked={dark} class="quiet theme-switch" onClick={() => setDark(!dark)}>
      {/* The state seen, not only announced: a track whose knob moves over when on. */}
      <span class="track" aria-hidden="true"><span class="knob" /></span>
      <span>Dark<span class="theme-word"> theme</span></span>
    </button>
  )
}

/** Window shortcuts: Ctrl/Cmd+K opens "Jump to"; Esc closes the side panel (dialogs close themselves). */
export function useShortcuts(onJump: () => void, onEscape: () => void): void {
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if ((e.ctrlKey || e.metaKey) && e.key.toLowerCase() === 'k') {
        e.preventDefault()
        onJump()
      } else if (e.key === 'Escape' && !document.querySelector('dialog[open]') && !e.defaultPrevented) {
        onEscape()
      }
    }
    window.addEventListener('keydown', onKey)
    return () => window.removeEventListener('keydown', onKey)
  })
}

/** ↑ in an empty box: edit my newest message here. True when there was one. */
export function editLast(ws: Workspace, channel: string, thread?: string): boolean {
  const msgs = thread ? ws.threadMessages(thread) : ws.visible(channel)
  const mine = [...msgs].reverse().find((m) => m.ev.pubkey === ws.me.pubkey)
  if (!mine) return false
  ws.editRequest = mine.ev.id
  ws.changed()
  return true
}

// What a target is, as the list says it beside its name.
const KIND = { channel: 'channel', dm: 'direct message', private: 'encrypted direct message', person: 'person' } as const
type Target = { key: string; label: string; kind: keyof typeof KIND; go: () => void }

type JumpProps = { ws: Workspace; onClose: () => void; onOpen: (id: string) => void; onPrivate: (peers: string[]) => void }

export function JumpTo({ ws, onClose, onOpen, onPrivate }: JumpProps) {
  const ref = useRef<HTMLDialogElement>(null)
  const [q, setQ] = useState('')
  const [index, setIndex] = useState(0)
  useEffect(() => ref.current?.showModal(), [])
  const channels: Target[] = ws.myChannels().filter((c) => !c.ttl).map((c) => ({
    key: c.id, label: c.type === 'dm' ? ws.channelLabel(c) : `#${c.name}`, kind: c.type === 'dm' ? 'dm' : 'channel', go: () => onOpen(c.id),
  }))
  // The private (NIP-17) conversations the sidebar lists, under the same names.
  const privates: Target[] = privateDms(ws).conversations().map((c) => ({
    key: `e2ee-${c.key}`, label: privateLabel(ws, c.peers), kind: 'private', go: () => onPrivate(c.peers),
  }))
  const people: Target[] = [...ws.profiles.entries()]
    .filter(([pk, p]) => pk !== ws.me.pubkey && p.name)
    .map(([pk, p]) => ({ key: pk, label: `@${p.name}`, kind: 'person', go: () => void act(ws, async () => onOpen(await ws.openDm(pk))) }))
  const needle = q.trim().toLowerCase().replace(/^[#@]/, '')
  const hits = [...channels, ...privates, ...people].filter((t) => t.label.toLowerCase().slice(1).includes(needle) || t.label.toLowerCase().includes(needle)).slice(0, 12)
  const pick = (t: Target | undefined) => {
    if (!t) return
    onClose()
    t.go()
  }
  return (
    <dialog ref={ref} aria-label="Jump to" class="jump-to" onClose={onClose} onCancel={onClose}>
      <input
        type="text"
        aria-label="Jump to"
        role="combobox"
        aria-expanded={hits.length > 0}
        aria-controls="jump-list"
        placeholder="Channel or person"
        value={q}
        autoFocus
        onInput={(e) => { setQ(e.currentTarget.value); setIndex(0) }}
        onKeyDown={(e) => {
          if (e.key === 'ArrowDown' || e.key === 'ArrowUp') {
            e.preventDefault()
            if (hits.length) setIndex((index + (e.key === 'ArrowDown' ? 1 : hits.length - 1)) % hits.length)
          } else if (e.key === 'Enter') {
            e.preventDefault()
            pick(hits[Math.min(index, hits.length - 1)])
          }
        }}
      />
      <ul id="jump-list" role="listbox" aria-label="Channels and people">
        {hits.map((t, i) => (
          <li key={t.key} role="option" aria-selected={i === index} class={i === index ? 'sel' : ''} onClick={() => pick(t)}>
            {t.label} <span class="hint">{KIND[t.kind]}</span>
          </li>
        ))}
      </ul>
    </dialog>
  )
}
