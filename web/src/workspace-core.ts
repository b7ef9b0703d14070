// The workspace's state and its channel side: change notification, start-up, channels and
// their members, the live subscription, profiles and channel administration. Messages and
// opening a channel are the subclass's (workspace.ts), which is what the views hold.
import { RelayConn, relayUrl } from './relay'
import { firstTag, now, type NEvent, type Signer, type Tag } from './types'
import type { AgentDesk } from './agents'
import type { HuddleBook } from './huddle-book'
import type { Outbox } from './outbox'
import type { ReadState } from './unread'
import type { PresenceBook } from './presence'
import { INBOX_WORK_KINDS, type Inbox } from './inbox'
import {
  DELETION, EDIT, HUDDLE_KINDS, MESSAGE, MODERATION_DELETE, PRESENCE, REACTION, TYPING, profileOf,
  type Channel, type HuddleInfo, type Msg, type Profile, type Role, type Timeline,
} from './model'

const LIVE_KINDS = [MESSAGE, EDIT, REACTION, DELETION, MODERATION_DELETE, ...HUDDLE_KINDS]

export abstract class WorkspaceCore {
  readonly relay: RelayConn
  // Parts that take the whole Workspace: made by its constructor.
  abstract readonly desk: AgentDesk
  abstract readonly huddleBook: HuddleBook
  abstract readonly outbox: Outbox
  abstract readonly reads: ReadState
  abstract readonly presenceBook: PresenceBook
  abstract readonly inbox: Inbox
  status: 'connecting' | 'online' | 'offline' = 'connecting'
  statusDetail = ''
  channels = new Map<string, Channel>()
  channelsLoaded = false
  roles = new Map<string, Map<string, Role>>()
  profiles = new Map<string, Profile>()
  presence = new Map<string, string>()
  msgs = new Map<string, Msg>()
  timelines = new Map<string, Timeline>()
  get unread(): Map<string, number> {
    return this.reads.unread
  }
  typing = new Map<string, Map<string, number>>()
  active: string | null = null
  thread: string | null = null
  editRequest: string | null = null // ↑ in an empty box: the message to open for editing
  // Messages being edited: id -> the edit box's text. Held here, not in the message's own
  // state, so an edit survives the windowed timeline unmounting its row (decision 366).
  edits = new Map<string, string>()
  focus: string | null = null // the message a permalink or search result points at (highlighted)
  notice: string | null = null
  refused = new Map<string, string>() // channel id -> the relay's refusal of a read
  huddles = new Map<string, Map<string, HuddleInfo>>() // parent channel id -> room id -> huddle
  relayPubkey = ''
  private listeners = new Set<() => void>()
  private scheduled = false
  private liveClose: (() => void) | null = null
  private liveKey = ''
  private wantedProfiles = new Set<string>()
  private profileTimer = 0

  constructor(readonly me: Signer) {
    this.relay = new RelayConn(relayUrl(), me)
    this.relay.onstatus = (s, detail) => {
      this.status = s
      this.statusDetail = detail ?? ''
      this.changed()
    }
  }

  // -- change notification ---------------------------------------------------------------
  listen(fn: () => void): () => void {
    this.listeners.add(fn)
    return () => this.listeners.delete(fn)
  }

  changed(): void {
    if (this.scheduled) return
    this.scheduled = true
    queueMicrotask(() => {
      this.scheduled = false
      for (const fn of this.listeners) fn()
    })
  }

  say(text: string): void {
    this.notice = text
    this.changed()
  }

  // -- start -----------------------------------------------------------------------------
  async start(): Promise<void> {
    this.relay.start()
    this.reads.follow()
    this.needProfiles([this.me.pubkey])
    // Being added to or removed from a channel; that channel's own state (39000/39002) then
    // comes through the per-channel subscription (relay.md §6.3 item 3: channel events reach
    // live subscriptions only through a filter naming the channel).
    this.relay.subscribe([{ kinds: [44100, 44101], '#p': [this.me.pubkey], limit: 0 }], (e) => this.onChannelState(e))
    void this.loadRelayInfo()
    this.presenceBook.start()
    await this.loadChannels()
  }

  /** The relay's own key (NIP-11 `self`): huddle lifecycle events count only when it signed them. */
  private async loadRelayInfo(): Promise<void> {
    try {
      const info = (await (await fetch('/', { headers: { Accept: 'application/nostr+json' } })).json()) as { self?: string }
      this.relayPubkey = info.self ?? ''
    } catch {
      /* without it, no huddle roster is shown */
    }
  }

