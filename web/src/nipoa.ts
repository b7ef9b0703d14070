// NIP-OA owner attestation on a profile (agents.md §1.2): exactly one
// ["auth", owner, conditions, sig] tag whose BIP-340 signature by `owner` covers
// SHA-256("nostr:agent-auth:" + agent pubkey + ":" + conditions). Provenance only: the
// workspace shows the agent badge and its owner. Time/kind clauses are not evaluated here
// (a display hint, not an access decision — the relay decides access).
import { schnorr } from '@noble/curves/secp256k1.js'
import { sha256 } from '@noble/hashes/sha2.js'
import { hexToBytes } from 'nostr-tools/utils'
import type { NEvent } from './types'

const HEX64 = /^[0-9a-f]{64}$/
const HEX128 = /^[0-9a-f]{128}$/

export function ownerOf(e: NEvent): string | null {
  const tags = e.tags.filter((t) => t[0] === 'auth')
  if (tags.length !== 1) return null
  const [, owner, conditions, sig] = tags[0]
  if (!HEX64.test(owner ?? '') || typeof conditions !== 'string' || !HEX128.test(sig ?? '') || owner === e.pubkey) return null
  try {
    const digest = sha256(new TextEncoder().encode(`nostr:agent-auth:${e.pubkey}:${conditions}`))
    return schnorr.verify(hexToBytes(sig), digest, hexToBytes(owner)) ? owner : null
  } catch {
    return null
  }
}
