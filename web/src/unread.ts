// Read state: per channel the newest message I have read (a marker: created_at and id, the
// order of decision 221), unread and mention counts, the "New messages" divider of the channel
// I opened, and each channel's notification level. It lives on the relay as one NIP-78 app-data
// event (kind 30078, d "buzz/read-state") whose content is NIP-44 encrypted to myself, so only
// its owner can read it and every browser signed in with the key shares it (issue 29 items 1,
// 2 and 4; decision 222). Each browser merges what arrives — a marker only moves forward.
import { MESSAGE, threadLinks, type Msg } from './model'
import { firstTag, now, type NEvent } from './types'
import type { Workspace } from './workspace'

export type Marker = { at: number; id: string }
export type Level = 'all' | 'mentions' | 'none'

export const READ_STATE_KIND = 30078
export const READ_STATE_D = 'buzz/read-state'
const LOCAL_KEY = 'buzz.readState.'
const MAX_CHANNELS = 2000 // bounds the event (about 100 bytes a channel)
export const MAX_COUNTED = 500 // "500+" beyond: one page of events per channel is enough to count
const PUBLISH_GAP_MS = 1000 // at most one version a second: created_at stays near the clock
const COUNT_RETRIES = 3 // a failed count query is asked again this many times,
const COUNT_RETRY_MS = 3000 // after 3, 6, 9 s

const later = (a: Marker, b: Marker): boolean => a.at > b.at || (a.at === b.at && a.id > b.id)
const markerOf = (e: NEvent): Marker => ({ at: e.created_at, id: e.id })

type Stored = { read?: Record<string, [number, string]>; level?: Record<string, Level>; muted?: string[]; levelsAt?: number; done?: string[] }
const MAX_DONE = 300 // inbox items marked done, newest kept

export class ReadState {
  markers = new Map<string, Marker>()
  levels = new Map<string, Level>()
  muted = new Set<string>()
  /** Inbox items marked done (event ids), in the order they were done. */
  done = new Set<string>()
  unread = new Map<string, number>()
  mentions = new Map<string, number>()
  /** The unread messages behind each count, by id: a message delivered twice (a live
   * subscription re-opening overlaps the old one) or both live and in a count query's answer
   * is counted once, and an answer never undoes what arrived live while it was on its way. */
  private counted = new Map<string, Map<string, { mark: Marker; forMe: boolean }>>()
  /** The marker a channel had when I opened it: the "New messages" divider goes after it. */
  dividers = new Map<string, Marker>()
  /** Channels whose opening has loaded back to the divider: the view may place itself. */
  settled = new Set<string>()
  private levelsAt = 0
  private lastStamp = 0
  private timer = 0
  private lastPublish = 0
  private synced = false // the relay's stored version is merged
  private dirty = false // changed before that

  constructor(private ws: Workspace) {
    this.apply(this.loadLocal(), false)
  }

  // -- what the views ask -----------------------------------------------------------------
  level(channel: string): Level {
    return this.levels.get(channel) ?? (this.ws.channels.get(channel)?.type === 'dm' ? 'all' : 'mentions')
  }

  /** A message that counts toward "unread": someone else's, on the timeline, after my marker. */
  isUnread(m: Msg): boolean {
    if (m.ev.pubkey === this.ws.me.pubkey || (m.root && !m.broadcast)) return false
    const mark = this.markers.get(m.channel)
    return !!mark && later(markerOf(m.ev), mark)
  }

  /** Does this message mention me, or is it in a DM (both get the distinct badge)? */
  isForMe(m: Msg): boolean {
    if (m.ev.pubkey === this.ws.me.pubkey) return false
    if (this.ws.channels.get(m.channel)?.type === 'dm') return true
    return m.ev.tags.some((t) => t[0] === 'p' && t[1] === this.ws.me.pubkey)
  }

  /** The first unread message of the channel I opened, if the divider has one to show. */
  firstUnread(channel: string, msgs: Msg[]): Msg | undefined {
    const d = this.dividers.get(channel)
    if (!d) return undefined
    return msgs.find((m) => m.ev.pubkey !== this.ws.me.pubkey && later(markerOf(m.ev), d))
  }

  // -- changes ------------------------------------------------------------------------------
  /** Opening a channel: keep where I was for the divider, then everything up to now is read. */
  opened(channel: string): void {
    const mark = this.markers.get(channel)
    if ((this.unread.get(channel) ?? 0) > 0 && mark) this.dividers.set(channel, mark)
    else this.dividers.delete(channel)
    this.settled.delete(channel)
    this.forget(channel)
  }

