// Jobs in the browser (jobs spec §9, issue 27 items 4, 5): each 43001 of a channel is a job
// whose state is folded here from its lifecycle events (43002–43006, tied to it by an `e`
// tag) with the relay's own state table, followed live while the channel is on screen. The
// page requests jobs (43001) and stops them (43005). Contents are checked before they are
// shown: what does not validate is kept as raw text for the card to show escaped.
import { firstTag, now, type NEvent, type Tag } from './types'
import type { Workspace } from './workspace'
import { perWorkspace } from './per-workspace'

export const JOB_REQUEST = 43001
export const JOB_ACCEPTED = 43002
export const JOB_PROGRESS = 43003
export const JOB_RESULT = 43004
export const JOB_CANCEL = 43005
export const JOB_FAILED = 43006
const LIFECYCLE = [JOB_ACCEPTED, JOB_PROGRESS, JOB_RESULT, JOB_CANCEL, JOB_FAILED]
const REQUESTED_OUTCOME_MAX_BYTES = 8192
const PROMPT_MAX_BYTES = 65_536
const HELD_JOBS = 200 // the newest requests of a channel read when it opens
const LIFECYCLE_LIMIT = 1000 // their events, newest first (the relay's largest page)
const EARLY_MAX = 500 // jobs whose events came before their request, at most
const HEX64 = /^[0-9a-f]{64}$/

/** The badge's words (§9 item 1, decision 310): a result's disposition names it, `no_artifact`
 * (answered, nothing durable) shows as completed; a result that cannot be read is "no result". */
export type Badge = 'requested' | 'accepted' | 'working' | 'completed' | 'partial' | 'blocked' | 'failed' | 'no result' | 'cancelled'
const DISPOSITION_BADGE: Record<string, Badge> = {
  completed: 'completed', partial: 'partial', blocked: 'blocked', failed: 'failed', no_artifact: 'completed',
}
type Phase = 'requested' | 'accepted' | 'running' | 'completed' | 'failed' | 'cancelled'
const TERMINAL: Phase[] = ['completed', 'failed', 'cancelled']
// kind → (the phases it is legal in, the phase it leads to): jobs spec §5.2, as buzz.jobs.machine.
const OPEN: Phase[] = ['requested', 'accepted', 'running']
const TRANSITIONS: Record<number, [Phase[], Phase]> = {
  [JOB_ACCEPTED]: [['requested'], 'accepted'],
  [JOB_PROGRESS]: [['accepted', 'running'], 'running'],
  [JOB_RESULT]: [OPEN, 'completed'],
  [JOB_FAILED]: [OPEN, 'failed'],
  [JOB_CANCEL]: [OPEN, 'cancelled'],
}

export type PlanItem = { title: string; status: string }
export type Artifact = { kind: string; label: string; reference: string; sourceState?: string }
export type Check = { label: string; status: string; evidence?: string }
export type Result = { outcome: string; disposition: string; artifacts: Artifact[]; verification: Check[]; blocker: string; lastProgress: string }

/** One job as the card shows it. `raw*` hold contents that did not validate. */
export type JobView = {
  id: string
  channel: string
  request: NEvent
  requester: string
  assignee: string
  outcome: string | null
  badge: Badge
  terminal: boolean
  progress: string
  plan: PlanItem[]
  result: Result | null
  resultEvent: NEvent | null
  failure: { code: string; message: string } | null
  cancelledBy: string | null
  raw: string[]
}

type Held = { request: NEvent; events: Map<string, NEvent>; refusal: string | null; stopping: boolean }

function parse(content: string): Record<string, unknown> | null {
  try {
    const v = JSON.parse(content) as unknown
    return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : null
  } catch {
    return null
  }
}

const text = (v: unknown): v is string => typeof v === 'string' && v.trim() !== ''
const bytes = (s: string): number => new TextEncoder().encode(s).length

