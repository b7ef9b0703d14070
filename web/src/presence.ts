// Presence that is true (issue 29 item 7): kind 20001 followed live, not read once; my own
// status (online, with an optional status text) sent on start, every minute and when it
// changes; an agent is *working* while its harness says it is typing somewhere, else *idle*;
// a 20002 whose content is `stopped` ends someone's typing at once (decision 223).
import { PRESENCE, TYPING } from './model'
import { firstTag, now, type NEvent } from './types'
import type { Workspace } from './workspace'

const REFRESH_MS = 60_000
const STALE_S = 150 // a 20001 is refreshed every 60 s; after this without one, offline
const MAX_TEXT = 100
const TEXT_KEY = 'buzz.statusText.'
export const TYPING_STOPPED = 'stopped'

type Seen = { status: string; text: string; at: number }

/** The status a 20001 announces, and its text: bare `online`, or `{"status": …, "text": …}`. */
export function parsePresence(content: string): { status: string; text: string } {
  try {
    const v = JSON.parse(content) as { status?: unknown; text?: unknown }
    if (v && typeof v === 'object' && typeof v.status === 'string') {
      return { status: v.status.slice(0, 32), text: typeof v.text === 'string' ? v.text.slice(0, MAX_TEXT) : '' }
    }
  } catch {
    /* bare status */
  }
  return { status: content.slice(0, 32), text: '' }
}

export class PresenceBook {
  private seen = new Map<string, Seen>()
  text: string

  constructor(private ws: Workspace) {
    this.text = localStorage.getItem(TEXT_KEY + ws.me.pubkey) ?? ''
  }

  start(): void {
    this.ws.relay.subscribe([{ kinds: [PRESENCE], limit: 0 }], (e) => this.event(e))
    void this.announce()
    window.setInterval(() => void this.announce(), REFRESH_MS)
    window.addEventListener('pagehide', () => void this.announce('offline'))
  }

  /** A 20001, live or from a stored read (the relay keeps the newest of each key in memory). */
  event(e: NEvent): void {
    if (e.kind !== PRESENCE) return
    const have = this.seen.get(e.pubkey)
    if (have && have.at > e.created_at) return
    const p = parsePresence(e.content)
    this.seen.set(e.pubkey, { ...p, at: e.created_at })
    this.ws.presence.set(e.pubkey, p.status)
    this.ws.changed()
  }

  status(pubkey: string): string {
    const s = this.seen.get(pubkey)
    if (!s || s.status === 'offline' || now() - s.at > STALE_S) return 'offline'
    return s.status
  }

  statusText(pubkey: string): string {
    return this.status(pubkey) === 'offline' ? '' : this.seen.get(pubkey)?.text ?? ''
  }

  /** An online agent: working while it types in one of my channels, else idle. */
  activity(pubkey: string): 'working' | 'idle' | null {
    if (this.status(pubkey) === 'offline') return null
    const t = now()
    for (const m of this.ws.typing.values()) if ((m.get(pubkey) ?? 0) > t) return 'working'
    return 'idle'
  }

  async setText(text: string): Promise<void> {
    this.text = text.trim().slice(0, MAX_TEXT)
    localStorage.setItem(TEXT_KEY + this.ws.me.pubkey, this.text)
    await this.announce()
  }

  private async announce(status = 'online'): Promise<void> {
    const content = this.text && status !== 'offline' ? JSON.stringify({ status, text: this.text }) : status
    try {
      const ev = await this.ws.relay.publish({ kind: PRESENCE, created_at: now(), tags: [], content })
      this.event(ev)
    } catch {
      /* presence is best effort */
    }
  }

  /** The box was emptied: tell the channel I stopped typing. */
  async stoppedTyping(channel: string): Promise<void> {
    try {
      await this.ws.relay.publish({ kind: TYPING, created_at: now(), tags: [['h', channel]], content: TYPING_STOPPED })
    } catch {
      /* typing is best effort */
    }
  }

  /** A 20002 saying `stopped`: true when it ended someone's typing here. */
  stopped(e: NEvent): boolean {
    if (e.content !== TYPING_STOPPED) return false
    this.ws.typing.get(firstTag(e, 'h') ?? '')?.delete(e.pubkey)
    this.ws.changed()
    return true
  }
}
