// Workflows in the browser (issue 28 item 9; workflows.md §18), over the public protocol only:
// definitions are 30620s signed here (with `expected-revision` when updating), runs start with a
// 46020, approvals are answered with a 46030/46031; the lists, runs and validation come from the
// relay's REST routes with a NIP-98 header. Lifecycle (46001–46007) and approval (46010–46012)
// events arrive relay-signed in the channel and drive the live updates.
import { sha256 } from '@noble/hashes/sha2.js'
import { bytesToHex } from '@noble/hashes/utils.js'
import { firstTag, now, type NEvent, type Tag } from './types'
import type { Workspace } from './workspace'
import { perWorkspace } from './per-workspace'

export const DEFINITION = 30620
export const LIFECYCLE = [46001, 46002, 46003, 46004, 46005, 46006, 46007]
export const APPROVAL_REQUESTED = 46010
export const APPROVAL_GRANTED = 46011
export const APPROVAL_DENIED = 46012
const MANUAL_TRIGGER = 46020
const GRANT = 46030
const DENY = 46031
const HTTP_AUTH = 27235
export const VALIDATE_DEBOUNCE_MS = 500 // workflows.md §19
const ENABLED_LINE = /^enabled:[^\n]*$/m

export type Workflow = {
  id: string
  name: string
  description: string | null
  owner: string
  channel_id: string
  enabled: boolean
  status: string
  trigger: { on: string; emoji?: string }
  revision: string
  next_fire_at: number | null
  effectively_enabled?: boolean
  last_run?: { id: string; status: string; created_at: number } | null
}

export type StepTrace = {
  step_id: string
  index: number
  action: string
  status: string
  attempts: number
  started_at: number | null
  completed_at: number | null
  output?: unknown
  error_code?: string
  error_message?: string
}

export type Run = {
  id: string
  workflow_id: string
  status: string
  execution_trace: StepTrace[]
  started_at: number | null
  completed_at: number | null
  error_code: string | null
  error_message: string | null
  created_at: number
}

export type RunsCursor = { before: string; before_id: string }
export type Problem = { path: string; line: number | null; column: number | null; message: string }
export type Verdict = { valid: boolean; errors: Problem[]; warnings: Problem[]; next_fires: number[] }

/** A 46010 in the channel and, once made, its decision (46011/46012 with the same `d`). */
export type Approval = {
  ref: string
  request: NEvent
  workflowName: string
  message: string
  approverSpec: string
  expiresAt: number | null
  approvers: string[]
  decision: { granted: boolean; expired: boolean; by: string | null; at: number; note: string } | null
  refusal: string | null
}

/** An HTTP refusal of the workflow routes: the relay's `error`, else the status. */
export class RestError extends Error {
  constructor(readonly status: number, message: string) {
    super(message)
  }
}

/** The definition with its top-level `enabled` set, every other byte kept (workflows.md §6.8 item 1). */
export function withEnabled(yaml: string, enabled: boolean): string {
  const line = `enabled: ${enabled ? 'true' : 'false'}`
  if (ENABLED_LINE.test(yaml)) return yaml.replace(ENABLED_LINE, line)
  return yaml + (yaml.endsWith('\n') || !yaml ? '' : '\n') + line + '\n'
}

/** Inputs typed for a run: a JSON object, else the reason it is not one. */
export function parseInputs(text: string): Record<string, unknown> | string {
  if (!text.trim()) return {}
  try {
    const v = JSON.parse(text) as unknown
    if (v && typeof v === 'object' && !Array.isArray(v)) return v as Record<string, unknown>
  } catch (e) {
    return `Inputs are not JSON: ${e instanceof Error ? e.message : String(e)}`
  }
  return 'Inputs must be a JSON object, such as {"build": "42"}'
}

export function problemText(p: Problem): string {
  const where = p.line !== null && p.line !== undefined ? `line ${p.line}${p.column !== null ? `, column ${p.column}` : ''}: ` : ''
  return `${where}${p.path ? p.path + ': ' : ''}${p.message}`
}

function parse(content: string): Record<string, unknown> {
  try {
    const v = JSON.parse(content) as unknown
    return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {}
  } catch {
    return {}
  }
}

export const workflowsOf = perWorkspace((ws) => new WorkflowDesk(ws))

export class WorkflowDesk {
  private approvals = new Map<string, Map<string, Approval>>() // channel -> reference -> approval
  private decisions = new Map<string, NEvent>() // reference -> 46011/46012 seen before its 46010
  private watching = new Map<string, { n: number; close: () => void }>()
  private runListeners = new Set<(channel: string) => void>()

