// The channel timeline: newest at the bottom, older pages loaded on scroll (by `until`), live
// events appended; the view stays put when a page is prepended and follows the bottom when
// the reader is already there. A day heading starts each day; consecutive messages of one
// author within a few minutes are grouped under one name. A permalink target (`ws.focus`)
// is scrolled to the middle once and highlighted.
import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks'
import type { Msg, Workspace } from '../workspace'
import { workflowsOf, type Approval } from '../workflows'
import { ApprovalCard, withApprovals } from './ApprovalCard'
import { jobsOf, type JobView } from '../jobs'
import { JobCard, withJobs } from './JobCard'
import { act } from './hooks'
import { Message } from './Message'
import { JumpBar, NewDivider } from './CatchUp'
import { useWindower, type Place } from './windowed'

const GROUP_S = 5 * 60

export function Timeline({ ws, channel, onThread }: { ws: Workspace; channel: string; onThread: (id: string) => void }) {
  const box = useRef<HTMLDivElement>(null)
  const head = useRef<HTMLDivElement>(null)
  const w = useWindower(box, head)
  const prev = useRef({ first: '', count: 0, channel: '', focus: '', placed: false })
  const fill = useRef({ channel: '', rows: 0, pages: 0 }) // pages loaded to fill the view, none shown
  const msgs = ws.visible(channel)
  const t = ws.timeline(channel)
  const approvals = workflowsOf(ws).approvalsIn(channel)
  useEffect(() => workflowsOf(ws).watch(channel), [ws, channel])
  useEffect(() => jobsOf(ws).watch(channel), [ws, channel])
  const jobs = jobsOf(ws).jobsIn(channel)
  const firstUnread = ws.reads.firstUnread(channel, msgs)
  const [view, setView] = useState({ above: false, up: false, fresh: 0, channel })
  const all = afterCards(withJobs(withApprovals(rows(msgs), approvals, !t.hasMore), jobs, !t.hasMore, atOf))
  const keys = useKeys(all.map(keyOf))
  const heads = dayHeads(all)
  const unreadKey = firstUnread?.ev.id ?? ''

  // Where the view goes, decided before the rows are chosen (the window follows it).
  const p = prev.current
  if (p.channel !== channel) {
    w.reset()
    Object.assign(p, { first: '', count: 0, focus: '', placed: false })
  }
  if (ws.focus && ws.focus !== p.focus && keys.includes(ws.focus)) {
    w.place = { key: ws.focus, align: 'center' }
    p.focus = ws.focus
    p.placed = true // a permalink is the place to open at
  } else if (!p.placed) {
    // A channel opens at its first unread message (under the divider), else at the bottom,
    // once its opening has loaded back that far.
    w.place = unreadKey ? atDivider(unreadKey) : 'bottom'
    p.placed = ws.reads.settled.has(channel)
  }
  if (!ws.focus) p.focus = ''
  const edit = ws.editRequest && keys.indexOf(ws.editRequest)
  if (typeof edit === 'number' && edit >= 0 && (edit < w.start || edit >= w.end)) w.place = { key: ws.editRequest as string, align: 'center' }
  const win = w.update(keys)

  /** Where the reader is: the divider above the view? scrolled up from the bottom? */
  const measure = (fresh: number) => {
    const el = box.current
    if (!el) return
    const d = el.querySelector<HTMLElement>('.new-divider')
    const above = d ? d.getBoundingClientRect().bottom < el.getBoundingClientRect().top : !!unreadKey && w.above(unreadKey)
    const up = el.scrollHeight - el.scrollTop - el.clientHeight > 80
    const next = { above, up, fresh: up ? fresh : 0, channel }
    if (next.above !== view.above || next.up !== view.up || next.fresh !== view.fresh || view.channel !== channel) setView(next)
  }

  useLayoutEffect(() => {
    w.layout()
    const first = msgs[0]?.ev.id ?? ''
    const arrived = p.channel === channel && first === p.first ? Math.max(0, msgs.length - p.count) : 0
    Object.assign(p, { first, count: msgs.length, channel })
    measure((view.channel === channel ? view.fresh : 0) + arrived)
    // Near the top with older pages left, as a scroll there would: a page of mostly thread
    // replies shows few rows, leaving a view that cannot scroll, so no scroll would ever come.
    // Ten pages in a row that show no new row (a 500-reply thread) leave it to the button,
    // whose press allows ten more.
    const el = box.current
    if (el && el.scrollTop < 300 && t.hasMore && t.loaded && !t.loading && p.placed) {
      const f = fill.current
      f.pages = f.channel === channel && f.rows === msgs.length ? f.pages + 1 : 0
      Object.assign(f, { channel, rows: msgs.length })
      if (f.pages < 10) void act(ws, () => ws.loadOlder(channel))
    }
  })

  const onScroll = () => {
    const el = box.current
    if (!el) return
    w.scrolled()
    measure(view.fresh)
    if (el.scrollTop < 300 && t.hasMore && !t.loading && prev.current.placed) void act(ws, () => ws.loadOlder(channel))
  }

  return (
    <div class="timeline-wrap">
    <div class="timeline" role="log" aria-label="Messages" aria-busy={t.loading} ref={box} onScroll={onScroll} onPointerDown={() => w.press()} tabIndex={0}>
      {t.hasMore && t.loaded && (
        <button type="button" class="quiet older" disabled={t.loading} onClick={() => { fill.current.pages = 0; void act(ws, () => ws.loadOlder(channel)) }}>
          {t.loading ? 'Loading…' : 'Load older messages'}
        </button>
      )}
      {!t.hasMore && t.loaded && <p class="start">This is the start of the channel.</p>}
      {!t.loaded && <p class="start">Loading messages…</p>}
      <div class="spacer" ref={head} style={{ height: `${win.before}px` }} aria-hidden="true" />
      {all.slice(win.start, win.end).map((row) => {
        const key = keyOf(row)
        const day = heads.get(key)
        return (
          <div class={`row${!('m' in row) && ws.focus === key ? ' focus' : ''}`} key={key} data-key={key}>
            {day && <h2 class="day"><span>{day}</span></h2>}
            {'ref' in row ? <ApprovalCard ws={ws} a={row} /> : 'assignee' in row ? <JobCard ws={ws} job={row} /> : (
              <>
                {row.m === firstUnread && <NewDivider />}
                <Message ws={ws} m={row.m} onThread={onThread} inThread={false} grouped={row.grouped && row.m !== firstUnread} />
              </>
            )}
          </div>
        )
      })}
      <div class="spacer" style={{ height: `${win.after}px` }} aria-hidden="true" />
    </div>
      <JumpBar
        above={view.above && view.channel === channel}
        scrolledUp={view.up && view.channel === channel}
        fresh={view.fresh}
        onFirstUnread={() => { if (unreadKey) { w.place = atDivider(unreadKey); w.rerender() } }}
        onLatest={() => { w.place = 'bottom'; w.rerender() }}
      />
    </div>
  )
}

