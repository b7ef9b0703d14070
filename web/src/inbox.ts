// The inbox (issue 29 item 3): what waits for me in one list — messages that mention me,
// DMs from others, replies in threads I took part in — newest first, each opening in its
// context; "Mark done" removes an item on every device (the done ids ride in the read state,
// unread.ts). Approvals and job results join when their kinds reach the browser.
import { MESSAGE, threadLinks } from './model'
import { firstTag, type NEvent } from './types'
import type { Workspace } from './workspace'

export type Why = 'mention' | 'dm' | 'reply'
export type InboxItem = { ev: NEvent; channel: string; why: Why }

const PAGE = 100
const MAX_ITEMS = 1000 // held in memory; the oldest go first

export class Inbox {
  private items = new Map<string, InboxItem>()
  private threads = new Set<string>() // roots of threads I wrote in
  loaded = false
  started = false

  constructor(private ws: Workspace) {}

  async load(): Promise<void> {
    if (this.started) return
    this.started = true
    const me = this.ws.me.pubkey
    const dms = this.ws.myChannels().filter((c) => c.type === 'dm').map((c) => c.id)
    try {
      const [mentions, mine, inDms] = await Promise.all([
        this.ws.relay.query([{ kinds: [MESSAGE], '#p': [me], limit: PAGE }]),
        this.ws.relay.query([{ kinds: [MESSAGE], authors: [me], limit: 2 * PAGE }]),
        dms.length ? this.ws.relay.query([{ kinds: [MESSAGE], '#h': dms, limit: PAGE }]) : Promise.resolve([]),
      ])
      for (const e of mine) this.threads.add(threadLinks(e).root ?? e.id)
      const roots = [...this.threads].slice(0, PAGE)
      const replies = roots.length ? await this.ws.relay.query([{ kinds: [MESSAGE], '#e': roots, limit: PAGE }]) : []
      for (const e of [...mentions, ...inDms, ...replies]) this.consider(e)
    } catch {
      /* what could be read is shown */
    }
    this.loaded = true
    this.ws.changed()
  }

  /** A message, live or loaded: in the inbox when it is for me. */
  consider(e: NEvent): void {
    const me = this.ws.me.pubkey
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
    this.items.set(e.id, { ev: e, channel, why })
    if (this.items.size > MAX_ITEMS) {
      const oldest = [...this.items.values()].reduce((a, b) => (b.ev.created_at < a.ev.created_at ? b : a))
      this.items.delete(oldest.ev.id)
    }
    this.ws.changed()
  }

  /** Not done, newest first. */
  list(): InboxItem[] {
    const done = this.ws.reads.done
    return [...this.items.values()]
      .filter((i) => !done.has(i.ev.id) && !this.ws.msgs.get(i.ev.id)?.deleted)
      .sort((a, b) => b.ev.created_at - a.ev.created_at || (a.ev.id < b.ev.id ? -1 : 1))
  }

  markDone(id: string): void {
    this.ws.reads.markDone(id)
  }
}