  constructor(private readonly ws: Workspace) {}

  // -- REST with NIP-98 ------------------------------------------------------------------
  private async rest<T>(method: 'GET' | 'POST', path: string, body?: unknown): Promise<T> {
    const raw = body === undefined ? undefined : JSON.stringify(body)
    const url = location.origin + path
    // A random tag keeps two equal requests in one second from being one event, which the
    // relay's replay guard would refuse the second time.
    const tags: Tag[] = [['u', url], ['method', method], ['nonce', bytesToHex(crypto.getRandomValues(new Uint8Array(8)))]]
    if (raw !== undefined) tags.push(['payload', bytesToHex(sha256(new TextEncoder().encode(raw)))])
    const auth = await this.ws.me.sign({ kind: HTTP_AUTH, created_at: now(), tags, content: '' })
    const headers: Record<string, string> = { Authorization: `Nostr ${btoa(JSON.stringify(auth))}` }
    if (raw !== undefined) headers['Content-Type'] = 'application/json'
    const r = await fetch(url, { method, headers, body: raw })
    const answer = (await r.json().catch(() => ({}))) as Record<string, unknown>
    if (!r.ok) throw new RestError(r.status, String(answer.error ?? `the relay answered HTTP ${r.status}`))
    return answer as T
  }

  list(channel: string): Promise<{ workflows: Workflow[] }> {
    return this.rest('GET', `/workflows?channel=${encodeURIComponent(channel)}`)
  }

  get(id: string): Promise<{ workflow: Workflow; yaml: string | null }> {
    return this.rest('GET', `/workflows/${encodeURIComponent(id)}`)
  }

  /** One page of runs, newest first; `next` is the cursor of the page after it (keyset paging). */
  runs(id: string, limit = 20, before: RunsCursor | null = null): Promise<{ runs: Run[]; next: RunsCursor | null }> {
    const q = new URLSearchParams({ limit: String(limit) })
    if (before) {
      q.set('before', before.before)
      q.set('before_id', before.before_id)
    }
    return this.rest('GET', `/workflows/${encodeURIComponent(id)}/runs?${q}`)
  }

  validate(yaml: string, channel: string): Promise<Verdict> {
    return this.rest('POST', '/workflows/validate', { yaml, channel_id: channel })
  }

  // -- signed events ---------------------------------------------------------------------
  /** Publish a definition (new when `id` is null); resolves with its id and, for a webhook
   * trigger, the secret the relay shows once. Rejects with the relay's `invalid:` reason. */
  async save(channel: string, yaml: string, id: string | null, expected: string | null): Promise<{ id: string; secret: string | null }> {
    const wid = id ?? crypto.randomUUID()
    const tags: Tag[] = [['d', wid], ['h', channel]]
    let created = now()
    if (expected) {
      tags.push(['expected-revision', expected])
      // A new version must be newer than the head, also when saved within the head's second
      // (an addressable event with an equal created_at may lose to the one it replaces).
      const [head] = await this.ws.relay.query([{ ids: [expected] }])
      if (head) created = Math.max(created, head.created_at + 1)
    }
    const ev = await this.ws.me.sign({ kind: DEFINITION, created_at: created, tags, content: yaml })
    const answer = await this.ws.relay.publishSigned(ev)
    const m = /^response:(.*)$/s.exec(answer)
    const secret = m ? (parse(m[1]).webhook_secret as string | undefined) ?? null : null
    return { id: wid, secret }
  }

  async setEnabled(id: string, enabled: boolean): Promise<void> {
    const got = await this.get(id)
    await this.save(got.workflow.channel_id, withEnabled(got.yaml ?? '', enabled), id, got.workflow.revision)
  }

  /** Delete a definition: a kind 5 naming its address (as `buzz workflows delete`). */
  async remove(w: Workflow): Promise<void> {
    const tags: Tag[] = [['a', `${DEFINITION}:${w.owner}:${w.id}`], ['k', String(DEFINITION)], ['h', w.channel_id]]
    await this.ws.relay.publish({ kind: 5, created_at: now(), tags, content: '' })
  }

  /** Run now (46020), with a JSON object of inputs (`trigger_<key>` in the run, §7.2 item 3);
   * resolves with the run id the relay names. */
  async trigger(id: string, inputs?: Record<string, unknown>): Promise<string | null> {
    const content = inputs && Object.keys(inputs).length ? JSON.stringify(inputs) : ''
    const ev = await this.ws.me.sign({ kind: MANUAL_TRIGGER, created_at: now(), tags: [['d', id]], content })
    const answer = await this.ws.relay.publishSigned(ev)
    const m = /^response:(.*)$/s.exec(answer)
    return m ? ((parse(m[1]).run_id as string | undefined) ?? null) : null
  }

