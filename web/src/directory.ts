// The directory of people and agents (jobs spec §13.1): the active members of every channel I
// can read (their 39002) and my own agents; for an agent its owner (NIP-OA), its persona and
// whom it answers (the owner's 30177; a 30177 by anyone else is ignored), and its live status
// from its work-status snapshots (30181, one per channel, as private as the channel: the relay
// never hands me one of a channel I cannot read). A snapshot older than 600 s is stale.
import { firstTag, now, type NEvent } from './types'
import type { Workspace } from './workspace'
import { perWorkspace } from './per-workspace'

export const MANAGED_AGENT = 30177
export const PERSONA = 30175
export const WORK_STATUS = 30181
export const STALE_S = 600 // WORK_STATUS_STALE_S
export const ANSWER_MODES = ['owner-only', 'members', 'anyone', 'allowlist'] as const
export const PARALLELISM_MAX = 32
const HEX64 = /^[0-9a-f]{64}$/

export type Snapshot = { channel: string; status: string; updatedAt: number; queued: number; respondTo: string | null; title: string; at: number }
export type Status = { state: 'working' | 'idle' | 'offline'; channels: { id: string; title: string }[]; queued: number }

type Fields = Record<string, unknown>

function parse(content: string): Record<string, unknown> | null {
  try {
    const v = JSON.parse(content) as unknown
    return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : null
  } catch {
    return null
  }
}

/** A 30181's content as shown, or null when it is not a v1 snapshot (jobs spec §12.1). */
export function readSnapshot(e: NEvent): Snapshot | null {
  const c = parse(e.content)
  const channel = firstTag(e, 'h')
  const updated = typeof c?.updatedAt === 'string' ? Date.parse(c.updatedAt) : NaN
  if (!c || c.v !== 1 || !channel || typeof c.status !== 'string' || !Number.isFinite(updated)) return null
  const activity = Array.isArray(c.activity) ? (c.activity as Record<string, unknown>[]) : []
  // What it works on: the newest `message` activity (the request; decision 331).
  const asked = [...activity].reverse().find((a) => a && a.kind === 'message' && typeof a.title === 'string')
  return {
    channel,
    status: c.status,
    updatedAt: Math.floor(updated / 1000),
    queued: typeof c.queued === 'number' && c.queued > 0 ? Math.floor(c.queued) : 0,
    respondTo: typeof c.respondTo === 'string' ? c.respondTo : null,
    title: asked ? String(asked.title).slice(0, 160) : '',
    at: e.created_at,
  }
}

/** The live status of §13.1 item 2 from an agent's snapshots, presence and the clock. */
export function statusOf(snapshots: Snapshot[], online: boolean, at: number): Status {
  const fresh = snapshots.filter((s) => at - s.updatedAt <= STALE_S)
  const working = fresh.filter((s) => s.status === 'working')
  const queued = fresh.reduce((n, s) => n + s.queued, 0)
  if (working.length) return { state: 'working', channels: working.map((s) => ({ id: s.channel, title: s.title })), queued }
  if (!online && !fresh.length) return { state: 'offline', channels: [], queued: 0 }
  return { state: 'idle', channels: [], queued }
}

export const directoryOf = perWorkspace((ws) => new Directory(ws))

export class Directory {
  people = new Set<string>()
  loaded = false
  private managed = new Map<string, Map<string, NEvent>>() // agent -> author -> newest 30177
  private personas = new Map<string, NEvent>() // owner:slug -> newest readable 30175
  private snapshots = new Map<string, Map<string, Snapshot>>() // agent -> channel -> snapshot
  private close: (() => void) | null = null
  private liveKey = ''
  private asked = new Set<string>() // agents whose record readPolicy read
  private askedPersonas = new Set<string>() // owner:slug looked up after a live record

  constructor(private readonly ws: Workspace) {}

  /** Everyone to list, then their records; follows new snapshots until `stop`. */
  async load(): Promise<void> {
    const rosters = await this.ws.relay.query([{ kinds: [39002], limit: 1000 }])
    for (const e of rosters) {
      for (const t of e.tags) if (t[0] === 'p' && HEX64.test(t[1] ?? '')) this.people.add(t[1])
    }
    for (const [pk, p] of this.ws.profiles) if (p.owner === this.ws.me.pubkey) this.people.add(pk)
    this.people.add(this.ws.me.pubkey)
    this.ws.needProfiles([...this.people])
    this.loaded = true
    this.ws.changed()
    // My personas: what the owner picks from for an agent of theirs (§13.1 item 4).
    for (const e of await this.ws.relay.query([{ kinds: [PERSONA], authors: [this.ws.me.pubkey], limit: 500 }])) this.event(e)
    await this.loadRecords([...this.people])
    this.follow()
  }

