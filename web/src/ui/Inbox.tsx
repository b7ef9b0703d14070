// The inbox (inbox.ts): a region named "Inbox" whose items are articles — why it is here, who,
// where, when, the first lines — each with "Open" (the message in its channel or thread) and
// "Mark done". The sidebar link "Inbox" carries the count as its description.
import { useEffect } from 'preact/hooks'
import { FULL } from './Message'
import type { Workspace } from '../workspace'
import { describeWork } from '../inbox'
import { workflowOwner } from '../workflows'
import { E2EE, privateLabel } from './PrivateDms'
import { firstTag } from '../types'

// Short dates that stay on one line (the full one is the title): today's time, else day and time.
const TODAY = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit' })
const DATED = new Intl.DateTimeFormat(undefined, { day: 'numeric', month: 'short', hour: '2-digit', minute: '2-digit' })
const shortDate = (d: Date) => (d.toDateString() === new Date().toDateString() ? TODAY : DATED).format(d)

const WHY = { mention: 'Mentioned you', dm: 'Direct message', reply: 'Reply in a thread', approval: 'Waiting for your approval', job: 'Your job ended' }

export function InboxLink({ ws, open, onOpen }: { ws: Workspace; open: boolean; onOpen: () => void }) {
  const n = ws.inbox.list().length
  return (
    <a
      href="#inbox"
      class={`chan inbox-link ${open ? 'active' : ''}`}
      aria-describedby={n ? 'inbox-count' : undefined}
      aria-current={open ? 'page' : undefined}
      onClick={(e) => { e.preventDefault(); onOpen() }}
    >
      <span class="sigil" aria-hidden="true">✉</span>
      <span class="chan-name">Inbox</span>
      {n > 0 && <span id="inbox-count" class="badge mention" aria-hidden="true">{n} waiting</span>}
    </a>
  )
}

type PanelProps = { ws: Workspace; onClose: () => void; onGo: (hash: string) => void; onPrivate: (peers: string[]) => void }

export function InboxPanel({ ws, onClose, onGo, onPrivate }: PanelProps) {
  useEffect(() => {
    if (!ws.inbox.loaded) void ws.inbox.load()
  }, [])
  const items = ws.inbox.list()
  return (
    <section class="panel inbox" aria-label="Inbox">
      <header class="panel-head">
        <h2>Inbox</h2>
        <button type="button" class="quiet" aria-label="Close inbox" onClick={onClose}>✕</button>
      </header>
      <div class="panel-body">
        {!ws.inbox.loaded && <p class="hint">Loading…</p>}
        {ws.inbox.loaded && !items.length && <p class="hint">Nothing waits for you.</p>}
        {ws.inbox.problem && <p class="error" role="alert">{ws.inbox.problem}</p>}
        {items.map(({ ev, channel, why, peers }) => {
          const ch = ws.channels.get(channel)
          const where = peers
            ? `${privateLabel(ws, peers)} (${E2EE.toLowerCase()})`
            : ch ? (ch.type === 'dm' ? ws.channelLabel(ch) : `#${ch.name}`) : 'a channel'
          const when = new Date(ev.created_at * 1000)
          const work = why === 'approval' || why === 'job' ? describeWork(ev) : null
          const snippet = (work ? work.body : ws.inbox.text(ev)).slice(0, 280)
          // An approval is the relay's event: it is named by its workflow, not by the relay key;
          // a workflow's post by the owner it speaks for, as the timeline shows it (Message.tsx).
          const byWorkflow = peers || work ? null : workflowOwner(ev, ws.relayPubkey)
          const who = work ? work.title : ws.nameOf(byWorkflow ?? ev.pubkey)
          // Work opens at its card: a job's by its request (the `e` of its end), an approval's by itself.
          const target = why === 'job' ? firstTag(ev, 'e') ?? ev.id : ev.id
          const open = () => (peers ? onPrivate(peers) : onGo(`#${channel}/${target}`))
          return (
            <article key={ev.id} class={`inbox-item ${why}`} aria-label={`${WHY[why]}: ${who}${byWorkflow ? ' (workflow)' : ''} in ${where}`}>
              <p class="why">{WHY[why]} · {where} · <time dateTime={when.toISOString()} title={FULL.format(when)}>{shortDate(when)}</time></p>
              <p class="who">
                {who}
                {byWorkflow && <> <span class="tag" title="Posted by a workflow of theirs">workflow</span></>}
                {why === 'job' && <> · by {ws.nameOf(ev.pubkey)}</>}
              </p>
              {work?.asked && <p class="asked">Asked for: {work.asked.slice(0, 280)}</p>}
              {snippet && <p class="snippet">{snippet}</p>}
              <div class="row">
                <button type="button" onClick={open}>Open</button>
                <button type="button" class="quiet" onClick={() => ws.inbox.markDone(ev.id)}>Mark done</button>
              </div>
            </article>
          )
        })}
      </div>
    </section>
  )
}