/** The view at the first unread message: its divider near the top, with a little of what was
 * read above it. */
const atDivider = (key: string): Place => ({ key, align: 'top', offset: 56, select: '.new-divider' })

type Row = ReturnType<typeof rows>[number] | Approval | JobView

function keyOf(row: Row): string {
  return 'ref' in row ? row.ref : 'assignee' in row ? row.id : row.m.ev.id
}

/** When a row happened: a card's request, a message's event. */
function atOf(row: Row): number {
  return 'ref' in row || 'assignee' in row ? row.request.created_at : row.m.ev.created_at
}

/** The same array while the keys are the same (the window re-sums heights only on a change). */
function useKeys(keys: string[]): string[] {
  const last = useRef<string[]>([])
  const same = last.current.length === keys.length && keys.every((k, i) => k === last.current[i])
  if (!same) last.current = keys
  return last.current
}

/** Each message and whether it continues the previous message's group: same author, same
 * day, within GROUP_S, neither from a thread. A thread's replies are grouped the same way. */
export function rows(msgs: Msg[]): { m: Msg; grouped: boolean }[] {
  const out: { m: Msg; grouped: boolean }[] = []
  let prev: Msg | null = null
  for (const m of msgs) {
    const at = m.ev.created_at
    const grouped = !!prev && prev.ev.pubkey === m.ev.pubkey && at - prev.ev.created_at < GROUP_S && dayKey(at) === dayKey(prev.ev.created_at) && !m.broadcast && !prev.broadcast
    out.push({ m, grouped })
    prev = m
  }
  return out
}

/** The day heading before the first row of each day, message or card, by the row's key. */
function dayHeads(list: Row[]): Map<string, string> {
  const heads = new Map<string, string>()
  let last = ''
  for (const r of list) {
    const at = atOf(r)
    const key = dayKey(at)
    if (key !== last) heads.set(keyOf(r), dayLabel(new Date(at * 1000)))
    last = key
  }
  return heads
}

/** A card (job, approval) between two messages of one author breaks their group: the message
 * after it shows its author again. */
function afterCards<R extends object>(list: R[]): R[] {
  let card = false
  return list.map((r) => {
    const wasCard = card
    card = !('grouped' in r)
    return wasCard && 'grouped' in r && r.grouped ? { ...r, grouped: false } : r
  })
}

// The local day of a time, by quarter hour (every time zone's offset is a whole number of
// them): a 10,000-message timeline asks for it on each render.
const days = new Map<number, string>()
function dayKey(at: number): string {
  const q = Math.floor(at / 900)
  let key = days.get(q)
  if (key === undefined) {
    key = new Date(q * 900 * 1000).toDateString()
    if (days.size > 20000) days.clear()
    days.set(q, key)
  }
  return key
}

const DAY = new Intl.DateTimeFormat(undefined, { weekday: 'long', day: 'numeric', month: 'long' })
const DAY_YEAR = new Intl.DateTimeFormat(undefined, { weekday: 'long', day: 'numeric', month: 'long', year: 'numeric' })

export function dayLabel(date: Date): string {
  const today = new Date()
  const yesterday = new Date(today.getFullYear(), today.getMonth(), today.getDate() - 1)
  if (date.toDateString() === today.toDateString()) return 'Today'
  if (date.toDateString() === yesterday.toDateString()) return 'Yesterday'
  return (date.getFullYear() === today.getFullYear() ? DAY : DAY_YEAR).format(date)
}