  async decide(a: Approval, grant: boolean, note = ''): Promise<void> {
    a.refusal = null
    const tags: Tag[] = [['d', a.ref], ['e', a.request.id]]
    try {
      await this.ws.relay.publish({ kind: grant ? GRANT : DENY, created_at: now(), tags, content: note })
    } catch (e) {
      a.refusal = e instanceof Error ? e.message : String(e)
      this.ws.changed()
    }
  }

  // -- the channel's workflow events -----------------------------------------------------
  approvalsIn(channel: string): Approval[] {
    return [...(this.approvals.get(channel)?.values() ?? [])].sort((a, b) => a.request.created_at - b.request.created_at)
  }

  /** Called with the channel whenever a lifecycle event or a definition arrives there. */
  onRuns(fn: (channel: string) => void): () => void {
    this.runListeners.add(fn)
    return () => this.runListeners.delete(fn)
  }

  /** Follow `channel`'s approvals (stored and new) and lifecycle events (new); call the result to stop. */
  watch(channel: string): () => void {
    const have = this.watching.get(channel)
    if (have) have.n++
    else {
      const close = this.ws.relay.subscribe(
        [
          { kinds: [APPROVAL_REQUESTED, APPROVAL_GRANTED, APPROVAL_DENIED], '#h': [channel], limit: 200 },
          { kinds: [...LIFECYCLE, DEFINITION], '#h': [channel], limit: 0 },
        ],
        (e) => this.ingest(channel, e),
      )
      this.watching.set(channel, { n: 1, close })
    }
    return () => {
      const w = this.watching.get(channel)
      if (w && --w.n === 0) {
        w.close()
        this.watching.delete(channel)
      }
    }
  }

  private relaySigned(e: NEvent): boolean {
    return !this.ws.relayPubkey || e.pubkey === this.ws.relayPubkey
  }

  private ingest(channel: string, e: NEvent): void {
    if (e.kind === DEFINITION || LIFECYCLE.includes(e.kind)) {
      for (const fn of this.runListeners) fn(channel)
      return
    }
    if (!this.relaySigned(e)) return
    const ref = firstTag(e, 'd')
    if (!ref) return
    let inChannel = this.approvals.get(channel)
    if (!inChannel) this.approvals.set(channel, (inChannel = new Map()))
    if (e.kind === APPROVAL_REQUESTED) {
      if (inChannel.has(ref)) return
      const c = parse(e.content)
      const a: Approval = {
        ref,
        request: e,
        workflowName: String(c.workflow_name ?? 'workflow'),
        message: String(c.message ?? ''),
        approverSpec: String(c.approver_spec ?? ''),
        expiresAt: typeof c.expires_at === 'number' ? c.expires_at : null,
        approvers: e.tags.filter((t) => t[0] === 'p' && t[1]).map((t) => t[1]),
        decision: null,
        refusal: null,
      }
      inChannel.set(ref, a)
      this.ws.needProfiles(a.approvers)
      const early = this.decisions.get(ref)
      if (early) this.decided(a, early)
    } else {
      const a = inChannel.get(ref)
      if (a) this.decided(a, e)
      else this.decisions.set(ref, e)
    }
    this.ws.changed()
  }

  private decided(a: Approval, e: NEvent): void {
    const c = parse(e.content)
    const by = typeof c.approver === 'string' ? c.approver : (typeof c.approver_pubkey === 'string' ? c.approver_pubkey : null)
    if (by) this.ws.needProfiles([by])
    a.decision = { granted: e.kind === APPROVAL_GRANTED, expired: c.decision === 'expired', by, at: e.created_at, note: typeof c.note === 'string' ? c.note : '' }
    a.refusal = null
  }
}

/** The owner a relay-signed workflow message speaks for (workflows.md §18 item 6), else null. */
export function workflowOwner(e: NEvent, relayPubkey: string): string | null {
  if (!relayPubkey || e.pubkey !== relayPubkey || firstTag(e, 'buzz:workflow') !== 'true') return null
  const owner = firstTag(e, 'buzz:workflow-owner') ?? firstTag(e, 'actor')
  return owner && /^[0-9a-f]{64}$/.test(owner) ? owner : null
}
