// One message. The first of a group shows the avatar, the author (a button that opens their
// card), the agent badge and the time; the next ones of the same author show their time in
// the gutter on hover. A message that mentions me is marked; a permalink target is highlighted.
import { useEffect, useRef, useState } from 'preact/hooks'
import { permalink } from '../navigate'
import type { Msg, Workspace } from '../workspace'
import { Avatar } from './Avatar'
import { workflowOwner } from '../workflows'
import { useUi } from './context'
import { act } from './hooks'
import { MessageBody, copyText } from './MessageBody'
import { SendState } from './SendState'
import { jobsOf } from '../jobs'
import { AskAgentDialog } from './JobCard'
import { GrantAccess, refusedAsker } from './Grant'

const WORKING = '\u{1f4ac}' // 💬: the harness is working on this message (agents.md §4.13)

const EMOJI = ['👍', '❤️', '😂', '🎉', '👀', '✅']
// One formatter each: building one per message (toLocale…String) is most of a render.
const TIME = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit' })
export const FULL = new Intl.DateTimeFormat(undefined, { dateStyle: 'full', timeStyle: 'short' })

type Props = { ws: Workspace; m: Msg; onThread: (id: string) => void; inThread: boolean; grouped?: boolean }

export function Message({ ws, m, onThread, inThread, grouped = false }: Props) {
  const [picking, setPicking] = useState(false)
  // The edit in progress (open, and its text) lives on the workspace by message id: scrolled far
  // out of view, the row unmounts; scrolled back, the edit box comes back as it was (decision 366).
  const [draft, setDraftState] = useState<string | null>(() => ws.edits.get(m.ev.id) ?? null)
  const editing = draft !== null
  const opened = useRef(false) // opened here, not brought back: only then does the box take focus
  // Where focus was when the edit opened (the composer after ↑, the Edit action): it goes back
  // there when the edit ends, as a dialog gives focus back, instead of falling to the page.
  const returnTo = useRef<HTMLElement | null>(null)
  const self = useRef<HTMLElement>(null)
  const editForm = useRef<HTMLFormElement>(null)
  const setDraft = (text: string) => {
    ws.edits.set(m.ev.id, text)
    setDraftState(text)
  }
  const startEdit = () => {
    opened.current = true
    returnTo.current = document.activeElement instanceof HTMLElement ? document.activeElement : null
    setDraft(m.content)
  }
  const stopEdit = () => {
    ws.edits.delete(m.ev.id)
    setDraftState(null)
    const to = returnTo.current
    returnTo.current = null
    const active = document.activeElement
    // Only while focus is still in this edit (or lost to the page): a save that lands after the
    // person moved on must not pull focus back.
    if (active && active !== document.body && !editForm.current?.contains(active)) return
    if (to && to.isConnected && to !== document.body) to.focus()
    else self.current?.focus()
  }
  const [confirming, setConfirming] = useState(false)
  const [linked, setLinked] = useState(false)
  const [asking, setAsking] = useState(false)
  const [stopping, setStopping] = useState(false)
  const ui = useUi()
  useEffect(() => {
    if (ws.editRequest !== m.ev.id) return
    ws.editRequest = null
    startEdit()
  })
  const mine = m.ev.pubkey === ws.me.pubkey
  const canModerate = !mine && ws.isElevated(m.channel)
  const author = ws.profiles.get(m.ev.pubkey)
  const byWorkflow = workflowOwner(m.ev, ws.relayPubkey) // shown as its owner, with a badge
  const speaker = byWorkflow ?? m.ev.pubkey
  const when = new Date(m.ev.created_at * 1000)
  const time = TIME.format(when)
  const full = FULL.format(when)
  const mentionsMe = !mine && m.ev.tags.some((t) => t[0] === 'p' && t[1] === ws.me.pubkey)
  // The agents working on this message (their harness's 💬). Their owner and the message's
  // author may stop the turn, with the `!cancel` the harness takes from them (decision 311).
  const working = [...(m.reactions.get(WORKING)?.keys() ?? [])].filter((pk) => !!ws.profiles.get(pk)?.owner)
  const stoppable = working.filter((pk) => mine || ws.profiles.get(pk)?.owner === ws.me.pubkey)
  const hasAgents = jobsOf(ws).agentsIn(m.channel).length > 0
  const refused = refusedAsker(ws, m) // my agent refused someone: I may let them in here
  const stop = () => {
    setStopping(true)
    void act(ws, async () => {
      for (const agent of stoppable) {
        await ws.send(m.channel, '!cancel', [agent], m.ev.id)
        ws.stoppedTurn(m.channel, agent)
      }
    }).finally(() => setStopping(false))
  }
  const cls = ['msg', mine && 'mine', grouped && 'grouped', mentionsMe && 'mentions-me', ws.focus === m.ev.id && 'focus'].filter(Boolean).join(' ')
  const copyLink = () => void copyText(permalink(m.channel, m.ev.id)).then((ok) => {
    if (!ok) return ws.say(`Link to the message: ${permalink(m.channel, m.ev.id)}`)
    setLinked(true)
    window.setTimeout(() => setLinked(false), 1500)
  })
  return (
    // Focusable by a click or tap (not by Tab): at phone width its actions show while it has focus.
    <article ref={self} class={cls} data-id={m.ev.id} tabIndex={-1}>
      <div class="gutter">
        {grouped ? (
          <time class="hover-time" dateTime={when.toISOString()} title={full}>{time}</time>
        ) : (
          <Avatar ws={ws} pubkey={speaker} />
        )}
      </div>
      <div class="msg-main">
        {!grouped && (
          <div class="msg-head">
            <button type="button" class="author" onClick={() => ui.openProfile(speaker)}>{ws.nameOf(speaker)}</button>
            {byWorkflow && <span class="tag" title="Posted by a workflow of theirs">workflow</span>}
            {author?.owner && <span class="tag agent" title={`Agent of ${ws.nameOf(author.owner)}`}>agent</span>}
            <time dateTime={when.toISOString()} title={full}>{time}</time>
            {m.broadcast && !inThread && <span class="tag">from a thread</span>}
          </div>
        )}
        {editing ? (
          <form
            ref={editForm}
            class="edit"
            onSubmit={(e) => {
              e.preventDefault()
              void act(ws, () => ws.edit(m.ev.id, draft ?? '')).then(stopEdit)
            }}
          >
            <textarea
              aria-label="Edit message"
              autoFocus={opened.current}
              value={draft ?? ''}
              onInput={(e) => setDraft(e.currentTarget.value)}
              onKeyDown={(e) => {
                // As in the composer: Enter saves, Shift+Enter is a new line, Esc cancels. Esc stops
                // here: it must not also close the thread or panel this message is in.
                if (e.isComposing) return
                if (e.key === 'Enter' && !e.shiftKey) {
                  e.preventDefault()
                  e.currentTarget.form?.requestSubmit()
                } else if (e.key === 'Escape') {
                  e.preventDefault()
                  e.stopPropagation()
                  stopEdit()
                }
              }}
            />
            <div class="row">
              <button type="submit">Save</button>
              <button type="button" class="quiet" onClick={stopEdit}>Cancel</button>
            </div>
          </form>
        ) : (
          <MessageBody ws={ws} m={m} />
        )}
        {mine && <SendState ws={ws} m={m} />}
        {working.length > 0 && (
          <div class="msg-stop">
            <span>{working.map((pk) => ws.nameOf(pk)).join(', ')} {working.length > 1 ? 'are' : 'is'} working on this</span>
            {stoppable.length > 0 && <button type="button" class="quiet danger" disabled={stopping} onClick={stop}>Stop</button>}
          </div>
        )}
        {refused && <GrantAccess ws={ws} refused={refused} />}
        {m.editedAt !== null && !editing && (
          <span class="edited" title={`Edited ${FULL.format(new Date(m.editedAt * 1000))}`}>(edited)</span>
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
          // Apart from *Sent* or *(edited)* before it: a space in the text, a gap on screen.
          <>{' '}<button type="button" class="link replies" onClick={() => onThread(m.ev.id)}>
            {m.replies.size} {m.replies.size === 1 ? 'reply' : 'replies'}
          </button></>
        )}
      </div>
      <div class="msg-actions">
        {!inThread && <button type="button" class="icon" onClick={() => onThread(m.ev.id)}>Reply in thread</button>}
        <button type="button" class="icon" aria-expanded={picking} onClick={() => setPicking(!picking)}>Add reaction</button>
        <button type="button" class="icon" onClick={copyLink}>{linked ? 'Link copied' : 'Copy link'}</button>
        {hasAgents && <button type="button" class="icon" onClick={() => setAsking(true)}>Ask agent</button>}
        {mine && <button type="button" class="icon" onClick={startEdit}>Edit</button>}
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
      {asking && <AskAgentDialog ws={ws} channel={m.channel} source={m} onClose={() => setAsking(false)} />}
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
