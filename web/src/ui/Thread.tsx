import { Fragment } from 'preact'
import { useLayoutEffect, useRef } from 'preact/hooks'
import type { Workspace } from '../workspace'
import { Composer } from './Composer'
import { act } from './hooks'
import { Message } from './Message'
import { Panel } from './Panel'
import { rows } from './Timeline'

export function ThreadPanel({ ws, root, onClose }: { ws: Workspace; root: string; onClose: () => void }) {
  const msgs = ws.threadMessages(root)
  const r = msgs[0]
  const paging = ws.threadPaging(root)
  const replies = msgs.length - 1
  // The replies grouped as the channel's messages are (the first under the divider shows its author)
  const grouped = new Set(rows(msgs.slice(1)).filter((row) => row.grouped).map((row) => row.m.ev.id))
  const list = useRef<HTMLDivElement>(null)
  const shown = useRef('')
  // A permalink to a reply: scroll to it once it is here.
  useLayoutEffect(() => {
    if (!ws.focus || shown.current === ws.focus) return
    const el = list.current?.querySelector<HTMLElement>(`article[data-id="${ws.focus}"]`)
    if (el) {
      el.scrollIntoView({ block: 'center' })
      shown.current = ws.focus
    }
  })
  return (
    <Panel name="Thread" onClose={onClose}>
      {!r && <p class="hint">Loading thread…</p>}
      {r && (
        <>
          <div class="thread-list" ref={list}>
            {msgs.map((m, i) => (
              <Fragment key={m.ev.id}>
                <Message ws={ws} m={m} onThread={() => undefined} inThread grouped={grouped.has(m.ev.id)} />
                {i === 0 && (
                  <>
                    <p class="divider">{replies}{paging.hasMore ? '+' : ''} {replies === 1 && !paging.hasMore ? 'reply' : 'replies'}</p>
                    {/* A long thread opens at its newest replies; the older ones come a page at a time. */}
                    {paging.hasMore && (
                      <button type="button" class="quiet older-replies" disabled={paging.loading} onClick={() => void act(ws, () => ws.loadOlderReplies(root))}>
                        {paging.loading ? 'Loading…' : 'Load older replies'}
                      </button>
                    )}
                  </>
                )}
              </Fragment>
            ))}
          </div>
          {ws.channels.get(r.channel)?.member && <Composer ws={ws} channel={r.channel} label="Reply" button="Send reply" placeholder="Reply in thread" replyTo={root} />}
        </>
      )}
    </Panel>
  )
}
