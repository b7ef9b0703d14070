// A workflow's approval request (46010) in the timeline (workflows.md §18 item 5): the workflow,
// its message, who may decide and until when; Approve / Deny (with an optional note) for a
// designated approver, and once the relay records the decision (46011/46012) who made it and
// when, without the buttons. A refusal of the relay shows on the card.
import { useState } from 'preact/hooks'
import { workflowsOf, type Approval } from '../workflows'
import type { Msg, Workspace } from '../workspace'
import '../workflows.css'
import { stamp } from './Workflows'

export function ApprovalCard({ ws, a }: { ws: Workspace; a: Approval }) {
  const [note, setNote] = useState('')
  const [busy, setBusy] = useState(false)
  const mine = a.approvers.includes(ws.me.pubkey)
  const expired = a.expiresAt !== null && a.expiresAt * 1000 < Date.now()
  const decide = async (grant: boolean) => {
    setBusy(true)
    await workflowsOf(ws).decide(a, grant, note.trim())
    setBusy(false)
  }
  const d = a.decision
  return (
    <article class={`approval-card ${d ? (d.granted ? 'granted' : 'denied') : ''}`} aria-label={`Approval: ${a.workflowName}`} data-id={a.request.id}>
      <header>
        <span class="tag">workflow</span>
        <strong>Approval: {a.workflowName}</strong>
        <time class="fine" dateTime={new Date(a.request.created_at * 1000).toISOString()}>{stamp(a.request.created_at)}</time>
      </header>
      {a.message && <p class="approval-message">{a.message}</p>}
      <p class="fine">
        Approvers: {a.approvers.length ? a.approvers.map((p) => ws.nameOf(p)).join(', ') : a.approverSpec}
        {a.expiresAt !== null && <> · expires {stamp(a.expiresAt)}</>}
      </p>
      {d ? (
        <p class="approval-outcome" role="status">
          {d.granted ? 'Approved' : d.expired ? 'Expired' : 'Denied'}
          {d.by && <> by {ws.nameOf(d.by)}</>} · {stamp(d.at)}
          {d.note && <> · “{d.note}”</>}
        </p>
      ) : mine && !expired ? (
        <div class="approval-actions">
          <input type="text" aria-label="Approval note" placeholder="Note (optional)" maxLength={1000} value={note} onInput={(e) => setNote(e.currentTarget.value)} />
          <button type="button" disabled={busy} onClick={() => void decide(true)}>Approve</button>
          <button type="button" class="quiet danger" disabled={busy} onClick={() => void decide(false)}>Deny</button>
        </div>
      ) : (
        <p class="fine">{expired ? 'This request has expired.' : 'Waiting for a decision.'}</p>
      )}
      {a.refusal && <p class="error" role="alert">{a.refusal}</p>}
    </article>
  )
}

/** The timeline's rows with each approval card placed before the first message newer than it;
 * while older pages are still to load (`complete` false), cards older than the first row wait
 * for their page rather than gather at the top. */
export function withApprovals<T extends { m: Msg }>(rows: T[], all: Approval[], complete: boolean): (T | Approval)[] {
  const from = complete || !rows.length ? -Infinity : rows[0].m.ev.created_at
  const approvals = all.filter((a) => a.request.created_at >= from)
  if (!approvals.length) return rows
  const out: (T | Approval)[] = []
  let i = 0
  for (const r of rows) {
    while (i < approvals.length && approvals[i].request.created_at < r.m.ev.created_at) out.push(approvals[i++])
    out.push(r)
  }
  while (i < approvals.length) out.push(approvals[i++])
  return out
}
