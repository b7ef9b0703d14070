import { useState } from 'preact/hooks'
import type { Msg, Workspace } from '../workspace'
import { act } from './hooks'
import { MessageText } from './Text'

const EMOJI = ['👍', '❤️', '😂', '🎉', '👀', '✅']

type Props = { ws: Workspace; m: Msg; onThread: (id: string) => void; inThread: boolean }

export function Message({ ws, m, onThread, inThread }: Props) {
  const [picking, setPicking] = useState(false)
  const [editing, setEditing] = useState(false)
  const [draft, setDraft] = useState('')
  const [confirming, setConfirming] = useState(false)
  const mine = m.ev.pubkey === ws.me.pubkey
  const canModerate = !mine && ws.isElevated(m.channel)
  const author = ws.profiles.get(m.ev.pubkey)
  const when = new Date(m.ev.created_at * 1000)
  return (
    <article class={`msg ${mine ? 'mine' : ''}`} data-id={m.ev.id}>
      <div class="msg-head">
        <span class="author">{ws.nameOf(m.ev.pubkey)}</span>
        {author?.owner && <span class="tag agent" title={`Agent of ${ws.nameOf(author.owner)}`}>agent</span>}
        <time dateTime={when.toISOString()} title={when.toLocaleString()}>{when.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' })}</time>
        {m.editedAt !== null && <span class="edited">(edited)</span>}
        {m.broadcast && !inThread && <span class="tag">from a thread</span>}
      </div>
      {editing ? (
        <form
          class="edit"
          onSubmit={(e) => {
            e.preventDefault()
            void act(ws, () => ws.edit(m.ev.id, draft)).then(() => setEditing(false))
          }}
        >
          <textarea aria-label="Edit message" value={draft} onInput={(e) => setDraft(e.currentTarget.value)} />
          <div class="row">
            <button type="submit">Save</button>
            <button type="button" class="quiet" onClick={() => setEditing(false)}>Cancel</button>
          </div>
        </form>
      ) : (
        <MessageText text={m.content} />
      )}
      {m.reactions.size > 0 && (
        <div class="reactions">
          {[...m.reactions.entries()].map(([emoji, by]) => (
            <button
              type="button"
              class={`chip ${by.has(ws.me.pubkey) ? 'on' : ''}`}
              aria-pressed={by.has(ws.me.pubkey)}
              aria-label={`${emoji} ${by.size}`}
              title={[...by.keys()].map((p) => ws.nameOf(p)).join(', ')}
              onClick={() => void act(ws, () => ws.react(m.ev.id, emoji))}
            >
              {emoji} {by.size}
            </button>
          ))}
        </div>
      )}
      {!inThread && m.replies.size > 0 && (
        <button type="button" class="link replies" onClick={() => onThread(m.ev.id)}>
          {m.replies.size} {m.replies.size === 1 ? 'reply' : 'replies'}
        </button>
      )}
      <div class="msg-actions">
        {!inThread && <button type="button" class="icon" onClick={() => onThread(m.ev.id)}>Reply in thread</button>}
        <button type="button" class="icon" aria-expanded={picking} onClick={() => setPicking(!picking)}>Add reaction</button>
        {mine && <button type="button" class="icon" onClick={() => { setDraft(m.content); setEditing(true) }}>Edit</button>}
        {(mine || canModerate) && (
          confirming ? (
            <>
              <button type="button" class="icon danger" onClick={() => { setConfirming(false); void act(ws, () => ws.remove(m.ev.id)) }}>
                {mine ? 'Confirm delete' : 'Confirm moderator delete'}
              </button>
              <button type="button" class="icon" onClick={() => setConfirming(false)}>Keep</button>
            </>
          ) : (
            <button type="button" class="icon" onClick={() => setConfirming(true)}>Delete</button>
          )
        )}
      </div>
      {picking && (
        <div class="picker" role="group" aria-label="Reactions">
          {EMOJI.map((e) => (
            <button type="button" aria-label={`React ${e}`} onClick={() => { setPicking(false); void act(ws, () => ws.react(m.ev.id, e)) }}>{e}</button>
          ))}
        </div>
      )}
    </article>
  )
}
