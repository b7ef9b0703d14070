// One WebSocket to the relay that served the page: NIP-42 AUTH first, then REQ/EVENT/COUNT.
//
// Our own small client rather than nostr-tools' Relay: it keeps the subscriptions of a page
// across reconnects and sends nothing before AUTH. Signatures are checked here with
// nostr-tools' verifyEvent. Nothing is sent before AUTH succeeds, so
// no request meets `auth-required:`; a dropped socket reconnects, re-authenticates and
// re-opens live subscriptions from the last event seen.
import { verifyEvent } from 'nostr-tools/pure'
import type { NEvent, Signer, Template } from './types'

export type Filter = Record<string, unknown>
type Pending = { resolve: (v: string) => void; reject: (e: Error) => void; timer: number }
type Sub = {
  filters: Filter[]
  onevent: (e: NEvent) => void
  oneose?: () => void
  onclosed?: (reason: string) => void
  live: boolean
  lastSeen: number
}

const OPERATION_TIMEOUT_MS = 15_000
const MAX_QUERY_EVENTS = 5000 // a query collects at most this many events before EOSE
// Back within about two seconds of the relay's return (issue 29 item 10), never hammering it.
const RECONNECT_MS = [250, 500, 1000, 2000]

export function relayUrl(): string {
  const scheme = location.protocol === 'https:' ? 'wss' : 'ws'
  return `${scheme}://${location.host}/`
}

export class RelayConn {
  private ws: WebSocket | null = null
  private authed = false
  private outbox: string[] = []
  private subs = new Map<string, Sub>()
  private oks = new Map<string, Pending>()
  private counts = new Map<string, Pending>()
  private serial = 0
  private attempts = 0
  private stopped = false
  onstatus: (status: 'connecting' | 'online' | 'offline', detail?: string) => void = () => {}

  /** `authTags` ride on the AUTH event (an agent's NIP-OA tag, for relays that admit agents through their owner). */
  constructor(readonly url: string, private signer: Signer, private authTags: string[][] = []) {}

  start(): void {
    this.stopped = false
    this.open()
  }

  stop(): void {
    this.stopped = true
    this.ws?.close(1000)
  }

  private open(): void {
    this.onstatus('connecting')
    const ws = new WebSocket(this.url)
    this.ws = ws
    this.authed = false
    ws.onmessage = (m) => this.onmessage(typeof m.data === 'string' ? m.data : '')
    ws.onclose = () => {
      if (this.ws !== ws) return
      this.authed = false
      this.onstatus('offline')
      for (const [id, sub] of this.subs) {
        if (!sub.live) {
          this.subs.delete(id)
          sub.onclosed?.('error: connection closed')
        }
      }
      for (const p of [...this.oks.values(), ...this.counts.values()]) p.reject(new Error('error: connection closed'))
      this.oks.clear()
      this.counts.clear()
      // Their callers were just told "not sent": a queued EVENT or COUNT must not go out later
      // behind their back (a retry sends the same event again, decision 220).
      this.outbox = this.outbox.filter((f) => !f.startsWith('["EVENT"') && !f.startsWith('["COUNT"'))
      if (!this.stopped) {
        const delay = RECONNECT_MS[Math.min(this.attempts++, RECONNECT_MS.length - 1)]
        setTimeout(() => this.open(), delay)
      }
    }
  }

  private async answer(challenge: string): Promise<void> {
    const ev = await this.signer.sign({
      kind: 22242,
      created_at: Math.floor(Date.now() / 1000),
      tags: [['relay', this.url], ['challenge', challenge], ...this.authTags],
      content: '',
    })
    const sent = this.waitOk(ev.id)
    this.ws?.send(JSON.stringify(['AUTH', ev]))
    try {
      await sent
    } catch (e) {
      this.onstatus('offline', String((e as Error).message))
      return
    }
    this.authed = true
    this.attempts = 0
    this.onstatus('online')
    // Live subscriptions resume from the newest event they saw, or from when they opened
    // (inclusive; duplicates are dropped by id upstream): `limit: 0` (live only) becomes that
    // `since`, so what was published while the socket was down is caught up.
    for (const [id, sub] of this.subs) {
      const filters = sub.lastSeen ? sub.filters.map((f) => resumeFrom(f, sub.lastSeen)) : sub.filters
      this.ws?.send(JSON.stringify(['REQ', id, ...filters]))
    }
    const queued = this.outbox
    this.outbox = []
    for (const frame of queued) this.ws?.send(frame)
  }

  private send(frame: string): void {
    if (this.authed && this.ws?.readyState === WebSocket.OPEN) this.ws.send(frame)
    else this.outbox.push(frame)
  }

  /** A registered subscription's REQ: now when authenticated, else answer() sends it after AUTH. */
  private sendReq(id: string, filters: Filter[]): void {
    if (this.authed && this.ws?.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(['REQ', id, ...filters]))
  }

