// The channel timeline: newest at the bottom, older pages loaded on scroll (by `until`), live
// events appended; the view stays put when a page is prepended and follows the bottom when
// the reader is already there. A day heading starts each day; consecutive messages of one
// author within a few minutes are grouped under one name. A permalink target (`ws.focus`)
// is scrolled to the middle once and highlighted.
import { Fragment } from 'preact'
import { useEffect, useLayoutEffect, useRef } from 'preact/hooks'
import type { Msg, Workspace } from '../workspace'
import { workflowsOf } from '../workflows'
import { ApprovalCard, withApprovals } from './ApprovalCard'
import { act } from './hooks'
import { Message } from './Message'

const GROUP_S = 5 * 60

export function Timeline({ ws, channel, onThread }: { ws: Workspace; channel: string; onThread: (id: string) => void }) {
  const box = useRef<HTMLDivElement>(null)
  const prev = useRef({ height: 0, top: 0, first: '', count: 0, channel: '', focus: '' })
  const msgs = ws.visible(channel)
  const t = ws.timeline(channel)
  const approvals = workflowsOf(ws).approvalsIn(channel)
  useEffect(() => workflowsOf(ws).watch(channel), [ws, channel])

  useLayoutEffect(() => {
    const el = box.current
    if (!el) return
    const p = prev.current
    const first = msgs[0]?.ev.id ?? ''
    const target = ws.focus && ws.focus !== p.focus ? el.querySelector<HTMLElement>(`article[data-id="${ws.focus}"]`) : null
    if (target) {
      target.scrollIntoView({ block: 'center' })
      p.focus = ws.focus as string
    } else if (p.channel !== channel) {
      el.scrollTop = el.scrollHeight
    } else if (first !== p.first && msgs.length > p.count && p.count > 0 && p.first) {
      el.scrollTop = p.top + (el.scrollHeight - p.height) // older page prepended: keep the reader's place
    } else if (p.height - p.top - el.clientHeight < 80) {
      el.scrollTop = el.scrollHeight // was at the bottom: follow new messages
    }
    if (!ws.focus) p.focus = ''
    Object.assign(p, { height: el.scrollHeight, top: el.scrollTop, first, count: msgs.length, channel })
  })

  const onScroll = () => {
    const el = box.current
    if (!el) return
    prev.current.top = el.scrollTop
    prev.current.height = el.scrollHeight
    if (el.scrollTop < 300 && t.hasMore && !t.loading) void act(ws, () => ws.loadOlder(channel))
  }

  return (
    <div class="timeline" role="log" aria-label="Messages" aria-busy={t.loading} ref={box} onScroll={onScroll} tabIndex={0}>
      {t.hasMore && t.loaded && (
        <button type="button" class="quiet older" disabled={t.loading} onClick={() => void act(ws, () => ws.loadOlder(channel))}>
          {t.loading ? 'Loading…' : 'Load older messages'}
        </button>
      )}
      {!t.hasMore && t.loaded && <p class="start">This is the start of the channel.</p>}
      {!t.loaded && <p class="start">Loading messages…</p>}
      {withApprovals(rows(msgs), approvals).map((row) => 'ref' in row ? <ApprovalCard key={row.ref} ws={ws} a={row} /> : (
        <Fragment key={row.m.ev.id}>
          {row.day && <h2 class="day"><span>{row.day}</span></h2>}
          <Message ws={ws} m={row.m} onThread={onThread} inThread={false} grouped={row.grouped} />
        </Fragment>
      ))}
    </div>
  )
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

const DAY = new Intl.DateTimeFormat(undefined, { weekday: 'long', day: 'numeric', month: 'long' })
const DAY_YEAR = new Intl.DateTimeFormat(undefined, { weekday: 'long', day: 'numeric', month: 'long', year: 'numeric' })

export function dayLabel(date: Date): string {
  const today = new Date()
  const yesterday = new Date(today.getFullYear(), today.getMonth(), today.getDate() - 1)
  if (date.toDateString() === today.toDateString()) return 'Today'
  if (date.toDateString() === yesterday.toDateString()) return 'Yesterday'
  return (date.getFullYear() === today.getFullYear() ? DAY : DAY_YEAR).format(date)
}