  /** 30177s (any author: the owner check is made when shown), personas they name, 30181s. */
  async loadRecords(pubkeys: string[]): Promise<void> {
    if (!pubkeys.length) return
    const found = await this.ws.relay.query([
      { kinds: [MANAGED_AGENT], '#d': pubkeys },
      { kinds: [WORK_STATUS], authors: pubkeys, limit: 1000 },
    ])
    for (const e of found) this.event(e)
    const wanted = new Map<string, string[]>()
    for (const agent of this.managed.keys()) {
      const owner = this.ownerOf(agent)
      const slug = this.policy(agent)?.persona_id
      if (owner && typeof slug === 'string') wanted.set(owner, [...(wanted.get(owner) ?? []), slug])
    }
    if (wanted.size) {
      const filters = [...wanted].map(([author, slugs]) => ({ kinds: [PERSONA], authors: [author], '#d': slugs }))
      for (const e of await this.ws.relay.query(filters)) this.event(e)
    }
    this.ws.changed()
  }

  /** Live snapshots of the channels I can read (channel events reach a live subscription
   * only through a filter naming the channel). */
  follow(): void {
    const ids = [...this.ws.channels.values()].filter((c) => c.member || c.visibility === 'open').map((c) => c.id).sort()
    const key = ids.join(',')
    if (key === this.liveKey) return
    this.liveKey = key
    const previous = this.close
    const filters = [{ kinds: [MANAGED_AGENT], '#d': [...this.people], limit: 0 }, ...(ids.length ? [{ kinds: [WORK_STATUS], '#h': ids, limit: 0 }] : [])]
    this.close = this.ws.relay.subscribe(filters, (e) => {
      this.event(e)
      this.ws.changed()
      if (e.kind === MANAGED_AGENT) void this.readPersona(firstTag(e, 'd') ?? '').catch(() => undefined)
    })
    previous?.()
  }

  stop(): void {
    this.close?.()
    this.close = null
    this.liveKey = ''
  }

  private event(e: NEvent): void {
    const d = firstTag(e, 'd') ?? ''
    if (e.kind === MANAGED_AGENT) {
      // Kept per author; only the owner's is ever used (§11.4), the newest by the relay's tie rule.
      if (!HEX64.test(d)) return
      let by = this.managed.get(d)
      if (!by) this.managed.set(d, (by = new Map()))
      const have = by.get(e.pubkey)
      if (!have || e.created_at > have.created_at || (e.created_at === have.created_at && e.id < have.id)) by.set(e.pubkey, e)
    } else if (e.kind === PERSONA) {
      const key = `${e.pubkey}:${d}`
      const have = this.personas.get(key)
      if (!have || e.created_at > have.created_at) this.personas.set(key, e)
    } else if (e.kind === WORK_STATUS) {
      const s = readSnapshot(e)
      if (!s || d !== s.channel) return
      let m = this.snapshots.get(e.pubkey)
      if (!m) this.snapshots.set(e.pubkey, (m = new Map()))
      const have = m.get(s.channel)
      if (!have || s.at >= have.at) m.set(s.channel, s)
    }
  }

  /** The persona an agent's record names now, when not read yet (a record that changed live). */
  private async readPersona(agent: string): Promise<void> {
    const owner = this.ownerOf(agent)
    const slug = this.personaId(agent)
    if (!owner || !slug || this.personas.has(`${owner}:${slug}`) || this.askedPersonas.has(`${owner}:${slug}`)) return
    this.askedPersonas.add(`${owner}:${slug}`)
    for (const e of await this.ws.relay.query([{ kinds: [PERSONA], authors: [owner], '#d': [slug] }])) this.event(e)
    this.ws.changed()
  }

  /** The owner's 30177 for `agent`, read once (a notice about the agent outside this view). */
  async readPolicy(agent: string): Promise<void> {
    const owner = this.ownerOf(agent)
    if (!owner || this.asked.has(agent)) return
    this.asked.add(agent)
    for (const e of await this.ws.relay.query([{ kinds: [MANAGED_AGENT], authors: [owner], '#d': [agent] }])) this.event(e)
    this.ws.changed()
  }

  ownerOf(pubkey: string): string | null {
    return this.ws.profiles.get(pubkey)?.owner ?? null
  }

  /** The owner's 30177 for `agent`, its content; null when the owner published none. */
  policy(agent: string): Record<string, unknown> | null {
    const owner = this.ownerOf(agent)
    const e = owner ? this.managed.get(agent)?.get(owner) : undefined
    return e ? parse(e.content) : null
  }

  /** The persona's display name when readable, else its slug; '' without one. */
  persona(agent: string): string {
    const slug = this.personaId(agent)
    if (!slug) return ''
    return this.personaName(this.ownerOf(agent) ?? '', slug)
  }

  personaId(agent: string): string | null {
    const slug = this.policy(agent)?.persona_id
    return typeof slug === 'string' ? slug : null
  }

