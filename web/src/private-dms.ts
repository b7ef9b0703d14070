// End-to-end encrypted DMs (NIP-17 rumors in NIP-59 gift wraps; docs/decisions.md 280–285).
// The relay stores only kind 1059 wraps, each readable by its `p` key alone: this module opens
// the wraps addressed to me and seals and wraps what I send — one wrap per recipient and a copy
// to me (what `buzz dms send --private` does, src/buzz/core/nip59.py). The NIP-44 steps go
// through the signer (a key in this tab, or a NIP-07 extension with nip44), so a key held by
// an extension works too; the wrap's one-time key is nostr-tools' `nip59.createWrap`.
import * as nip59 from 'nostr-tools/nip59'
import { getEventHash, verifyEvent } from 'nostr-tools/pure'
import { relayUrl } from './relay'
import type { Workspace } from './workspace'
import { now, type NEvent, type Tag } from './types'

export const GIFT_WRAP = 1059
export const SEAL = 13
export const CHAT = 14
export const INBOX_RELAYS = 10050
const TWO_DAYS = 2 * 86_400
const PAST_WINDOW_S = 3 * 86_400 // the relay keeps wraps dated up to 3 days back (decision 170)
const MAX_CONTENT_BYTES = 30_000 // as the CLI: always fits NIP-44 after two layers
const MAX_WRAPS = 1000

export type Rumor = { id: string; pubkey: string; created_at: number; kind: number; tags: Tag[]; content: string }
export type PrivateMsg = { rumor: Rumor; wrap: string; peers: string[] }

/** The key of the conversation with these other people (sorted, comma-separated). */
export const conversationKey = (peers: string[]): string => [...new Set(peers)].sort().join(',')

const randomPast = (): number => Math.round(now() - Math.random() * TWO_DAYS)

export class PrivateDms {
  msgs = new Map<string, PrivateMsg>() // rumor id -> message
  unreadable = 0
  loaded = false
  private seenWraps = new Set<string>()
  private closeLive: (() => void) | null = null
  private wasOnline = false

  constructor(private readonly ws: Workspace) {}

  /** Whether this signer can open wraps (a NIP-07 extension without nip44 cannot). */
  get available(): boolean {
    return !!this.ws.me.nip44Decrypt && !!this.ws.me.nip44Encrypt
  }

  /** Read my wraps and keep listening; after a reconnect the whole window is read again (a
   * wrap's time is random up to two days back, so "since the last one seen" would miss some). */
  start(): void {
    if (!this.available || this.closeLive) return
    const me = this.ws.me.pubkey
    this.closeLive = this.ws.relay.subscribe(
      [{ kinds: [GIFT_WRAP], '#p': [me], since: now() - PAST_WINDOW_S }],
      (e) => void this.add(e),
    )
    void this.refresh()
    void this.ensureInbox()
    this.ws.listen(() => {
      const online = this.ws.status === 'online'
      if (online && !this.wasOnline && this.loaded) void this.refresh()
      this.wasOnline = online
    })
  }

  async refresh(): Promise<void> {
    const wraps = await this.ws.relay.query([{ kinds: [GIFT_WRAP], '#p': [this.ws.me.pubkey], limit: MAX_WRAPS }])
    await Promise.all(wraps.map((w) => this.add(w)))
    this.loaded = true
    this.ws.changed()
  }

  private async add(wrap: NEvent): Promise<void> {
    if (this.seenWraps.has(wrap.id)) return
    this.seenWraps.add(wrap.id)
    let rumor: Rumor
    try {
      rumor = await this.unwrap(wrap)
    } catch {
      this.unreadable++
      return
    }
    if (this.msgs.has(rumor.id)) return
    const me = this.ws.me.pubkey
    const peers = [...new Set([rumor.pubkey, ...rumor.tags.filter((t) => t[0] === 'p').map((t) => t[1])])].filter((p) => p !== me)
    this.msgs.set(rumor.id, { rumor, wrap: wrap.id, peers: peers.sort() })
    this.ws.needProfiles(peers)
    this.ws.changed()
  }