/** The requested outcome of a 43001, or null when its content is not a valid request. */
export function requestedOutcome(e: NEvent): string | null {
  const c = parse(e.content)
  if (!c || c.schemaVersion !== 1 || !text(c.requestedOutcome)) return null
  return c.requestedOutcome
}

/** A NIP-AJ result document (jobs spec §4.1–§4.2) as shown; null when it does not validate. */
export function readResult(content: string): Result | null {
  const c = parse(content)
  if (!c || c.schemaVersion !== 1 || !text(c.outcome) || typeof c.disposition !== 'string' || !(c.disposition in DISPOSITION_BADGE)) return null
  const artifacts = c.artifacts ?? []
  const verification = c.verification ?? []
  if (!Array.isArray(artifacts) || !Array.isArray(verification)) return null
  const okArtifact = (a: unknown): a is Artifact => !!a && typeof a === 'object' && ['kind', 'label', 'reference'].every((k) => typeof (a as Record<string, unknown>)[k] === 'string')
  const okCheck = (v: unknown): v is Check => !!v && typeof v === 'object' && typeof (v as Check).label === 'string' && typeof (v as Check).status === 'string'
  if (!artifacts.every(okArtifact) || !verification.every(okCheck)) return null
  return {
    outcome: c.outcome,
    disposition: c.disposition,
    artifacts,
    verification,
    blocker: typeof c.blocker === 'string' ? c.blocker : '',
    lastProgress: typeof c.lastProgress === 'string' ? c.lastProgress : '',
  }
}

/** Where an artifact's reference may be opened from the page: http(s), nostr and buzz only
 * (jobs spec §4.5); null for anything else (paths, object ids, other schemes). */
export function openable(reference: string): string | null {
  const m = /^([A-Za-z][A-Za-z0-9+.-]*):/.exec(reference.trim())
  if (!m) return null
  const scheme = m[1].toLowerCase()
  if (scheme === 'nostr' || scheme === 'buzz') return /^[a-z]+:[A-Za-z0-9:/._-]+$/i.test(reference.trim()) ? reference.trim() : null
  if (scheme !== 'http' && scheme !== 'https') return null
  try {
    const u = new URL(reference.trim())
    return u.username || u.password ? null : u.href
  } catch {
    return null
  }
}

/** Fold a job's events with the relay's table (events the table refuses change nothing). */
export function fold(request: NEvent, channel: string, events: NEvent[], relayPubkey: string): JobView {
  const relaySigned = !!relayPubkey && request.pubkey === relayPubkey
  const actor = firstTag(request, 'actor')
  const assignee = request.tags.find((t) => t[0] === 'p')?.[1] ?? ''
  const outcome = requestedOutcome(request)
  const view: JobView = {
    id: request.id, channel, request, assignee, outcome,
    requester: relaySigned && actor && HEX64.test(actor) ? actor : request.pubkey,
    badge: 'requested', terminal: false, progress: '', plan: [], result: null, resultEvent: null, failure: null, cancelledBy: null,
    raw: outcome === null ? [request.content] : [],
  }
  let phase: Phase = 'requested'
  let seq = 0
  const order = [...events].sort((a, b) => a.created_at - b.created_at || a.kind - b.kind)
  for (const e of order) {
    const rule = TRANSITIONS[e.kind]
    if (!rule || !rule[0].includes(phase)) continue
    if (e.kind !== JOB_CANCEL && e.pubkey !== assignee) continue
    const c = parse(e.content)
    if (e.kind === JOB_PROGRESS) {
      if (!c || typeof c.seq !== 'number' || c.seq <= seq) continue
      seq = c.seq
      if (text(c.message)) view.progress = c.message
      if (Array.isArray(c.plan)) view.plan = c.plan.filter((p): p is PlanItem => !!p && typeof p.title === 'string' && typeof p.status === 'string')
    } else if (e.kind === JOB_RESULT) {
      view.resultEvent = e
      view.result = readResult(e.content)
      if (!view.result) view.raw.push(e.content)
    } else if (e.kind === JOB_FAILED) {
      if (c && typeof c.code === 'string' && typeof c.message === 'string') view.failure = { code: c.code, message: c.message }
      else view.raw.push(e.content)
    } else if (e.kind === JOB_CANCEL) {
      view.cancelledBy = e.pubkey
    }
    phase = rule[1]
  }
  view.terminal = TERMINAL.includes(phase)
  if (phase === 'running') view.badge = 'working'
  else if (phase === 'completed') view.badge = view.result ? DISPOSITION_BADGE[view.result.disposition] : 'no result'
  else view.badge = phase
  return view
}

