// My agents: found by what they keep for me (engrams and turn metrics are p-tagged to their
// owner) and by a valid NIP-OA owner tag on their profile. Their memory is read with my key;
// writing needs the agent's own key, pasted into this tab and used over the agent's own
// authenticated connection (the relay takes kind 30174 only from its author, engram.md §11.1).
import * as nip44 from 'nostr-tools/nip44'
import { MemorySigner } from './identity'
import { RelayConn, relayUrl } from './relay'
import * as engram from './engram'
import { now, type NEvent } from './types'
import type { Workspace } from './workspace'

export const KIND_TURN_METRIC = 44200
export type Turn = { event: NEvent; payload: Record<string, unknown> | null }

export class AgentDesk {
  agents = new Set<string>()
  memory = new Map<string, Map<string, engram.Head>>()
  turns = new Map<string, Turn[]>()
  channels = new Map<string, string[]>()
  loaded = false
  private keys = new Map<string, { signer: MemorySigner; conn: RelayConn }>()

  constructor(private ws: Workspace) {}

  private ownerKey(agent: string): Uint8Array {
    if (!(this.ws.me instanceof MemorySigner)) throw new Error('Reading agent memory needs a key in this tab (an extension cannot derive the NIP-44 key).')
    return this.ws.me.conv(agent)
  }

  async discover(): Promise<void> {
    const me = this.ws.me.pubkey
    const found = await this.ws.relay.query([
      { kinds: [engram.KIND_ENGRAM], '#p': [me], limit: engram.LIST_QUERY_LIMIT },
      { kinds: [KIND_TURN_METRIC], '#p': [me], limit: 500 },
    ])
    for (const e of found) if (e.pubkey !== me) this.agents.add(e.pubkey)
    for (const [pk, p] of this.ws.profiles) if (p.owner === me) this.agents.add(pk)
    this.ws.needProfiles([...this.agents])
    this.loaded = true
    this.ws.changed()
  }

  async load(agent: string): Promise<void> {
    const me = this.ws.me.pubkey
    const key = this.ownerKey(agent)
    const [records, metrics, memberships] = await Promise.all([
      this.ws.relay.query([engram.listFilter(agent, me)]),
      this.ws.relay.query([{ kinds: [KIND_TURN_METRIC], authors: [agent], '#p': [me], limit: 20 }]),
      this.ws.relay.query([{ kinds: [39002], '#p': [agent] }]),
    ])
    this.memory.set(agent, engram.heads(records, agent, me, key))
    this.turns.set(
      agent,
      metrics
        .sort((a, b) => b.created_at - a.created_at)
        .map((event) => {
          try {
            return { event, payload: JSON.parse(nip44.decrypt(event.content, key)) as Record<string, unknown> }
          } catch {
            return { event, payload: null }
          }
        }),
    )
    this.channels.set(agent, memberships.map((e) => e.tags.find((t) => t[0] === 'd')?.[1] ?? '').filter(Boolean))
    this.ws.changed()
  }

  entries(agent: string): engram.Head[] {
    return [...(this.memory.get(agent)?.values() ?? [])]
      .filter((h) => engram.textOf(h.body) !== null)
      .sort((a, b) => (a.body.slug === engram.CORE ? -1 : b.body.slug === engram.CORE ? 1 : a.body.slug < b.body.slug ? -1 : 1))
  }

  canWrite(agent: string): boolean {
    return this.keys.has(agent)
  }

  /** Hold the agent's key for this tab; it must be the agent's. */
  useAgentKey(agent: string, secret: Uint8Array): void {
    const signer = new MemorySigner(secret)
    if (signer.pubkey !== agent) throw new Error('That key belongs to another identity, not this agent.')
    const auth = this.ws.profiles.get(agent)?.event.tags.filter((t) => t[0] === 'auth') ?? []
    const conn = new RelayConn(relayUrl(), signer, auth)
    conn.start()
    this.keys.get(agent)?.conn.stop()
    this.keys.set(agent, { signer, conn })
    this.ws.changed()
  }

  /** Write `text` (null: a tombstone) at `slug`, as `buzz mem set` / `rm` do: fresh head, §5.2 time. */
  async write(agent: string, slug: string, text: string | null): Promise<void> {
    const held = this.keys.get(agent)
    if (!held) throw new Error('Paste the agent’s key to edit its memory.')
    const me = this.ws.me.pubkey
    engram.validateSlug(slug)
    if (slug === engram.CORE && text === null) throw new Error('core is replaced, never deleted')
    const key = held.signer.conv(me)
    const d = engram.dTag(key, slug)
    const found = await held.conn.query([engram.headFilter(agent, me, d)])
    const head = engram.selectHead([...engram.heads(found, agent, me, key).values()])
    const body: engram.Body = slug === engram.CORE ? { slug: engram.CORE, profile: text ?? '' } : { slug, value: text }
    const ev = await held.signer.sign(engram.engramTemplate(key, me, body, engram.monotonicCreatedAt(now(), head)))
    // A lost write is `OK false "duplicate: have a newer version"` (the same event again: `OK true "duplicate:"`).
    const answer = await held.conn.publishSigned(ev).catch((e: Error) => {
      throw e.message.startsWith('duplicate:') ? new Error(`conflict: ${e.message}`) : e
    })
    if (answer.startsWith('duplicate:')) throw new Error(`conflict: ${answer}`)
    await this.load(agent)
  }
}