  /** Open a wrap into its kind 14 rumor, checking every layer (as src/buzz/core/nip59.py). */
  async unwrap(wrap: NEvent): Promise<Rumor> {
    const signer = this.ws.me
    if (wrap.kind !== GIFT_WRAP || !verifyEvent(wrap)) throw new Error('not a valid gift wrap')
    const seal = JSON.parse(await signer.nip44Decrypt!(wrap.pubkey, wrap.content)) as NEvent
    if (seal.kind !== SEAL || !verifyEvent(seal)) throw new Error('not a valid seal')
    const rumor = JSON.parse(await signer.nip44Decrypt!(seal.pubkey, seal.content)) as Rumor
    if (rumor.pubkey !== seal.pubkey) throw new Error('the rumor is not the seal signer’s')
    if (rumor.kind !== CHAT) throw new Error('not a chat message')
    if (getEventHash(rumor) !== rumor.id) throw new Error('the rumor id does not match')
    return rumor
  }

  /** Conversations, most recent first. */
  conversations(): { key: string; peers: string[]; last: number }[] {
    const by = new Map<string, { key: string; peers: string[]; last: number }>()
    for (const m of this.msgs.values()) {
      const key = conversationKey(m.peers)
      const c = by.get(key)
      if (!c) by.set(key, { key, peers: m.peers, last: m.rumor.created_at })
      else c.last = Math.max(c.last, m.rumor.created_at)
    }
    return [...by.values()].sort((a, b) => b.last - a.last || a.key.localeCompare(b.key))
  }

  /** The messages with exactly these other people, oldest first. */
  messages(peers: string[]): PrivateMsg[] {
    const key = conversationKey(peers)
    return [...this.msgs.values()]
      .filter((m) => conversationKey(m.peers) === key)
      .sort((a, b) => a.rumor.created_at - b.rumor.created_at || a.rumor.id.localeCompare(b.rumor.id))
  }

  /** Seal and wrap `text` to each of `peers` and to me; publish the wraps. */
  async send(peers: string[], text: string, replyTo?: string): Promise<Rumor> {
    const signer = this.ws.me
    if (!this.available) throw new Error('This key cannot encrypt: use a key or an extension with NIP-44.')
    if (!text.trim()) throw new Error('The message is empty.')
    if (new TextEncoder().encode(text).length > MAX_CONTENT_BYTES) throw new Error(`A private message holds at most ${MAX_CONTENT_BYTES} bytes.`)
    const others = [...new Set(peers)].filter((p) => p !== signer.pubkey)
    if (!others.length) throw new Error('A private message needs a recipient.')
    const tags: Tag[] = others.map((p) => ['p', p])
    if (replyTo) tags.push(['e', replyTo])
    const base = { pubkey: signer.pubkey, created_at: now(), kind: CHAT, tags, content: text }
    const rumor: Rumor = { ...base, id: getEventHash(base) }
    for (const receiver of [...others, signer.pubkey]) {
      const seal = await signer.sign({
        kind: SEAL,
        created_at: randomPast(),
        tags: [],
        content: await signer.nip44Encrypt!(receiver, JSON.stringify(rumor)),
      })
      const wrap = nip59.createWrap(seal, receiver) as NEvent
      await this.ws.relay.publishSigned(wrap)
      if (receiver === signer.pubkey) await this.add(wrap)
    }
    return rumor
  }

  /** Publish my kind 10050 naming this relay when I have none, so NIP-17 senders know where
   * to reach me (best effort: reading and sending work without it). */
  private async ensureInbox(): Promise<void> {
    try {
      const mine = await this.ws.relay.query([{ kinds: [INBOX_RELAYS], authors: [this.ws.me.pubkey], limit: 1 }])
      if (mine.length) return
      await this.ws.relay.publish({ kind: INBOX_RELAYS, created_at: now(), tags: [['relay', relayUrl()]], content: '' })
    } catch {
      /* best effort */
    }
  }
}

const books = new WeakMap<Workspace, PrivateDms>()

/** The workspace's private DMs (created and started on first use). */
export function privateDms(ws: Workspace): PrivateDms {
  let book = books.get(ws)
  if (!book) {
    book = new PrivateDms(ws)
    books.set(ws, book)
    book.start()
  }
  return book
}