  // -- huddles (huddle-book.ts) ----------------------------------------------------------
  /** A channel's huddles from their lifecycle events (huddle.md §8.5), oldest first. */
  loadHuddle = (channel: string): Promise<void> => this.huddleBook.load(channel)
  /** The live huddle of `channel` to join: the race's winner, else its own room while occupied. */
  liveHuddle = (channel: string): HuddleInfo | null => this.huddleBook.live(channel)
  /** One live huddle per channel (decision 81, as src/buzz/core/huddle_race.py). */
  winningHuddle = (channel: string): HuddleInfo | null => this.huddleBook.winner(channel)
  /** End a huddle I started: 48103 in the parent, then archive its channel (best effort). */
  endHuddle = (room: string, parent: string): Promise<void> => this.huddleBook.end(room, parent)
  /** Who is in any live huddle of `channel`. */
  inHuddle = (channel: string): string[] => this.huddleBook.inside(channel)
  /** Start a huddle from `parent` in its own channel (huddle.md §8.4); the room id to join. */
  startHuddle = (parent: string, agents: string[]): Promise<string> => this.huddleBook.start(parent, agents)

  private stateTimer = 0
  protected onChannelState(e: NEvent): void {
    if (e.kind === 39002) this.applyRoles(e)
    clearTimeout(this.stateTimer)
    // A background refresh: when the relay does not answer in time (a loaded box), the page
    // keeps the list it has and the next state change reloads it; never an unhandled rejection.
    this.stateTimer = window.setTimeout(() => void this.loadChannels().catch(() => undefined), 150)
  }

  protected applyRoles(e: NEvent): void {
    const id = firstTag(e, 'd')
    if (!id) return
    const roles = new Map<string, Role>()
    for (const t of e.tags) {
      if (t[0] === 'p' && /^[0-9a-f]{64}$/.test(t[1] ?? '')) roles.set(t[1], ((t[3] || 'member') as Role))
    }
    this.roles.set(id, roles)
    this.needProfiles([...roles.keys()])
    this.changed()
  }

  async loadChannels(): Promise<void> {
    const [mine, metas] = await Promise.all([
      this.relay.query([{ kinds: [39002], '#p': [this.me.pubkey] }]),
      this.relay.query([{ kinds: [39000], limit: 1000 }]),
    ])
    const member = new Set<string>()
    for (const e of mine) {
      const id = firstTag(e, 'd')
      if (id) {
        member.add(id)
        if (!this.roles.has(id)) this.applyRoles(e)
      }
    }
    const next = new Map<string, Channel>()
    for (const m of metas) {
      const id = firstTag(m, 'd')
      if (!id || next.has(id)) continue
      const names = new Set(m.tags.map((t) => t[0]))
      const ch: Channel = {
        id,
        name: firstTag(m, 'name') ?? '',
        about: firstTag(m, 'about') ?? '',
        visibility: names.has('private') ? 'private' : 'open',
        type: firstTag(m, 't') ?? 'stream',
        archived: firstTag(m, 'archived') === 'true',
        ttl: Number(firstTag(m, 'ttl') ?? 0) || 0,
        member: member.has(id),
        peers: m.tags.filter((t) => t[0] === 'p').map((t) => t[1]),
      }
      if (ch.type === 'dm') this.needProfiles(ch.peers)
      next.set(id, ch)
    }
    this.channels = next
    if (!this.channelsLoaded) {
      // What a previous page left unsent shows again, on its timeline; the relay says which it holds.
      for (const ev of this.outbox.restore()) this.ingest(ev, true)
      void this.outbox.recheck()
    }
    this.channelsLoaded = true
    this.resubscribe()
    void this.reads.countAll()
    this.changed()
  }

  myChannels(): Channel[] {
    return [...this.channels.values()].filter((c) => c.member)
  }

  channelLabel(c: Channel): string {
    if (c.type !== 'dm') return c.name
    const others = c.peers.filter((p) => p !== this.me.pubkey)
    // Names in alphabetical order: the relay's participant order (by key) means nothing to a reader.
    return others.length ? others.map((p) => this.nameOf(p)).sort((a, b) => a.localeCompare(b)).join(', ') : this.nameOf(this.me.pubkey)
  }

  private resubscribe(): void {
    const ids = this.myChannels().map((c) => c.id).sort()
    const key = ids.join(',')
    if (key === this.liveKey) return
    this.liveKey = key
    // New events only (`limit: 0`), not `since: now()`: an event signed a moment before this
    // (a rival's 48100 held in flight, a slow clock) must still arrive. The new subscription
    // opens before the old one closes, so nothing published in between is lost.
    const previous = this.liveClose
    this.liveClose = ids.length
      ? this.relay.subscribe(
          [
            { kinds: LIVE_KINDS, '#h': ids, limit: 0 },
            { kinds: [39000, 39002], '#h': ids, limit: 0 },
            { kinds: [TYPING], '#h': ids, limit: 0 },
            { kinds: INBOX_WORK_KINDS, '#h': ids, limit: 0 },
          ],
          (e) => (e.kind === 39000 || e.kind === 39002 ? this.onChannelState(e) : this.ingest(e, true)),
        )
      : null
    previous?.()
  }