export const jobsOf = perWorkspace((ws) => new JobDesk(ws))

export class JobDesk {
  private jobs = new Map<string, Map<string, Held>>() // channel -> job id -> job
  private early = new Map<string, NEvent[]>() // job id -> lifecycle events seen before their request
  private watching = new Map<string, { n: number; close: () => void }>()

  constructor(private readonly ws: Workspace) {}

  /** The channel's jobs, oldest first. */
  jobsIn(channel: string): JobView[] {
    const held = [...(this.jobs.get(channel)?.values() ?? [])]
    return held
      .sort((a, b) => a.request.created_at - b.request.created_at || (a.request.id < b.request.id ? -1 : 1))
      .map((h) => fold(h.request, channel, [...h.events.values()], this.ws.relayPubkey))
  }

  refusal(id: string): string | null {
    for (const m of this.jobs.values()) if (m.has(id)) return m.get(id)?.refusal ?? null
    return null
  }

  stopping(id: string): boolean {
    for (const m of this.jobs.values()) if (m.has(id)) return m.get(id)?.stopping ?? false
    return false
  }

  /** Follow `channel`'s jobs (stored and new); call the result to stop. New events first, so
   * nothing published while the stored ones load is missed. */
  watch(channel: string): () => void {
    const have = this.watching.get(channel)
    if (have) have.n++
    else {
      const close = this.ws.relay.subscribe([{ kinds: [JOB_REQUEST, ...LIFECYCLE], '#h': [channel], limit: 0 }], (e) => this.ingest(channel, e))
      this.watching.set(channel, { n: 1, close })
      void this.loadStored(channel).catch(() => undefined)
    }
    return () => {
      const w = this.watching.get(channel)
      if (w && --w.n === 0) {
        w.close()
        this.watching.delete(channel)
      }
    }
  }

  /** The newest requests and their own lifecycle events (by `#e`, newest first: a job's end
   * is never cut off by other jobs' progress). */
  private async loadStored(channel: string): Promise<void> {
    const requests = await this.ws.relay.query([{ kinds: [JOB_REQUEST], '#h': [channel], limit: HELD_JOBS }])
    for (const e of requests) this.ingest(channel, e)
    if (!requests.length) return
    const events = await this.ws.relay.query([{ kinds: LIFECYCLE, '#h': [channel], '#e': requests.map((e) => e.id), limit: LIFECYCLE_LIMIT }])
    for (const e of events) this.ingest(channel, e)
  }

  ingest(channel: string, e: NEvent): void {
    if (firstTag(e, 'h') !== channel) return
    let inChannel = this.jobs.get(channel)
    if (!inChannel) this.jobs.set(channel, (inChannel = new Map()))
    if (e.kind === JOB_REQUEST) {
      if (inChannel.has(e.id)) return
      const held: Held = { request: e, events: new Map(), refusal: null, stopping: false }
      for (const early of this.early.get(e.id) ?? []) held.events.set(early.id, early)
      this.early.delete(e.id)
      inChannel.set(e.id, held)
      this.ws.needProfiles([e.pubkey, ...e.tags.filter((t) => t[0] === 'p' && HEX64.test(t[1] ?? '')).map((t) => t[1])])
    } else if (LIFECYCLE.includes(e.kind)) {
      const job = e.tags.find((t) => t[0] === 'e')?.[1] ?? ''
      const held = inChannel.get(job)
      if (held) held.events.set(e.id, e)
      else {
        this.early.set(job, [...(this.early.get(job) ?? []).slice(-20), e])
        if (this.early.size > EARLY_MAX) this.early.delete(this.early.keys().next().value as string)
      }
      if (e.kind === JOB_CANCEL) this.ws.needProfiles([e.pubkey])
    } else return
    this.ws.changed()
  }