  private personaName(author: string, slug: string): string {
    const e = this.personas.get(`${author}:${slug}`)
    const name = e ? parse(e.content)?.display_name : null
    return typeof name === 'string' && name.trim() ? name : slug
  }

  /** My personas (30175), by display name: the choices for an agent I own. */
  myPersonas(): { slug: string; name: string; shared: boolean }[] {
    const me = this.ws.me.pubkey
    return [...this.personas.entries()]
      .filter(([k]) => k.startsWith(`${me}:`))
      .map(([k, e]) => {
        const slug = k.slice(me.length + 1)
        return { slug, name: this.personaName(me, slug), shared: e.tags.some((t) => t[0] === 'shared' && t[1] === 'true') }
      })
      .sort((a, b) => a.name.localeCompare(b.name))
  }

  /** As the owner: give `agent` my persona `slug` (or none). A record naming a persona carries
   * no definition of its own (the slimming rule of §11.4): those members go. */
  async setPersona(agent: string, slug: string | null): Promise<void> {
    const gone = { system_prompt: undefined, model: undefined, provider: undefined, persona_source_version: undefined }
    await this.setPolicy(agent, slug ? { ...gone, persona_id: slug } : { persona_id: null })
  }

  /** Whom it answers: the 30177's mode (with the allowlist's size), else a fresh snapshot's. */
  answers(agent: string, at = now()): string {
    const p = this.policy(agent)
    if (typeof p?.respond_to === 'string') {
      const list = Array.isArray(p.respond_to_allowlist) ? p.respond_to_allowlist.length : 0
      return p.respond_to === 'allowlist' ? `allowlist (${list} ${list === 1 ? 'person' : 'people'})` : p.respond_to
    }
    const fresh = [...(this.snapshots.get(agent)?.values() ?? [])].filter((s) => s.respondTo && at - s.updatedAt <= STALE_S)
    return fresh.sort((a, b) => b.at - a.at)[0]?.respondTo ?? 'unknown'
  }

  mode(agent: string): string | null {
    const p = this.policy(agent)
    return typeof p?.respond_to === 'string' ? p.respond_to : null
  }

  status(agent: string, at = now()): Status {
    const readable = [...(this.snapshots.get(agent)?.values() ?? [])].filter((s) => this.ws.channels.has(s.channel))
    return statusOf(readable, this.ws.presenceBook.status(agent) !== 'offline', at)
  }

  /** As the owner: publish my 30177 for `agent` with `fields` set, merged with the head
   * (unknown members kept) and newer than it (jobs spec §13.1 item 4). */
  async setPolicy(agent: string, fields: Fields | ((head: Fields) => Fields)): Promise<void> {
    if (this.ownerOf(agent) !== this.ws.me.pubkey) throw new Error('Only the agent’s owner changes its policy.')
    const [head] = (await this.ws.relay.query([{ kinds: [MANAGED_AGENT], authors: [this.ws.me.pubkey], '#d': [agent] }])).sort((a, b) => b.created_at - a.created_at)
    const current = head ? parse(head.content) ?? {} : {}
    const body = { ...current, ...(typeof fields === 'function' ? fields(current) : fields) }
    const created = Math.max(now(), head ? head.created_at + 1 : 0)
    const ev = await this.ws.relay.publish({ kind: MANAGED_AGENT, created_at: created, tags: [['d', agent]], content: JSON.stringify(body) })
    this.event(ev)
    this.ws.changed()
  }

  /** As the owner: let `asker` ask `agent` (a refused asker's notice, issue 27 item 3) — onto
   * the head's allowlist, and `owner-only` becomes `allowlist`; other modes stay. `fallback` is
   * the mode the harness said it runs with, for a head that names none (the flags apply). */
  async grant(agent: string, asker: string, fallback: string): Promise<void> {
    await this.setPolicy(agent, (head) => {
      const list = Array.isArray(head.respond_to_allowlist) ? head.respond_to_allowlist.filter((pk) => typeof pk === 'string' && HEX64.test(pk)) : []
      const mode = typeof head.respond_to === 'string' ? head.respond_to : fallback
      return { respond_to: mode === 'owner-only' ? 'allowlist' : mode, respond_to_allowlist: list.includes(asker) ? list : [...list, asker] }
    })
  }

  /** Whether the owner's record (as last read) already lets `asker` ask `agent`. */
  lets(agent: string, asker: string): boolean {
    const mode = this.mode(agent)
    return mode === 'anyone' || (mode === 'allowlist' && this.allowlist(agent).includes(asker))
  }

  allowlist(agent: string): string[] {
    const list = this.policy(agent)?.respond_to_allowlist
    return Array.isArray(list) ? list.filter((pk): pk is string => typeof pk === 'string' && HEX64.test(pk)) : []
  }

  parallelism(agent: string): number | null {
    const n = this.policy(agent)?.parallelism
    return typeof n === 'number' && Number.isInteger(n) ? n : null
  }
}
