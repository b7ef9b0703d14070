// The inbox (issue 29 item 3): what waits for me in one list — messages that mention me,
// DMs from others, replies in threads I took part in — newest first, each opening in its
// context; "Mark done" removes an item on every device (the done ids ride in the read state,
// unread.ts). Also what waits on me as work: workflow approvals I am named for (46010 with my
// `p`, until a 46011/46012 decides them) and the ends of jobs I asked for (43004 result, 43006
// failure, both `p`-tagged to the requester; jobs.md §3). Private DMs from others (NIP-17,
// private-dms.ts) are in it too, as this page decrypted them: `peers` names their conversation.
import { EDIT, MESSAGE, threadLinks } from './model'
import { privateDms } from './private-dms'
import { firstTag, type NEvent } from './types'
import type { Workspace } from './workspace'

export type Why = 'mention' | 'dm' | 'reply' | 'approval' | 'job'
export type InboxItem = { ev: NEvent; channel: string; why: Why; peers?: string[] }

export const APPROVAL_REQUESTED = 46010
const DECIDED = [46011, 46012]
const JOB_ENDS = [43004, 43006]
/** Kinds the live subscription hands to `consider` besides messages. */
export const INBOX_WORK_KINDS = [APPROVAL_REQUESTED, ...DECIDED, ...JOB_ENDS]

const PAGE = 100
const MAX_ITEMS = 1000 // held in memory; the oldest go first
const EDITS_PER_ITEM = 3 // read with the items: their newest edits, most have none

export class Inbox {
  private items = new Map<string, InboxItem>()
  private threads = new Set<string>() // roots of threads I wrote in
  private decided = new Set<string>() // approval references with a decision
  private edits = new Map<string, NEvent>() // message id → its newest edit
  /** Why the inbox could not be read in full, shown above it; never an empty list that lies. */
  problem = ''
  loaded = false
  started = false

  constructor(private ws: Workspace) {}

  async load(): Promise<void> {
    if (this.started) return
    this.started = true
    const me = this.ws.me.pubkey
    const dms = this.ws.myChannels().filter((c) => c.type === 'dm').map((c) => c.id)
    try {
      const [mentions, mine, inDms, work] = await Promise.all([
        this.ws.relay.query([{ kinds: [MESSAGE], '#p': [me], limit: PAGE }]),
        this.ws.relay.query([{ kinds: [MESSAGE], authors: [me], limit: 2 * PAGE }]),
        dms.length ? this.ws.relay.query([{ kinds: [MESSAGE], '#h': dms, limit: PAGE }]) : Promise.resolve([]),
        this.ws.relay.query([{ kinds: [APPROVAL_REQUESTED, ...JOB_ENDS], '#p': [me], limit: PAGE }]),
      ])
      for (const e of mine) this.threads.add(threadLinks(e).root ?? e.id)
      const roots = [...this.threads].slice(0, PAGE)
      const refs = work.filter((e) => e.kind === APPROVAL_REQUESTED).map((e) => firstTag(e, 'd') ?? '').filter(Boolean)
      const [replies, decisions] = await Promise.all([
        roots.length ? this.ws.relay.query([{ kinds: [MESSAGE], '#e': roots, limit: PAGE }]) : Promise.resolve([]),
        refs.length ? this.ws.relay.query([{ kinds: DECIDED, '#d': refs, limit: refs.length }]) : Promise.resolve([]),
      ])
      for (const e of [...decisions, ...mentions, ...inDms, ...replies, ...work]) this.consider(e)
      // Their edits: an item shows its current text, as the channel does, not the one it was sent with.
      const ids = [...this.items.values()].filter((i) => i.ev.kind === MESSAGE).map((i) => i.ev.id)
      // Bounded, newest first: a few edits an item is plenty, and the relay would cap it anyway.
      if (ids.length) for (const e of await this.ws.relay.query([{ kinds: [EDIT], '#e': ids, limit: EDITS_PER_ITEM * ids.length }])) this.edited(e)
      this.problem = ''
    } catch (e) {
      this.problem = `Some of the inbox could not be read: ${String((e as Error).message || e)}`
    }
    this.loaded = true
    this.ws.changed()
  }

  /** A message, live or loaded: in the inbox when it is for me. */
  consider(e: NEvent): void {
    const me = this.ws.me.pubkey
    if (e.kind !== MESSAGE) return this.considerWork(e)
    if (e.kind !== MESSAGE || e.pubkey === me || this.items.has(e.id)) {
      if (e.kind === MESSAGE && e.pubkey === me) this.threads.add(threadLinks(e).root ?? e.id)
      return
    }
    const channel = firstTag(e, 'h')
    if (!channel) return
    const root = threadLinks(e).root
    let why: Why | null = null
    if (e.tags.some((t) => t[0] === 'p' && t[1] === me)) why = 'mention'
    else if (this.ws.channels.get(channel)?.type === 'dm') why = 'dm'
    else if (root && this.threads.has(root)) why = 'reply'
    if (!why) return
    this.add({ ev: e, channel, why })
  }