  /** The agent members of `channel`: members whose profile names an owner (NIP-OA). */
  agentsIn(channel: string): string[] {
    return [...(this.ws.roles.get(channel)?.keys() ?? [])].filter((pk) => pk !== this.ws.me.pubkey && !!this.ws.profiles.get(pk)?.owner)
  }

  /** May I stop this job (jobs spec §5.1): its requester, the assignee's owner, a channel owner or admin. */
  canStop(job: JobView): boolean {
    const me = this.ws.me.pubkey
    return !job.terminal && (job.requester === me || this.ws.profiles.get(job.assignee)?.owner === me || this.ws.isElevated(job.channel))
  }

  /** Publish a 43001 (jobs spec §3); `source`: the message it was asked from. Resolves with its id. */
  async request(channel: string, agent: string, outcome: string, details: string, source: NEvent | null): Promise<string> {
    const wanted = outcome.trim()
    if (!wanted) throw new Error('Write the outcome you want first.')
    if (bytes(wanted) > REQUESTED_OUTCOME_MAX_BYTES) throw new Error(`The requested outcome is at most ${REQUESTED_OUTCOME_MAX_BYTES} bytes.`)
    const parts = [wanted, details.trim()]
    if (source) parts.push(`About this message by ${this.ws.nameOf(source.pubkey)} (event ${source.id}):\n${source.content}`)
    const prompt = parts.filter(Boolean).join('\n\n')
    if (bytes(prompt) > PROMPT_MAX_BYTES) throw new Error(`The instructions are at most ${PROMPT_MAX_BYTES} bytes.`)
    const body: Record<string, unknown> = { schemaVersion: 1, requestedOutcome: wanted, prompt }
    if (source) body.source = { kind: 'message', event: source.id, channel }
    const tags: Tag[] = [['h', channel], ['p', agent]]
    const ev = await this.ws.relay.publish({ kind: JOB_REQUEST, created_at: now(), tags, content: JSON.stringify(body) })
    this.ingest(channel, ev)
    return ev.id
  }

  /** The job's lifecycle events again, from the relay. */
  private async reload(job: JobView): Promise<void> {
    const found = await this.ws.relay.query([{ kinds: LIFECYCLE, '#h': [job.channel], '#e': [job.id] }])
    for (const e of found) this.ingest(job.channel, e)
  }

  /** Publish a 43005 for `job`; a refusal of the relay is kept for the card. */
  async stop(job: JobView): Promise<void> {
    const held = this.jobs.get(job.channel)?.get(job.id)
    if (!held) return
    held.refusal = null
    held.stopping = true
    this.ws.changed()
    const tags: Tag[] = [['h', job.channel], ['e', job.id, '', 'reply'], ['p', job.assignee]]
    try {
      const ev = await this.ws.relay.publish({ kind: JOB_CANCEL, created_at: now(), tags, content: JSON.stringify({ schemaVersion: 1, reason: `stopped by ${this.ws.nameOf(this.ws.me.pubkey)}` }) })
      this.ingest(job.channel, ev)
      this.ws.stoppedTurn(job.channel, job.assignee)
    } catch (e) {
      held.refusal = e instanceof Error ? e.message : String(e)
      // Refused as already ended: what ended it may not have reached this page yet.
      if (held.refusal.startsWith('invalid: job is')) void this.reload(job).catch(() => undefined)
    } finally {
      held.stopping = false
      this.ws.changed()
    }
  }
}
