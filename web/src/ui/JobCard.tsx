// A job in the timeline (jobs spec §9): the requested outcome, assignee, requester and time,
// a live status badge, the latest progress line and the plan while it works, then the result
// (outcome, artifacts as safe links or file cards, verification, blocker) or the failure's code
// and message. Stop (43005) for those who may cancel, while the job runs; a relay refusal shows
// on the card. Every text here is the agent's or the requester's: rendered as text, never HTML.
import { useEffect, useRef, useState } from 'preact/hooks'
import { attachmentsOf } from '../render/attachments'
import { jobsOf, openable, type Artifact, type JobView } from '../jobs'
import type { Msg, Workspace } from '../workspace'
import '../jobs.css'
import { FULL } from './Message'
import { Files } from './Files'
import { humanError } from './hooks'
import { GrantAccess, declinedAsker } from './Grant'

const TIME = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit' })

export function JobCard({ ws, job }: { ws: Workspace; job: JobView }) {
  const desk = jobsOf(ws)
  const title = (job.outcome ?? '').split('\n')[0].trim() || 'unreadable request'
  const when = new Date(job.request.created_at * 1000)
  const refusal = desk.refusal(job.id)
  const r = job.result
  const files = job.resultEvent ? attachmentsOf(job.resultEvent.tags) : []
  const attached = new Set(files.map((f) => f.url))
  const declined = declinedAsker(ws, job) // my agent declined someone: I may let them in here
  return (
    <article class={`job-card b-${job.badge.replace(' ', '-')}`} aria-label={`Job: ${title}`} data-id={job.id}>
      <header>
        <span class="tag">job</span>
        <strong class="job-title">{title}</strong>
        <span class={`job-badge b-${job.badge.replace(' ', '-')}`} role="status">{job.badge}</span>
      </header>
      <p class="fine">
        {ws.nameOf(job.requester)} asked {ws.nameOf(job.assignee)} · <time dateTime={when.toISOString()} title={FULL.format(when)}>{TIME.format(when)}</time>
      </p>
      {job.outcome !== null && job.outcome.includes('\n') && <p class="job-text">{job.outcome}</p>}
      {!job.terminal && job.progress && <p class="job-progress">{job.progress}</p>}
      {!job.terminal && job.plan.length > 0 && (
        <ul class="job-plan" aria-label="Plan">
          {job.plan.map((p) => (
            <li class={`p-${p.status}`}>
              <input type="checkbox" checked={p.status === 'completed'} disabled aria-label={`${p.title} (${p.status.replace('_', ' ')})`} />
              <span aria-hidden="true">{p.title}</span>
            </li>
          ))}
        </ul>
      )}
      {r && (
        <div class="job-result">
          <p class="job-text">{r.outcome}</p>
          {r.blocker && <p class="job-blocker"><strong>Blocked:</strong> {r.blocker}</p>}
          {files.length > 0 && <Files ws={ws} files={files} />}
          {r.artifacts.filter((a) => !attached.has(a.reference)).length > 0 && (
            <ul class="job-artifacts" aria-label="Artifacts">
              {r.artifacts.filter((a) => !attached.has(a.reference)).map((a) => <ArtifactRow a={a} />)}
            </ul>
          )}
          {r.verification.length > 0 && (
            <ul class="job-checks" aria-label="Verification">
              {r.verification.map((v) => (
                <li><span class={`verdict c-${v.status}`}>{v.status.replace('_', ' ')}</span> {v.label}{v.evidence && <span class="fine"> · {v.evidence}</span>}</li>
              ))}
            </ul>
          )}
        </div>
      )}
      {job.failure && <p class="job-failure"><strong>{job.failure.code}</strong>: {job.failure.message}</p>}
      {declined && <GrantAccess ws={ws} refused={declined} />}
      {job.cancelledBy && <p class="fine">Stopped by {ws.nameOf(job.cancelledBy)}</p>}
      {job.raw.map((raw) => <pre class="job-raw" aria-label="Unreadable content">{raw}</pre>)}
      {desk.canStop(job) && (
        <div class="job-actions">
          <button type="button" class="quiet danger" disabled={desk.stopping(job.id)} onClick={() => void desk.stop(job)}>Stop</button>
        </div>
      )}
      {refusal && <p class="error" role="alert">{refusal}</p>}
    </article>
  )
}