  /** Live work for me: into the inbox, and a browser notification for an approval while the
   * tab is hidden (issue 29 item 4) — a run waits on it. */
  arrived(e: NEvent): void {
    const before = this.items.has(e.id)
    this.consider(e)
    if (before || !this.items.has(e.id) || e.kind !== APPROVAL_REQUESTED) return
    if (!document.hidden || typeof Notification === 'undefined' || Notification.permission !== 'granted') return
    const { title, body } = describeWork(e)
    new Notification(title, { body, tag: e.id })
  }

  /** An approval for me, a decision that ends one, or the end of a job I asked for. */
  private considerWork(e: NEvent): void {
    const channel = firstTag(e, 'h')
    if (!channel || this.items.has(e.id)) return
    if (DECIDED.includes(e.kind)) {
      const ref = firstTag(e, 'd')
      if (ref) this.decided.add(ref)
      this.ws.changed()
      return
    }
    const forMe = e.tags.some((t) => t[0] === 'p' && t[1] === this.ws.me.pubkey)
    if (!forMe || (e.kind !== APPROVAL_REQUESTED && !JOB_ENDS.includes(e.kind))) return
    this.add({ ev: e, channel, why: e.kind === APPROVAL_REQUESTED ? 'approval' : 'job' })
  }

  /** An edit (40003) of a listed message, loaded or live: kept when it is its newest. Whether its
   * author wrote that message is checked where it is shown (`text`): the message may come later. */
  edited(e: NEvent): void {
    if (e.kind !== EDIT) return
    const id = firstTag(e, 'e')
    if (!id || !this.items.has(id)) return // only what the inbox lists: the map stays as small as it
    const before = this.edits.get(id)
    if (before && before.created_at > e.created_at) return
    this.edits.set(id, e)
    this.ws.changed()
  }

  /** An item's text as it is now: its author's latest edit, else what it was sent with. */
  text(ev: NEvent): string {
    const m = this.ws.msgs.get(ev.id)
    const edit = this.edits.get(ev.id)
    const mine = edit && edit.pubkey === ev.pubkey ? edit : undefined
    if (m && m.editedAt !== null && (!mine || m.editedAt >= mine.created_at)) return m.content
    return mine ? mine.content : ev.content
  }

  private add(item: InboxItem): void {
    this.items.set(item.ev.id, item)
    if (this.items.size > MAX_ITEMS) {
      const oldest = [...this.items.values()].reduce((a, b) => (b.ev.created_at < a.ev.created_at ? b : a))
      this.items.delete(oldest.ev.id)
    }
    this.ws.changed()
  }

  /** Not done, newest first; an approval someone decided is no longer waiting. */
  list(): InboxItem[] {
    const done = this.ws.reads.done
    return [...this.items.values(), ...this.privateItems()]
      .filter((i) => !done.has(i.ev.id) && !this.ws.msgs.get(i.ev.id)?.deleted)
      .filter((i) => i.why !== 'approval' || !this.decided.has(firstTag(i.ev, 'd') ?? ''))
      .sort((a, b) => b.ev.created_at - a.ev.created_at || (a.ev.id < b.ev.id ? -1 : 1))
  }

  /** The private DMs others sent me, as this page has decrypted them (never sent anywhere). */
  private privateItems(): InboxItem[] {
    const me = this.ws.me.pubkey
    const book = privateDms(this.ws)
    return [...book.msgs.values()]
      .filter((m) => m.rumor.pubkey !== me)
      .map((m) => ({ ev: { ...m.rumor, sig: '' }, channel: '', why: 'dm' as const, peers: m.peers }))
  }

  markDone(id: string): void {
    this.ws.reads.markDone(id)
  }
}

function parsed(content: string): Record<string, unknown> {
  try {
    const v = JSON.parse(content) as unknown
    return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {}
  } catch {
    return {}
  }
}

// A result's disposition (jobs spec §4) said as a person would.
const ENDED: Record<string, string> = {
  completed: 'Job completed',
  partial: 'Job partly done',
  blocked: 'Job blocked',
  failed: 'Job failed',
  no_artifact: 'Job finished without an artifact',
}

/** A work item in words: an approval's workflow and message; a job's end (its disposition
 * said in words), what was asked of it (`asked`) and its outcome or failure. */
export function describeWork(e: NEvent): { title: string; body: string; asked: string } {
  const c = parsed(e.content)
  const text = (k: string) => (typeof c[k] === 'string' ? (c[k] as string) : '')
  if (e.kind === APPROVAL_REQUESTED) return { title: `Approval: ${text('workflow_name') || 'a workflow'}`, body: text('message'), asked: '' }
  if (e.kind === 43006) return { title: 'Job failed', body: [text('code'), text('message')].filter(Boolean).join(': '), asked: '' }
  const asked = text('requestedOutcome')
  return { title: ENDED[text('disposition')] ?? 'Job ended', body: text('outcome') || (asked ? '' : 'No outcome given.'), asked }
}
