// The channel timeline: newest at the bottom, older pages loaded on scroll (by `until`), live
// events appended; the view stays put when a page is prepended and follows the bottom when
// the reader is already there. A day heading starts each day; consecutive messages of one
// author within a few minutes are grouped under one name. A permalink target (`ws.focus`)
// is scrolled to the middle once and highlighted.
import { Fragment } from 'preact'
import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks'
import type { Msg, Workspace } from '../workspace'
import { workflowsOf } from '../workflows'
import { ApprovalCard, withApprovals } from './ApprovalCard'
import { jobsOf } from '../jobs'
import { JobCard, withJobs } from './JobCard'
import { act } from './hooks'
import { Message } from './Message'
import { JumpBar, NewDivider } from './CatchUp'

const GROUP_S = 5 * 60

export function Timeline({ ws, channel, onThread }: { ws: Workspace; channel: string; onThread: (id: string) => void }) {
  const box = useRef<HTMLDivElement>(null)
  const prev = useRef({ height: 0, top: 0, first: '', count: 0, channel: '', focus: '', placed: false })
  const msgs = ws.visible(channel)
  const t = ws.timeline(channel)
  const approvals = workflowsOf(ws).approvalsIn(channel)
  useEffect(() => workflowsOf(ws).watch(channel), [ws, channel])
  useEffect(() => jobsOf(ws).watch(channel), [ws, channel])
  const jobs = jobsOf(ws).jobsIn(channel)
  const firstUnread = ws.reads.firstUnread(channel, msgs)
  const [view, setView] = useState({ above: false, up: false, fresh: 0, channel })
  const divider = () => box.current?.querySelector<HTMLElement>('.new-divider') ?? null
  /** Where the reader is: the divider above the view? scrolled up from the bottom? */
  const measure = (fresh: number) => {
    const el = box.current
    if (!el) return
    const d = divider()
    const above = !!d && d.offsetTop + d.offsetHeight < el.scrollTop
    const up = el.scrollHeight - el.scrollTop - el.clientHeight > 80
    const next = { above, up, fresh: up ? fresh : 0, channel }
    if (next.above !== view.above || next.up !== view.up || next.fresh !== view.fresh || view.channel !== channel) setView(next)
  }

  useLayoutEffect(() => {
    const el = box.current
    if (!el) return
    const p = prev.current
    const first = msgs[0]?.ev.id ?? ''
    const target = ws.focus && ws.focus !== p.focus ? el.querySelector<HTMLElement>(`article[data-id="${ws.focus}"]`) : null
    if (target) {
      target.scrollIntoView({ block: 'center' })
      p.focus = ws.focus as string
      p.placed = true // a permalink is the place to open at
    } else if (p.channel !== channel || !p.placed) {
      // A channel opens at its first unread message (under the divider), else at the bottom,
      // once its opening has loaded back that far.
      const d = divider()
      if (d) showDivider(el, d)
      else el.scrollTop = el.scrollHeight
      p.placed = ws.reads.settled.has(channel)
    } else if (first !== p.first && msgs.length > p.count && p.count > 0 && p.first) {
      el.scrollTop = p.top + (el.scrollHeight - p.height) // older page prepended: keep the reader's place
    } else if (p.height - p.top - el.clientHeight < 80) {
      el.scrollTop = el.scrollHeight // was at the bottom: follow new messages
    }
    if (!ws.focus) p.focus = ''
    const arrived = p.channel === channel && first === p.first ? Math.max(0, msgs.length - p.count) : 0
    Object.assign(p, { height: el.scrollHeight, top: el.scrollTop, first, count: msgs.length, channel })
    measure((view.channel === channel ? view.fresh : 0) + arrived)
  })

  const onScroll = () => {
    const el = box.current
    if (!el) return
    prev.current.top = el.scrollTop
    prev.current.height = el.scrollHeight
    measure(view.fresh)
    if (el.scrollTop < 300 && t.hasMore && !t.loading && prev.current.placed) void act(ws, () => ws.loadOlder(channel))
  }

  return (
    <div class="timeline-wrap">
    <div class="timeline" role="log" aria-label="Messages" aria-busy={t.loading} ref={box} onScroll={onScroll} tabIndex={0}>
      {t.hasMore && t.loaded && (
        <button type="button" class="quiet older" disabled={t.loading} onClick={() => void act(ws, () => ws.loadOlder(channel))}>
          {t.loading ? 'Loading…' : 'Load older messages'}
        </button>
      )}
      {!t.hasMore && t.loaded && <p class="start">This is the start of the channel.</p>}
      {!t.loaded && <p class="start">Loading messages…</p>}
      {afterCards(withJobs(withApprovals(rows(msgs), approvals, !t.hasMore), jobs, !t.hasMore, (r) => ('ref' in r ? r.request.created_at : r.m.ev.created_at))).map((row) => 'ref' in row ? <ApprovalCard key={row.ref} ws={ws} a={row} /> : 'assignee' in row ? <JobCard key={row.id} ws={ws} job={row} /> : (
        <Fragment key={row.m.ev.id}>
          {row.day && <h2 class="day"><span>{row.day}</span></h2>}
          {row.m === firstUnread && <NewDivider />}
          <Message ws={ws} m={row.m} onThread={onThread} inThread={false} grouped={row.grouped && row.m !== firstUnread} />
        </Fragment>
      ))}
    </div>
      <JumpBar
        above={view.above && view.channel === channel}
        scrolledUp={view.up && view.channel === channel}
        fresh={view.fresh}
        onFirstUnread={() => { const d = divider(); if (box.current && d) showDivider(box.current, d) }}
        onLatest={() => { const el = box.current; if (el) el.scrollTop = el.scrollHeight }}
      />
    </div>
  )
}

/** The divider near the top, with a little of what was read above it. */
function showDivider(el: HTMLElement, d: HTMLElement): void {
  el.scrollTop = Math.max(0, d.offsetTop - el.offsetTop - 56)
}

/** Each message with the day heading to put before it (or '') and whether it continues the
 * previous message's group: same author, same day, within GROUP_S, neither from a thread. */
function rows(msgs: Msg[]): { m: Msg; day: string; grouped: boolean }[] {
  const out: { m: Msg; day: string; grouped: boolean }[] = []
  let lastDay = ''
  let prev: Msg | null = null
  for (const m of msgs) {
    const date = new Date(m.ev.created_at * 1000)
    const key = date.toDateString()
    const day = key !== lastDay ? dayLabel(date) : ''
    const grouped = !day && !!prev && prev.ev.pubkey === m.ev.pubkey && m.ev.created_at - prev.ev.created_at < GROUP_S && !m.broadcast && !prev.broadcast
    out.push({ m, day, grouped })
    lastDay = key
    prev = m
  }
  return out
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

const DAY = new Intl.DateTimeFormat(undefined, { weekday: 'long', day: 'numeric', month: 'long' })
const DAY_YEAR = new Intl.DateTimeFormat(undefined, { weekday: 'long', day: 'numeric', month: 'long', year: 'numeric' })

export function dayLabel(date: Date): string {
  const today = new Date()
  const yesterday = new Date(today.getFullYear(), today.getMonth(), today.getDate() - 1)
  if (date.toDateString() === today.toDateString()) return 'Today'
  if (date.toDateString() === yesterday.toDateString()) return 'Yesterday'
  return (date.getFullYear() === today.getFullYear() ? DAY : DAY_YEAR).format(date)
}