function ArtifactRow({ a }: { a: Artifact }) {
  const href = openable(a.reference)
  const file = a.kind === 'file' || a.kind === 'media'
  return (
    <li class={file ? 'file-card' : ''}>
      <span class="tag">{a.kind.replace('_', ' ')}</span>{' '}
      {href ? (
        <a href={href} target="_blank" rel="noopener noreferrer nofollow">{a.label}</a>
      ) : (
        <>
          <span>{a.label}</span> <code>{a.reference}</code>
        </>
      )}
      {a.sourceState && <span class="fine"> · {a.sourceState}</span>}
    </li>
  )
}

/** The timeline's rows with each job card placed before the first message newer than it;
 * while older pages are still to load, jobs older than the first row wait for their page. */
export function withJobs<R>(rows: R[], jobs: JobView[], complete: boolean, at: (row: R) => number): (R | JobView)[] {
  const from = complete || !rows.length ? -Infinity : at(rows[0])
  const shown = jobs.filter((j) => j.request.created_at >= from)
  if (!shown.length) return rows
  const out: (R | JobView)[] = []
  let i = 0
  for (const r of rows) {
    while (i < shown.length && shown[i].request.created_at < at(r)) out.push(shown[i++])
    out.push(r)
  }
  while (i < shown.length) out.push(shown[i++])
  return out
}

/** "Ask agent": choose an agent member of the channel and write the outcome wanted; a 43001. */
export function AskAgentDialog({ ws, channel, source, onClose }: { ws: Workspace; channel: string; source: Msg | null; onClose: () => void }) {
  const ref = useRef<HTMLDialogElement>(null)
  const desk = jobsOf(ws)
  const agents = desk.agentsIn(channel).sort((a, b) => ws.nameOf(a).localeCompare(ws.nameOf(b)))
  const [agent, setAgent] = useState(agents[0] ?? '')
  const [outcome, setOutcome] = useState('')
  const [details, setDetails] = useState('')
  const [error, setError] = useState('')
  const [busy, setBusy] = useState(false)
  useEffect(() => ref.current?.showModal(), [])
  useEffect(() => {
    if (!agent && agents[0]) setAgent(agents[0])
  }, [agents.join()])

  const ask = async (e: Event) => {
    e.preventDefault()
    if (!agent) return setError('No agent is a member of this channel.')
    setBusy(true)
    try {
      await desk.request(channel, agent, outcome, details, source?.ev ?? null)
      onClose()
    } catch (err) {
      setError(humanError(err))
      setBusy(false)
    }
  }

  return (
    <dialog ref={ref} class="ask-agent" aria-label="Ask agent" onClose={onClose} onCancel={onClose}>
      <form onSubmit={ask}>
        <h2>Ask agent</h2>
        {source && <p class="fine">About {ws.nameOf(source.ev.pubkey)}’s message: “{source.content.slice(0, 140)}”</p>}
        {agents.length ? (
          <label>
            Agent
            <select value={agent} onChange={(e) => setAgent(e.currentTarget.value)}>
              {agents.map((pk) => <option value={pk}>{ws.nameOf(pk)} (agent of {ws.nameOf(ws.profiles.get(pk)?.owner ?? '')})</option>)}
            </select>
          </label>
        ) : (
          <p class="hint">No agent is a member of this channel: add one in Members first.</p>
        )}
        <label>
          Requested outcome
          <textarea value={outcome} required maxLength={8192} placeholder="What should come out of it?" onInput={(e) => setOutcome(e.currentTarget.value)} />
        </label>
        <label>
          Details (optional)
          <textarea value={details} maxLength={60000} onInput={(e) => setDetails(e.currentTarget.value)} />
        </label>
        {error && <p class="error" role="alert">{error}</p>}
        <div class="row">
          <button type="submit" disabled={busy || !agents.length}>Ask</button>
          <button type="button" class="quiet" onClick={onClose}>Cancel</button>
        </div>
      </form>
    </dialog>
  )
}
