// Engrams (NIP-AE, the same rules as src/buzz/core/engram*.py and `buzz mem`): kind 30174 by
// the agent, `d` = HMAC-SHA256(K_c, "agent-memory/v1/d-tag" ‖ 0x00 ‖ slug), content NIP-44 v2
// of the canonical body under K_c, the pair's conversation key. The owner reads with
// (seckey_o, pubkey_a); only the agent writes, so editing needs the agent's key in this tab.
import { hmac } from '@noble/hashes/hmac.js'
import { sha256 } from '@noble/hashes/sha2.js'
import * as nip44 from 'nostr-tools/nip44'
import { bytesToHex } from 'nostr-tools/utils'
import type { Filter } from './relay'
import { firstTag, type NEvent } from './types'

export const KIND_ENGRAM = 30174
export const CORE = 'core'
export const PLAINTEXT_MAX = 65535
export const HEAD_QUERY_LIMIT = 16
export const LIST_QUERY_LIMIT = 5000
export const CLOCK_POISON_MARGIN = 600
const DOMAIN = new TextEncoder().encode('agent-memory/v1/d-tag')
const SEGMENT = /^[a-z0-9][a-z0-9_-]{0,63}$/

export type Body = { slug: string; value: string | null } | { slug: 'core'; profile: string }
export type Head = { event: NEvent; body: Body }

/** engram.md §3.2; throws with the reason. */
export function validateSlug(slug: string): string {
  if (slug === CORE) return slug
  if (new TextEncoder().encode(slug).length > 255) throw new Error('slug is over 255 bytes')
  if (!slug.startsWith('mem/')) throw new Error("slug must be 'core' or start with 'mem/'")
  const rest = slug.slice(4)
  if (!rest) throw new Error("slug has nothing after 'mem/'")
  rest.split('/').forEach((seg, i) => {
    if (!SEGMENT.test(seg)) throw new Error(`slug segment ${i + 1} must be [a-z0-9][a-z0-9_-]{0,63}`)
  })
  return slug
}

/** What a person means by `text` (§3.4): `core`, `mem/…`, or `mem/` + text. */
export function normalizeSlug(text: string): string {
  return validateSlug(text === CORE || text.startsWith('mem/') ? text : 'mem/' + text)
}

export function dTag(key: Uint8Array, slug: string): string {
  validateSlug(slug)
  const msg = new Uint8Array([...DOMAIN, 0, ...new TextEncoder().encode(slug)])
  return bytesToHex(hmac(sha256, key, msg))
}

/** Canonical body bytes (§6.2): compact, slug first. JSON.stringify escapes exactly as
 * Python's json.dumps(ensure_ascii=False) does for well-formed text, so the bytes match. */
export function encodeBody(body: Body): string {
  const text = 'profile' in body ? body.profile : body.value
  if (text !== null && !text.isWellFormed()) throw new Error('text contains an unpaired surrogate')
  const raw = 'profile' in body ? JSON.stringify({ slug: CORE, profile: body.profile }) : JSON.stringify({ slug: body.slug, value: body.value })
  const size = new TextEncoder().encode(raw).length
  if (size > PLAINTEXT_MAX) throw new Error(`serialized body is ${size} bytes, over the ${PLAINTEXT_MAX}-byte limit`)
  return raw
}

function decodeBody(text: string): Body {
  const root: unknown = JSON.parse(text)
  if (!root || typeof root !== 'object' || Array.isArray(root)) throw new Error('body must be a JSON object')
  const o = root as Record<string, unknown>
  if (typeof o.slug !== 'string') throw new Error('body slug is missing')
  validateSlug(o.slug)
  if (o.slug === CORE) {
    if (typeof o.profile !== 'string') throw new Error('core profile is missing')
    return { slug: CORE, profile: o.profile }
  }
  if (!('value' in o) || (o.value !== null && typeof o.value !== 'string')) throw new Error('memory value must be a string or null')
  return { slug: o.slug, value: o.value as string | null }
}

/** §7: envelope, decrypt, body, and the slug re-deriving to `d`; throws on any failure. */
export function open(e: NEvent, agent: string, owner: string, key: Uint8Array): Body {
  if (e.kind !== KIND_ENGRAM || e.pubkey !== agent) throw new Error('not this agent’s engram')
  const ds = e.tags.filter((t) => t[0] === 'd')
  const ps = e.tags.filter((t) => t[0] === 'p')
  if (ds.length !== 1 || ps.length !== 1 || !/^[0-9a-f]{64}$/.test(ds[0][1] ?? '') || (ps[0][1] ?? '').toLowerCase() !== owner) throw new Error('bad envelope')
  const body = decodeBody(nip44.decrypt(e.content, key))
  if (dTag(key, body.slug) !== ds[0][1]) throw new Error('slug does not re-derive to d')
  return body
}

/** §8 step 4: greatest created_at, then lowest id. */
export function selectHead(heads: Head[]): Head | null {
  let best: Head | null = null
  for (const h of heads) {
    if (!best || h.event.created_at > best.event.created_at || (h.event.created_at === best.event.created_at && h.event.id < best.event.id)) best = h
  }
  return best
}

export function headFilter(agent: string, owner: string, d: string): Filter {
  return { kinds: [KIND_ENGRAM], authors: [agent], '#d': [d], '#p': [owner], limit: HEAD_QUERY_LIMIT }
}

export function listFilter(agent: string, owner: string): Filter {
  return { kinds: [KIND_ENGRAM], authors: [agent], '#p': [owner], limit: LIST_QUERY_LIMIT }
}

/** Every valid record's head per slug (tombstones included; the caller hides them). */
export function heads(events: NEvent[], agent: string, owner: string, key: Uint8Array): Map<string, Head> {
  const groups = new Map<string, Head[]>()
  for (const e of events) {
    try {
      const body = open(e, agent, owner, key)
      const d = firstTag(e, 'd')!
      ;(groups.get(d) ?? groups.set(d, []).get(d)!).push({ event: e, body })
    } catch {
      /* §9 step 2: failures are skipped silently */
    }
  }
  const out = new Map<string, Head>()
  for (const list of groups.values()) {
    const h = selectHead(list)
    if (h) out.set(h.body.slug, h)
  }
  return out
}

/** §5.2: `now` with no head, else max(now, T + 1); refuses a clock-poisoned head. */
export function monotonicCreatedAt(now: number, head: Head | null): number {
  if (!head) return now
  const t = Math.max(now, head.event.created_at + 1)
  if (t > now + CLOCK_POISON_MARGIN) throw new Error(`conflict: the current head is dated ${head.event.created_at}, too far in the future`)
  return t
}

export function engramTemplate(key: Uint8Array, owner: string, body: Body, createdAt: number) {
  const plaintext = encodeBody(body)
  return {
    kind: KIND_ENGRAM,
    created_at: createdAt,
    tags: [['d', dTag(key, body.slug)], ['p', owner]],
    content: nip44.encrypt(plaintext, key),
  }
}

export const textOf = (b: Body): string | null => ('profile' in b ? b.profile : b.value)