  /** Read up to the newest message I know in `channel` (or `upTo`). */
  markRead(channel: string, upTo?: NEvent): void {
    const newest = upTo ?? this.newestIn(channel)
    const next: Marker = newest ? markerOf(newest) : { at: now(), id: '' }
    const mark = this.markers.get(channel)
    this.forget(channel)
    if (mark && !later(next, mark)) return
    this.markers.set(channel, next)
    this.save()
  }

  markDone(id: string): void {
    this.done.add(id)
    this.save()
    this.ws.changed()
  }

  setLevel(channel: string, level: Level, muted: boolean): void {
    this.levels.set(channel, level)
    if (muted) this.muted.add(channel)
    else this.muted.delete(channel)
    this.levelsAt = now()
    this.save()
    this.ws.changed()
  }

  /** A live message: counts and the marker of the channel I am reading. */
  live(m: Msg): void {
    if (m.root && !m.broadcast) return
    const reading = m.channel === this.ws.active && !document.hidden
    if (reading || m.ev.pubkey === this.ws.me.pubkey) return this.markRead(m.channel, m.ev)
    if (!this.isUnread(m) && this.markers.has(m.channel)) return
    const ids = this.counted.get(m.channel) ?? new Map()
    if (ids.size >= MAX_COUNTED) return // "500+": the memory a busy channel takes is bounded
    ids.set(m.ev.id, { mark: markerOf(m.ev), forMe: this.isForMe(m) })
    this.counted.set(m.channel, ids)
    this.tally(m.channel)
  }

  /** The badges of `channel` from its counted ids. */
  private tally(channel: string): void {
    const ids = this.counted.get(channel)
    let forMe = 0
    for (const v of ids?.values() ?? []) if (v.forMe) forMe++
    if (ids?.size) this.unread.set(channel, ids.size)
    else this.unread.delete(channel)
    if (forMe) this.mentions.set(channel, forMe)
    else this.mentions.delete(channel)
  }

  private forget(channel: string): void {
    this.counted.delete(channel)
    this.unread.delete(channel)
    this.mentions.delete(channel)
  }

  private newestIn(channel: string): NEvent | undefined {
    let best: NEvent | undefined
    for (const m of this.ws.visible(channel)) if (!best || later(markerOf(m.ev), markerOf(best))) best = m.ev
    return best
  }

  // -- counting (at start, and when another browser moved a marker) --------------------------
  async countAll(): Promise<void> {
    await Promise.all(this.ws.myChannels().map((c) => this.count(c.id)))
    this.ws.changed()
  }

  async count(channel: string, attempt = 0): Promise<void> {
    const dm = this.ws.channels.get(channel)?.type === 'dm'
    // A channel never opened here has no marker: a DM then counts from its start (it is all
    // for me); any other channel shows no count until it is read once.
    const mark = this.markers.get(channel) ?? (dm ? { at: 0, id: '' } : undefined)
    if (!mark || channel === this.ws.active) return
    let found: NEvent[]
    try {
      found = await this.ws.relay.query([{ kinds: [MESSAGE], '#h': [channel], since: mark.at, limit: MAX_COUNTED }])
    } catch (e) {
      // The live count stands meanwhile; the query is asked again, a few times, later (a relay
      // busy past its read budget answers the next one). Never a silent wrong badge.
      console.warn(`unread count of ${channel} failed (attempt ${attempt + 1}):`, e)
      if (attempt < COUNT_RETRIES) window.setTimeout(() => void this.count(channel, attempt + 1), COUNT_RETRY_MS * (attempt + 1))
      return
    }
    if (channel === this.ws.active) return
    const now = this.markers.get(channel) ?? mark
    const ids = new Map<string, { mark: Marker; forMe: boolean }>()
    for (const e of found) {
      if (e.pubkey === this.ws.me.pubkey || !later(markerOf(e), now)) continue
      const { root } = threadLinks(e)
      if (root && !e.tags.some((t) => t[0] === 'broadcast')) continue
      ids.set(e.id, { mark: markerOf(e), forMe: dm || e.tags.some((t) => t[0] === 'p' && t[1] === this.ws.me.pubkey) })
    }
    // What arrived live while the query was on its way (stored after its snapshot) stays.
    for (const [id, v] of this.counted.get(channel) ?? []) if (ids.size < MAX_COUNTED && later(v.mark, now)) ids.set(id, v)
    this.counted.set(channel, ids)
    this.tally(channel)
    this.ws.changed()
  }

