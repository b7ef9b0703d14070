// A workspace's huddles as their lifecycle events tell them (huddle.md §8.5): who started
// which, who is inside, which one won a race (decision 81), and starting and ending one with
// the events `buzz huddle start` signs. The views read `ws.huddles`; the workspace delegates.
import {
  HUDDLE_ENDED, HUDDLE_JOINED, HUDDLE_KINDS, HUDDLE_RULES, HUDDLE_STARTED, HUDDLE_TTL_S, MAX_HUDDLE_AGENTS, VOICE_GUIDELINES,
  type HuddleInfo,
} from './model'
import { firstTag, now, type NEvent, type Tag } from './types'
import type { Workspace } from './workspace'

export class HuddleBook {
  private seen = new Set<string>()
  constructor(private readonly ws: Workspace) {}

  /** A channel's huddles from their lifecycle events (huddle.md §8.5), oldest first. */
  async load(channel: string): Promise<void> {
    const found = await this.ws.relay.query([{ kinds: HUDDLE_KINDS, '#h': [channel], limit: 500 }])
    if (!this.ws.huddles.has(channel)) this.ws.huddles.set(channel, new Map())
    found.sort((a, b) => a.created_at - b.created_at || a.kind - b.kind || (a.id < b.id ? -1 : 1))
    for (const e of found) this.event(e)
    this.ws.changed()
  }

  /** 48100 counts from anyone (the relay checked it names the author's own huddle channel);
   * 48101/48102 only from the relay's key; 48103 from the relay or the huddle's starter. */
  event(e: NEvent): void {
    const parent = firstTag(e, 'h')
    if (!parent || this.seen.has(e.id)) return
    let room = ''
    try {
      const v = JSON.parse(e.content) as { ephemeral_channel_id?: unknown }
      if (typeof v?.ephemeral_channel_id === 'string' && /^[0-9a-f-]{36}$/.test(v.ephemeral_channel_id)) room = v.ephemeral_channel_id
    } catch {
      return
    }
    if (!room) return
    const byRelay = !!this.ws.relayPubkey && e.pubkey === this.ws.relayPubkey
    if (e.kind !== HUDDLE_STARTED && !byRelay && !(e.kind === HUDDLE_ENDED && this.ws.huddles.get(parent)?.get(room)?.startedBy === e.pubkey)) return
    this.seen.add(e.id)
    let rooms = this.ws.huddles.get(parent)
    if (!rooms) this.ws.huddles.set(parent, (rooms = new Map()))
    let h = rooms.get(room)
    if (!h) rooms.set(room, (h = { room, parent, startedBy: null, startedAt: e.created_at, startId: '', ended: false, inside: new Set() }))
    if (h.ended) {
      // Events after a huddle's end are ignored (§8.5), except in a permanent channel, whose
      // own room (its id as ephemeral_channel_id) starts again with its next participant.
      if (room !== parent || e.kind !== HUDDLE_JOINED) return
      h.ended = false
      h.startedAt = e.created_at
    }
    const who = firstTag(e, 'p')
    if (e.kind === HUDDLE_STARTED) {
      h.startedBy = e.pubkey
      h.startedAt = e.created_at
      h.startId = e.id
      this.ws.needProfiles([e.pubkey])
    } else if (e.kind === HUDDLE_ENDED) {
      h.ended = true
      h.inside.clear()
    } else if (who && e.kind === HUDDLE_JOINED) h.inside.add(who)
    else if (who) h.inside.delete(who)
    if (who) this.ws.needProfiles([who])
    this.ws.changed()
  }

  /** The live huddle of `channel` to join: the one the race rule keeps among started ones
   * (`winningHuddle`), else the channel's own permanent room while someone is in it. */
  live(channel: string): HuddleInfo | null {
    const won = this.winner(channel)
    if (won) return won
    const own = this.ws.huddles.get(channel)?.get(channel)
    return own && !own.ended && own.inside.size ? own : null
  }

