// The channel timeline: newest at the bottom, older pages loaded on scroll (by `until`), live
// events appended; the view stays put when a page is prepended and follows the bottom when
// the reader is already there.
import { useLayoutEffect, useRef } from 'preact/hooks'
import type { Workspace } from '../workspace'
import { act } from './hooks'
import { Message } from './Message'

export function Timeline({ ws, channel, onThread }: { ws: Workspace; channel: string; onThread: (id: string) => void }) {
  const box = useRef<HTMLDivElement>(null)
  const prev = useRef({ height: 0, top: 0, first: '', count: 0, channel: '' })
  const msgs = ws.visible(channel)
  const t = ws.timeline(channel)

  useLayoutEffect(() => {
    const el = box.current
    if (!el) return
    const p = prev.current
    const first = msgs[0]?.ev.id ?? ''
    if (p.channel !== channel) {
      el.scrollTop = el.scrollHeight
    } else if (first !== p.first && msgs.length > p.count && p.count > 0 && p.first) {
      el.scrollTop = p.top + (el.scrollHeight - p.height) // older page prepended: keep the reader's place
    } else if (p.height - p.top - el.clientHeight < 80) {
      el.scrollTop = el.scrollHeight // was at the bottom: follow new messages
    }
    prev.current = { height: el.scrollHeight, top: el.scrollTop, first, count: msgs.length, channel }
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
      {msgs.map((m) => <Message key={m.ev.id} ws={ws} m={m} onThread={onThread} inThread={false} />)}
    </div>
  )
}