  // -- on the relay ------------------------------------------------------------------------------
  /** Follow my read-state event: the stored one first, then every other browser's updates. */
  follow(): void {
    // Back to a tab with a channel open: what it shows is read now.
    document.addEventListener('visibilitychange', () => {
      if (!document.hidden && this.ws.active) {
        this.markRead(this.ws.active)
        this.ws.changed()
      }
    })
    const mine = { kinds: [READ_STATE_KIND], authors: [this.ws.me.pubkey], '#d': [READ_STATE_D] }
    this.ws.relay.subscribe([{ ...mine, limit: 0 }], (e) => void this.received(e))
    // Nothing is published before the stored version is merged: a fresh browser would
    // otherwise replace every other device's markers with its own few.
    void this.ws.relay
      .query([mine])
      .then((found) => Promise.all(found.map((e) => this.received(e))))
      .catch(() => undefined)
      .finally(() => {
        this.synced = true
        if (this.dirty) this.save()
      })
  }

  private async received(e: NEvent): Promise<void> {
    const dec = this.ws.me.nip44Decrypt
    if (e.pubkey !== this.ws.me.pubkey || firstTag(e, 'd') !== READ_STATE_D || !dec) return
    let stored: Stored
    try {
      stored = JSON.parse(await dec.call(this.ws.me, this.ws.me.pubkey, e.content)) as Stored
    } catch {
      return // not ours to read, or damaged: ignored, never fatal
    }
    if (e.created_at > this.lastStamp) this.lastStamp = e.created_at
    const moved = this.apply(stored, true)
    this.saveLocal()
    for (const channel of moved) {
      if (channel === this.ws.active) continue
      void this.count(channel)
    }
    this.ws.changed()
  }

  /** Merge: markers move forward only; levels follow the newer setting. The channels whose marker moved. */
  private apply(s: Stored, remote: boolean): string[] {
    const moved: string[] = []
    for (const [channel, v] of Object.entries(s.read ?? {})) {
      if (!Array.isArray(v) || typeof v[0] !== 'number' || typeof v[1] !== 'string') continue
      const next = { at: v[0], id: v[1] }
      const mark = this.markers.get(channel)
      if (!mark || later(next, mark)) {
        this.markers.set(channel, next)
        moved.push(channel)
      }
    }
    for (const id of s.done ?? []) if (typeof id === 'string' && /^[0-9a-f]{64}$/.test(id)) this.done.add(id)
    if ((s.levelsAt ?? 0) >= this.levelsAt && (remote || !this.levelsAt)) {
      this.levelsAt = s.levelsAt ?? 0
      this.levels = new Map(Object.entries(s.level ?? {}).filter(([, l]) => l === 'all' || l === 'mentions' || l === 'none'))
      this.muted = new Set((s.muted ?? []).filter((c) => typeof c === 'string'))
    }
    return moved
  }

  private snapshot(): Stored {
    const read: Record<string, [number, string]> = {}
    const newest = [...this.markers.entries()].sort((a, b) => b[1].at - a[1].at).slice(0, MAX_CHANNELS)
    for (const [c, m] of newest) read[c] = [m.at, m.id]
    return { read, level: Object.fromEntries(this.levels), muted: [...this.muted], levelsAt: this.levelsAt, done: [...this.done].slice(-MAX_DONE) }
  }

  private save(): void {
    this.saveLocal()
    if (!this.synced) {
      this.dirty = true
      return
    }
    clearTimeout(this.timer)
    const wait = Math.max(0, this.lastPublish + PUBLISH_GAP_MS - Date.now())
    this.timer = window.setTimeout(() => void this.publish(), wait)
  }

  private async publish(): Promise<void> {
    const enc = this.ws.me.nip44Encrypt
    if (!enc) return // a signer without NIP-44: the read state stays in this browser
    this.lastPublish = Date.now()
    // A replaceable event's newer version needs a later created_at (same second: lowest id wins).
    this.lastStamp = Math.max(now(), this.lastStamp + 1)
    try {
      const content = await enc.call(this.ws.me, this.ws.me.pubkey, JSON.stringify(this.snapshot()))
      await this.ws.relay.publish({ kind: READ_STATE_KIND, created_at: this.lastStamp, tags: [['d', READ_STATE_D]], content })
    } catch {
      /* kept locally; the next change publishes again */
    }
  }

  private loadLocal(): Stored {
    try {
      return JSON.parse(localStorage.getItem(LOCAL_KEY + this.ws.me.pubkey) ?? '{}') as Stored
    } catch {
      return {}
    }
  }

  private saveLocal(): void {
    try {
      localStorage.setItem(LOCAL_KEY + this.ws.me.pubkey, JSON.stringify(this.snapshot()))
    } catch {
      /* storage full: the relay copy still holds it */
    }
  }
}