  /** One live huddle per channel (decision 81, as src/buzz/core/huddle_race.py): among the
   * started huddles that have not ended and whose channel is not archived, the one whose 48100
   * has the earliest created_at, then the lowest event id. */
  winner(channel: string): HuddleInfo | null {
    let best: HuddleInfo | null = null
    for (const h of this.ws.huddles.get(channel)?.values() ?? []) {
      if (h.ended || !h.startedBy || !h.startId || (h.room !== channel && this.ws.channels.get(h.room)?.archived)) continue
      if (!best || h.startedAt < best.startedAt || (h.startedAt === best.startedAt && h.startId < best.startId)) best = h
    }
    return best
  }

  /** End a huddle I started (its channel's creator may, §8.2): 48103 in the parent, then
   * archive its channel. Best effort: the relay ends it anyway once its last person left. */
  async end(room: string, parent: string): Promise<void> {
    const h = this.ws.huddles.get(parent)?.get(room)
    if (!h || h.ended) return
    const content = JSON.stringify({ ephemeral_channel_id: room })
    try {
      this.event(await this.ws.relay.publish({ kind: HUDDLE_ENDED, created_at: now(), tags: [['h', parent]], content }))
      await this.archive(room)
    } catch {
      /* already ended by the relay, or the TTL reclaims it */
    }
  }

  /** Archive a huddle's own channel (9002 `archived`), without reloading the channel list as
   * `editChannel` does: the huddle channel is not in the sidebar. */
  private async archive(room: string): Promise<void> {
    await this.ws.relay.publish({ kind: 9002, created_at: now(), tags: [['h', room], ['archived', 'true']], content: '' })
  }

  /** Who is in any live huddle of `channel`. */
  inside(channel: string): string[] {
    const out = new Set<string>()
    for (const h of this.ws.huddles.get(channel)?.values() ?? []) if (!h.ended) for (const p of h.inside) out.add(p)
    return [...out]
  }

  /** Start a huddle from `parent` in its own channel, in the order of huddle.md §8.4 and with
   * the events `buzz huddle start` signs: 9007 (fresh UUID, private, stream, TTL 3600 s), 48106
   * (best effort, p-tagged to the agents) before 9000 per agent (role bot), then 48100 in the
   * parent. A failed step archives the orphan channel (after a 48103 once 48100 is out) and
   * rethrows. Then the race rule (decision 81): the parent's huddles are read again and, when
   * another one wins, ours is ended and the winner returned. Returns the huddle channel's id to
   * join; joining its audio is `HuddleCall`'s step 5. */
  async start(parent: string, agents: string[]): Promise<string> {
    const invited = [...new Set(agents.map((a) => a.toLowerCase()))]
    if (invited.some((a) => !/^[0-9a-f]{64}$/.test(a))) throw new Error('Agent keys must be 64 hex characters.')
    if (invited.length > MAX_HUDDLE_AGENTS) throw new Error(`At most ${MAX_HUDDLE_AGENTS} agents per huddle.`)
    const room = crypto.randomUUID()
    const tags: Tag[] = [['h', room], ['name', `huddle-${parent.slice(0, 8)}`], ['visibility', 'private'], ['channel_type', 'stream'], ['ttl', String(HUDDLE_TTL_S)]]
    await this.ws.relay.publish({ kind: 9007, created_at: now(), tags, content: '' })
    const content = JSON.stringify({ ephemeral_channel_id: room })
    let started = false
    try {
      try {
        await this.ws.relay.publish({ kind: HUDDLE_RULES, created_at: now(), tags: [['h', room], ...invited.map((a) => ['p', a])], content: VOICE_GUIDELINES })
      } catch {
        /* best effort (§8.4 step 2) */
      }
      for (const agent of invited) await this.ws.relay.publish({ kind: 9000, created_at: now(), tags: [['h', room], ['p', agent], ['role', 'bot']], content: '' })
      const ev = await this.ws.relay.publish({ kind: HUDDLE_STARTED, created_at: now(), tags: [['h', parent]], content })
      started = true
      this.event(ev)
    } catch (e) {
      try {
        if (started) await this.ws.relay.publish({ kind: HUDDLE_ENDED, created_at: now(), tags: [['h', parent]], content })
        await this.archive(room)
      } catch {
        /* the TTL ends the channel anyway */
      }
      throw e
    }
    await this.load(parent)
    const won = this.winner(parent)
    if (won && won.room !== room) {
      await this.end(room, parent)
      return won.room
    }
    return room
  }
}
