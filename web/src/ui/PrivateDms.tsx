// End-to-end encrypted DMs in the workspace (../private-dms.ts): the sidebar rows beside the
// channel DMs, and the conversation view. Every message carries the "End-to-end encrypted"
// mark; its text is shown as plain text (it never passes through the relay readable, and it
// is not rendered as markdown, so nothing in it runs or loads).
import { useLayoutEffect, useRef, useState } from 'preact/hooks'
import { conversationKey, privateDms } from '../private-dms'
import type { Workspace } from '../workspace'
import { Avatar } from './Avatar'
import { humanError } from './hooks'
import './private-dms.css'

export const E2EE = 'End-to-end encrypted'
const TIME = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit' })
const FULL = new Intl.DateTimeFormat(undefined, { dateStyle: 'full', timeStyle: 'medium' })

export function privateLabel(ws: Workspace, peers: string[]): string {
  return peers.length ? peers.map((p) => ws.nameOf(p)).join(', ') : ws.nameOf(ws.me.pubkey)
}

type ListProps = { ws: Workspace; active: string[] | null; onOpen: (peers: string[]) => void }

/** Sidebar rows of my private conversations (inside the "Direct messages" list). */
export function PrivateRows({ ws, active, onOpen }: ListProps) {
  const book = privateDms(ws)
  const current = active ? conversationKey(active) : null
  return (
    <>
      {book.conversations().map((c) => {
        const label = `${privateLabel(ws, c.peers)} (${E2EE.toLowerCase()})`
        return (
          <li key={`e2ee-${c.key}`}>
            <a
              href="#"
              aria-label={label}
              aria-current={current === c.key ? 'page' : undefined}
              class={`chan private ${current === c.key ? 'active' : ''}`}
              onClick={(e) => {
                e.preventDefault()
                onOpen(c.peers)
              }}
            >
              <span aria-hidden="true" class="sigil">🔐</span>
              <span class="chan-name" aria-hidden="true">{privateLabel(ws, c.peers)}</span>
              {/* short: the name comes first in the narrow sidebar (the link's name says it all) */}
              <span class="tag e2ee" aria-hidden="true" title={E2EE}>encrypted</span>
            </a>
          </li>
        )
      })}
    </>
  )
}

/** The conversation view of one private conversation: its messages and a composer. */
export function PrivateConversation({ ws, peers }: { ws: Workspace; peers: string[] }) {
  const book = privateDms(ws)
  const label = privateLabel(ws, peers)
  const msgs = book.messages(peers)
  const box = useRef<HTMLDivElement>(null)
  useLayoutEffect(() => {
    if (box.current) box.current.scrollTop = box.current.scrollHeight
  }, [msgs.length])
  return (
    <section class="conversation private" aria-label={`${label} (${E2EE.toLowerCase()})`}>
      <header class="chan-head">
        <div class="chan-title">
          <h1>{label}</h1>
          <p class="about"><span class="tag e2ee">🔒 {E2EE}</span> Only you and {label} can read these messages; the relay stores them sealed.</p>
        </div>
      </header>
      <div class="timeline" role="log" aria-label="Private messages" ref={box} tabIndex={0}>
        {!book.available && <p class="start">This key cannot decrypt: sign in with a key, or an extension with NIP-44.</p>}
        {book.available && !book.loaded && <p class="start">Loading messages…</p>}
        {book.loaded && !msgs.length && <p class="start">No private messages with {label} yet.</p>}
        {msgs.map(({ rumor }) => {
          const when = new Date(rumor.created_at * 1000)
          return (
            <article key={rumor.id} class={`msg e2ee ${rumor.pubkey === ws.me.pubkey ? 'mine' : ''}`} data-id={rumor.id} tabIndex={-1}>
              <div class="gutter"><Avatar ws={ws} pubkey={rumor.pubkey} /></div>
              <div class="msg-main">
                <div class="msg-head">
                  <span class="author">{ws.nameOf(rumor.pubkey)}</span>
                  <time dateTime={when.toISOString()} title={FULL.format(when)}>{TIME.format(when)}</time>
                  <span class="tag e2ee" title="Sealed and gift-wrapped (NIP-17): the relay cannot read it">🔒 {E2EE}</span>
                </div>
                <div class="body plain">{rumor.content}</div>
              </div>
            </article>
          )
        })}
      </div>
      <PrivateComposer ws={ws} peers={peers} label={label} />
    </section>
  )
}

function PrivateComposer({ ws, peers, label }: { ws: Workspace; peers: string[]; label: string }) {
  const [text, setText] = useState('')
  const [sending, setSending] = useState(false)
  const [error, setError] = useState('')
  const send = async () => {
    if (sending || !text.trim()) return
    setSending(true)
    setError('')
    try {
      await privateDms(ws).send(peers, text)
      setText('')
    } catch (e) {
      setError(humanError(e))
    } finally {
      setSending(false)
    }
  }
  return (
    <form class="composer" onSubmit={(e) => { e.preventDefault(); void send() }}>
      <textarea
        aria-label="Private message"
        rows={1}
        placeholder={`Encrypted message to ${label}`}
        value={text}
        onInput={(e) => setText(e.currentTarget.value)}
        onKeyDown={(e) => {
          if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
            e.preventDefault()
            void send()
          }
        }}
      />
      <button type="submit" disabled={sending}>Send encrypted</button>
      {error && <p class="error" role="alert">{error}</p>}
    </form>
  )
}
