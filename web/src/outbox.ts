// My messages on their way to the relay. Each is signed once, so its id is fixed before it
// leaves: it shows on the timeline at once as *sending*, then *sent* on the relay's OK, or
// *not sent* when the connection fails first; Retry sends the very same event again, which the
// relay stores at most once (an id it holds is answered `duplicate:`), so a message never
// appears twice however often it is retried (issue 29 item 5, decision 220).
import type { RelayConn } from './relay'
import { now, type NEvent } from './types'

export type SendState = { state: 'sending' | 'sent' | 'failed'; error: string }

export class Outbox {
  private states = new Map<string, SendState>()
  private events = new Map<string, NEvent>()
  private last = 0

  constructor(private relay: RelayConn, private changed: () => void) {}

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
    this.changed()
    try {
      await this.relay.publishSigned(ev)
      this.states.set(ev.id, { state: 'sent', error: '' })
      this.events.delete(ev.id)
    } catch (e) {
      this.states.set(ev.id, { state: 'failed', error: String((e as Error).message || e) })
    }
    this.changed()
  }

  retry(id: string): Promise<void> {
    const ev = this.events.get(id)
    return ev ? this.deliver(ev) : Promise.resolve()
  }
}
