// Where my message is: *Sending…*, *Sent*, or *Not sent* with a Retry that sends the same
// event again (outbox.ts).
import type { Msg, Workspace } from '../workspace'

export function SendState({ ws, m }: { ws: Workspace; m: Msg }) {
  const s = ws.outbox.state(m.ev.id)
  if (!s) return null
  if (s.state === 'failed') {
    return (
      <span class="send-state failed" title={s.error}>
        Not sent
        <button type="button" class="link" onClick={() => void ws.outbox.retry(m.ev.id)}>Retry</button>
      </span>
    )
  }
  return <span class={`send-state ${s.state}`}>{s.state === 'sending' ? 'Sending…' : 'Sent'}</span>
}