  private onmessage(text: string): void {
    let msg: unknown
    try {
      msg = JSON.parse(text)
    } catch {
      return
    }
    if (!Array.isArray(msg)) return
    const [type, a, b, c] = msg as [string, unknown, unknown, unknown]
    if (typeof a === 'string' && (type === 'EOSE' || type === 'CLOSED') && !this.subs.has(a) && !this.counts.has(a)) return
    if (type === 'AUTH' && typeof a === 'string') {
      void this.answer(a)
    } else if (type === 'EVENT' && typeof a === 'string') {
      const sub = this.subs.get(a)
      const ev = b as NEvent
      if (!sub || !ev || typeof ev !== 'object' || !verifyEvent(ev as never)) return
      if (ev.created_at > sub.lastSeen) sub.lastSeen = ev.created_at
      sub.onevent(ev)
    } else if (type === 'EOSE' && typeof a === 'string') {
      this.subs.get(a)?.oneose?.()
    } else if (type === 'CLOSED' && typeof a === 'string') {
      const sub = this.subs.get(a)
      this.subs.delete(a)
      sub?.onclosed?.(String(b ?? ''))
      const count = this.counts.get(a)
      if (count) {
        this.counts.delete(a)
        clearTimeout(count.timer)
        count.reject(new Error(String(b ?? 'closed')))
      }
    } else if (type === 'OK' && typeof a === 'string') {
      const p = this.oks.get(a)
      if (!p) return
      this.oks.delete(a)
      clearTimeout(p.timer)
      if (b === true) p.resolve(String(c ?? ''))
      else p.reject(new Error(String(c ?? 'error: refused')))
    } else if (type === 'COUNT' && typeof a === 'string') {
      const p = this.counts.get(a)
      if (!p) return
      this.counts.delete(a)
      clearTimeout(p.timer)
      p.resolve(String((b as { count?: number })?.count ?? 0))
    }
  }

  private waitOk(id: string): Promise<string> {
    return new Promise((resolve, reject) => {
      const timer = window.setTimeout(() => {
        this.oks.delete(id)
        reject(new Error('error: no answer from the relay'))
      }, OPERATION_TIMEOUT_MS)
      this.oks.set(id, { resolve, reject, timer })
    })
  }

  /** Sign and publish; resolves with the signed event, rejects with the relay's OK message. */
  async publish(template: Template): Promise<NEvent> {
    const ev = await this.signer.sign(template)
    await this.publishSigned(ev)
    return ev
  }

  async publishSigned(ev: NEvent): Promise<string> {
    const ok = this.waitOk(ev.id)
    this.send(JSON.stringify(['EVENT', ev]))
    return ok
  }

  /** Stored events matching `filters` up to EOSE (the subscription is then closed). */
  query(filters: Filter[]): Promise<NEvent[]> {
    return new Promise((resolve, reject) => {
      const id = `q${++this.serial}`
      const found: NEvent[] = []
      const timer = window.setTimeout(() => finish(new Error('error: query timed out')), OPERATION_TIMEOUT_MS)
      const finish = (err?: Error) => {
        clearTimeout(timer)
        if (this.subs.delete(id)) this.send(JSON.stringify(['CLOSE', id]))
        if (err) reject(err)
        else resolve(found)
      }
      this.subs.set(id, {
        filters,
        live: false,
        lastSeen: 0,
        onevent: (e) => {
          if (found.length < MAX_QUERY_EVENTS) found.push(e)
        },
        oneose: () => finish(),
        onclosed: (reason) => {
          clearTimeout(timer)
          reject(new Error(reason))
        },
      })
      this.sendReq(id, filters)
    })
  }

  /** A live subscription (stored events first, then new ones; a filter with `limit: 0` gets
   * new ones only, whatever their `created_at`); call the result to close it. */
  subscribe(filters: Filter[], onevent: (e: NEvent) => void, onclosed?: (reason: string) => void): () => void {
    const id = `l${++this.serial}`
    this.subs.set(id, { filters, onevent, onclosed, live: true, lastSeen: Math.floor(Date.now() / 1000) })
    this.sendReq(id, filters)
    return () => {
      if (this.subs.delete(id)) this.send(JSON.stringify(['CLOSE', id]))
    }
  }

  /** NIP-45 COUNT. */
  count(filters: Filter[]): Promise<number> {
    return new Promise((resolve, reject) => {
      const id = `c${++this.serial}`
      const timer = window.setTimeout(() => {
        this.counts.delete(id)
        reject(new Error('error: count timed out'))
      }, OPERATION_TIMEOUT_MS)
      this.counts.set(id, { resolve: (v) => resolve(Number(v)), reject, timer })
      this.send(JSON.stringify(['COUNT', id, ...filters]))
    })
  }
}

/** A live filter re-sent after a reconnect: from `since` on (a `limit: 0` filter would skip
 * what was published while the socket was down). */
function resumeFrom(f: Filter, since: number): Filter {
  const { limit, ...rest } = f
  return limit === 0 ? { ...rest, since } : { ...f, since }
}
