// Who the person is: a key held in this tab's memory, or a NIP-07 extension. A key is stored
// only encrypted (NIP-49 ncryptsec, under a passphrase the person chooses) in this browser's
// localStorage; it is never sent anywhere — the relay sees signatures, not keys.
import { finalizeEvent, generateSecretKey, getPublicKey } from 'nostr-tools/pure'
import * as nip19 from 'nostr-tools/nip19'
import * as nip44 from 'nostr-tools/nip44'
import * as nip49 from 'nostr-tools/nip49'
import { bytesToHex, hexToBytes } from 'nostr-tools/utils'
import type { NEvent, Signer, Template } from './types'

const STORE_KEY = 'buzz.ncryptsec'
const SCRYPT_LOG_N = 16 // NIP-49's suggested cost; about a second in a browser

declare global {
  interface Window {
    nostr?: {
      getPublicKey(): Promise<string>
      signEvent(t: Template): Promise<NEvent>
      nip44?: { encrypt(pk: string, text: string): Promise<string>; decrypt(pk: string, text: string): Promise<string> }
    }
  }
}

export class MemorySigner implements Signer {
  readonly pubkey: string
  readonly source = 'memory' as const
  private keys = new Map<string, Uint8Array>()
  constructor(private readonly secret: Uint8Array) {
    this.pubkey = getPublicKey(secret)
  }
  async sign(t: Template): Promise<NEvent> {
    return finalizeEvent(t, this.secret) as NEvent
  }
  /** The NIP-44 v2 conversation key with `peer` (cached). */
  conv(peer: string): Uint8Array {
    let k = this.keys.get(peer)
    if (!k) {
      k = nip44.getConversationKey(this.secret, peer)
      this.keys.set(peer, k)
    }
    return k
  }
  async nip44Encrypt(peer: string, plaintext: string): Promise<string> {
    return nip44.encrypt(plaintext, this.conv(peer))
  }
  async nip44Decrypt(peer: string, payload: string): Promise<string> {
    return nip44.decrypt(payload, this.conv(peer))
  }
  nsec(): string {
    return nip19.nsecEncode(this.secret)
  }
  secretBytes(): Uint8Array {
    return this.secret
  }
}

export async function extensionSigner(): Promise<Signer> {
  const ext = window.nostr
  if (!ext) throw new Error('no NIP-07 extension in this browser')
  const pubkey = await ext.getPublicKey()
  const signer: Signer = {
    pubkey,
    source: 'extension',
    sign: (t) => ext.signEvent(t),
  }
  if (ext.nip44) {
    const n = ext.nip44
    signer.nip44Encrypt = (pk, text) => n.encrypt(pk, text)
    signer.nip44Decrypt = (pk, text) => n.decrypt(pk, text)
  }
  return signer
}

export function newSecret(): Uint8Array {
  return generateSecretKey()
}

/** An `nsec1…` or 64-hex secret key; throws with a sentence a person can act on. */
export function parseSecret(text: string): Uint8Array {
  const t = text.trim()
  if (/^[0-9a-fA-F]{64}$/.test(t)) return hexToBytes(t.toLowerCase())
  if (t.startsWith('nsec1')) {
    try {
      const d = nip19.decode(t)
      if (d.type === 'nsec') return d.data
    } catch {
      /* falls through */
    }
    throw new Error('That nsec is not valid (check for a missing or extra character).')
  }
  if (isEncrypted(t)) throw new Error('That is an encrypted key: type its passphrase and press “Unlock”.')
  throw new Error('Paste an nsec1… key or 64 hexadecimal characters.')
}

export function storedKey(): string | null {
  return localStorage.getItem(STORE_KEY)
}

export function storeEncrypted(secret: Uint8Array, passphrase: string): string {
  const enc = nip49.encrypt(secret, passphrase, SCRYPT_LOG_N, 0x02)
  localStorage.setItem(STORE_KEY, enc)
  return enc
}

/** A NIP-49 encrypted key (`ncryptsec1…`), as pasted. */
export const isEncrypted = (text: string): boolean => text.trim().toLowerCase().startsWith('ncryptsec1')

/** The secret inside a NIP-49 `ncryptsec`; throws with a sentence a person can act on (the
 * library's own messages may quote the whole key). */
export function unlock(ncryptsec: string, passphrase: string): Uint8Array {
  try {
    return nip49.decrypt(ncryptsec.trim().toLowerCase(), passphrase)
  } catch (e) {
    const text = e instanceof Error ? e.message : String(e)
    if (/invalid tag/i.test(text)) throw new Error('Wrong passphrase.')
    // scrypt refuses a cost (log N) above what fits in its 1 GiB memory bound.
    if (/maxmem|memused/i.test(text)) throw new Error('This key was encrypted with a cost too high to unlock in a browser.')
    throw new Error('That ncryptsec is not valid (check for a missing or extra character).')
  }
}

export function forgetStored(): void {
  localStorage.removeItem(STORE_KEY)
}

export const npub = (hex: string): string => nip19.npubEncode(hex)
export const hex = (b: Uint8Array): string => bytesToHex(b)

/** A pubkey from an npub or 64 hex, or null. */
export function parsePubkey(text: string): string | null {
  const t = text.trim()
  if (/^[0-9a-fA-F]{64}$/.test(t)) return t.toLowerCase()
  try {
    const d = nip19.decode(t)
    if (d.type === 'npub') return d.data
  } catch {
    /* not bech32 */
  }
  return null
}
