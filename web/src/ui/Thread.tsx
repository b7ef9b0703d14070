import type { Workspace } from '../workspace'
import { Composer } from './Composer'
import { Message } from './Message'
import { Panel } from './Panel'

export function ThreadPanel({ ws, root, onClose }: { ws: Workspace; root: string; onClose: () => void }) {
  const msgs = ws.threadMessages(root)
  const r = msgs[0]
  return (
    <Panel name="Thread" onClose={onClose}>
      {!r && <p class="hint">Loading thread…</p>}
      {r && (
        <>
          <div class="thread-list">
            {msgs.map((m, i) => (
              <>
                <Message key={m.ev.id} ws={ws} m={m} onThread={() => undefined} inThread />
                {i === 0 && <p class="divider">{msgs.length - 1} {msgs.length === 2 ? 'reply' : 'replies'}</p>}
              </>
            ))}
          </div>
          {ws.channels.get(r.channel)?.member && <Composer ws={ws} channel={r.channel} label="Reply" button="Send reply" placeholder="Reply in thread" replyTo={root} />}
        </>
      )}
    </Panel>
  )
}