  // -- profiles --------------------------------------------------------------------------
  needProfiles(pubkeys: string[]): void {
    let added = false
    for (const p of pubkeys) {
      if (!this.profiles.has(p) && !this.wantedProfiles.has(p)) {
        this.wantedProfiles.add(p)
        added = true
      }
    }
    if (!added) return
    clearTimeout(this.profileTimer)
    // Keys whose fetch failed are no longer wanted: the next view that needs them asks again.
    this.profileTimer = window.setTimeout(() => void this.fetchProfiles().catch(() => undefined), 30)
  }

  private async fetchProfiles(): Promise<void> {
    const keys = [...this.wantedProfiles]
    this.wantedProfiles.clear()
    if (!keys.length) return
    const found = await this.relay.query([
      { kinds: [0], authors: keys },
      { kinds: [PRESENCE], authors: keys },
    ])
    for (const e of found) {
      if (e.kind === PRESENCE) {
        this.presenceBook.event(e)
        continue
      }
      const have = this.profiles.get(e.pubkey)
      if (have && have.event.created_at >= e.created_at) continue
      this.profiles.set(e.pubkey, profileOf(e))
    }
    this.changed()
  }

  nameOf(pubkey: string): string {
    const p = this.profiles.get(pubkey)
    return p?.name || pubkey.slice(0, 8)
  }

  async setProfile(name: string, about: string): Promise<void> {
    const old = this.profiles.get(this.me.pubkey)
    let fields: Record<string, unknown> = {}
    try {
      fields = old ? JSON.parse(old.event.content) : {}
    } catch {
      fields = {}
    }
    fields = { ...fields, name, display_name: name, about }
    const ev = await this.relay.publish({ kind: 0, created_at: now(), tags: old?.event.tags.filter((t) => t[0] === 'auth') ?? [], content: JSON.stringify(fields) })
    this.profiles.set(ev.pubkey, profileOf(ev))
    this.changed()
  }

  async loadMembers(id: string): Promise<void> {
    const found = await this.relay.query([{ kinds: [39002], '#d': [id] }])
    if (found[0]) this.applyRoles(found[0])
  }

  roleOf(channel: string, pubkey: string): Role | undefined {
    return this.roles.get(channel)?.get(pubkey)
  }

  isElevated(channel: string): boolean {
    const r = this.roleOf(channel, this.me.pubkey)
    return r === 'owner' || r === 'admin'
  }

  async createChannel(name: string, visibility: 'open' | 'private', about: string): Promise<string> {
    const id = crypto.randomUUID()
    const tags: Tag[] = [['h', id], ['name', name], ['visibility', visibility], ['channel_type', 'stream']]
    if (about) tags.push(['about', about])
    await this.relay.publish({ kind: 9007, created_at: now(), tags, content: '' })
    await this.loadChannels()
    return id
  }

  async join(id: string): Promise<void> {
    await this.relay.publish({ kind: 9021, created_at: now(), tags: [['h', id]], content: '' })
    await this.loadChannels()
  }

  async leave(id: string): Promise<void> {
    await this.relay.publish({ kind: 9022, created_at: now(), tags: [['h', id]], content: '' })
    if (this.active === id) this.active = null
    await this.loadChannels()
  }

  async putMember(channel: string, pubkey: string, role?: Role): Promise<void> {
    const tags: Tag[] = [['h', channel], ['p', pubkey]]
    if (role) tags.push(['role', role])
    await this.relay.publish({ kind: 9000, created_at: now(), tags, content: '' })
    await this.loadMembers(channel)
  }

  async removeMember(channel: string, pubkey: string): Promise<void> {
    await this.relay.publish({ kind: 9001, created_at: now(), tags: [['h', channel], ['p', pubkey]], content: '' })
    await this.loadMembers(channel)
  }

  async editChannel(channel: string, fields: { name?: string; about?: string; archived?: boolean }): Promise<void> {
    const tags: Tag[] = [['h', channel]]
    if (fields.name !== undefined) tags.push(['name', fields.name])
    if (fields.about !== undefined) tags.push(['about', fields.about])
    if (fields.archived !== undefined) tags.push(['archived', fields.archived ? 'true' : 'false'])
    await this.relay.publish({ kind: 9002, created_at: now(), tags, content: '' })
    await this.loadChannels()
  }

  /** Open (or reuse) the DM with these people: one, or a group of up to 8 (41010). */
  async openDm(pubkeys: string | string[]): Promise<string> {
    const tags: Tag[] = [pubkeys].flat().map((p) => ['p', p])
    const ev = await this.me.sign({ kind: 41010, created_at: now(), tags, content: '' })
    const answer = await this.relay.publishSigned(ev)
    const m = /^response:(.*)$/.exec(answer)
    const id = m ? (JSON.parse(m[1]) as { channel_id?: string }).channel_id : undefined
    await this.loadChannels()
    if (!id) throw new Error('error: the relay did not name the DM channel')
    return id
  }

  /** A live or loaded event (workspace.ts). */
  abstract ingest(e: NEvent, live: boolean): void
}
