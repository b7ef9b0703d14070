// My messages on their way to the relay. Each is signed once, so its id is fixed before it
// leaves: it shows on the timeline at once as *sending*, then *sent* on the relay's OK, or
// *not sent* when the connection fails first; Retry sends the very same event again, which the
// relay stores at most once (an id it holds is answered `duplicate:`), so a message never
// appears twice however often it is retried (issue 29 item 5, decision 220). What is not yet
// sent is kept in this browser's storage too, so a page closed or reloaded mid-send shows it
// again — "Not sent" with Retry, or Sent when the relay turns out to hold it (decision 118).
import type { RelayConn } from './relay'
import { now, type NEvent } from './types'

const KEPT_KEY = 'buzz.outbox.'
const MAX_KEPT = 50 // unsent messages kept across a reload, newest first
const MAX_KEPT_BYTES = 512 * 1024 // …and at most this much storage (a message is ≤ 64 KiB)

export type SendState = { state: 'sending' | 'sent' | 'failed'; error: string }

export class Outbox {
  private states = new Map<string, SendState>()
  private events = new Map<string, NEvent>()
  private last = 0

  constructor(private relay: RelayConn, private changed: () => void, private me: string) {}

  /** `created_at` for my next message: later than my previous one, so two sent within one
   * second keep their order under the (created_at, id) rule of decision 221. */
  stamp(): number {
    this.last = Math.max(now(), this.last + 1)
    return this.last
  }

  state(id: string): SendState | undefined {
    return this.states.get(id)
  }

  /** Send `ev` (again); never throws: the outcome is its state. */
  async deliver(ev: NEvent): Promise<void> {
    this.events.set(ev.id, ev)
    this.states.set(ev.id, { state: 'sending', error: '' })
    this.keep()
    this.changed()
    try {
      await this.relay.publishSigned(ev)
      this.states.set(ev.id, { state: 'sent', error: '' })
      this.events.delete(ev.id)
    } catch (e) {
      this.states.set(ev.id, { state: 'failed', error: String((e as Error).message || e) })
    }
    this.keep()
    this.changed()
  }

  retry(id: string): Promise<void> {
    const ev = this.events.get(id)
    return ev ? this.deliver(ev) : Promise.resolve()
  }

  /** The messages a previous page left unsent (mine, well formed), each *sending* until
   * `recheck` has asked the relay whether it holds them. */
  restore(): NEvent[] {
    let kept: unknown
    try {
      kept = JSON.parse(localStorage.getItem(KEPT_KEY + this.me) ?? '[]')
    } catch {
      return []
    }
    if (!Array.isArray(kept)) return []
    const found: NEvent[] = []
    for (const ev of kept as NEvent[]) {
      if (!ev || typeof ev.id !== 'string' || !/^[0-9a-f]{64}$/.test(ev.id) || ev.pubkey !== this.me || !Array.isArray(ev.tags)) continue
      this.events.set(ev.id, ev)
      this.states.set(ev.id, { state: 'sending', error: '' })
      found.push(ev)
    }
    return found
  }

  /** Restored messages the relay holds are Sent; the others are Not sent, with Retry. */
  async recheck(): Promise<void> {
    const ids = [...this.events.keys()].filter((id) => this.states.get(id)?.state === 'sending')
    if (!ids.length) return
    let held = new Set<string>()
    let why = 'not sent before the page was closed'
    try {
      held = new Set((await this.relay.query([{ ids }])).map((e) => e.id))
    } catch (e) {
      why = `could not ask the relay: ${String((e as Error).message || e)}`
    }
    for (const id of ids) {
      if (this.states.get(id)?.state !== 'sending') continue // retried meanwhile
      if (held.has(id)) {
        this.states.set(id, { state: 'sent', error: '' })
        this.events.delete(id)
      } else this.states.set(id, { state: 'failed', error: why })
    }
    this.keep()
    this.changed()
  }

  /** What is unsent, in storage: the newest first, bounded in count and bytes. */
  private keep(): void {
    const unsent = [...this.events.values()].sort((a, b) => b.created_at - a.created_at)
    const kept: NEvent[] = []
    let bytes = 2
    for (const ev of unsent.slice(0, MAX_KEPT)) {
      bytes += JSON.stringify(ev).length + 1
      if (bytes > MAX_KEPT_BYTES) break
      kept.push(ev)
    }
    try {
      if (kept.length) localStorage.setItem(KEPT_KEY + this.me, JSON.stringify(kept))
      else localStorage.removeItem(KEPT_KEY + this.me)
    } catch {
      /* storage full or off: this page still shows and retries them */
    }
  }
}
