// The workspace model: channels, members, profiles and messages, fed by the relay. Events
// have the same shapes the CLI produces (src/buzz/cli/*_cmd.py): kind 9 with tags in the
// order h, NIP-10 marked e, p, broadcast; 40003 edits; 7 reactions (no h); 5 / 9005 deletions;
// 9007/9000/9001/9002/9021/9022 channel administration. Views re-render on `changed()`.
// The channel side lives in workspace-core.ts; this file is opening channels and messages.
import { type Filter } from './relay'
import { resolveNames } from './mentions'
import { hasFile, type SearchQuery } from './search-query'
import { firstTag, now, type NEvent, type Signer, type Tag } from './types'
import { AgentDesk } from './agents'
import { HuddleBook } from './huddle-book'
import { Outbox } from './outbox'
import { ReadState } from './unread'
import { PresenceBook } from './presence'
import { Inbox, INBOX_WORK_KINDS } from './inbox'
import { shouldNotify } from './notify'
import { WorkspaceCore } from './workspace-core'
import {
  DELETION, EDIT, HUDDLE_ENDED, HUDDLE_JOINED, HUDDLE_LEFT, HUDDLE_STARTED, MAX_CONTENT_BYTES, MESSAGE,
  MODERATION_DELETE, PAGE, REACTION, TYPING, byTime, insertSorted, threadLinks,
  type Msg, type Timeline,
} from './model'

// Everything the views import from here as before.
export * from './model'

const TYPING_TTL_S = 6
const LAST_CHANNEL = 'buzz.last-channel.'

/** The channel last open in this browser for `me`: a sign-in without a link opens it again. */
export function lastChannel(me: string): string | null {
  try {
    return localStorage.getItem(LAST_CHANNEL + me)
  } catch {
    return null
  }
}

function rememberChannel(me: string, id: string): void {
  try {
    localStorage.setItem(LAST_CHANNEL + me, id)
  } catch {
    /* storage full or disabled: a sign-in opens the first channel */
  }
}
const THREAD_PAGE = 200 // replies a thread shows at first, and each older page adds

export class Workspace extends WorkspaceCore {
  readonly desk: AgentDesk = new AgentDesk(this)
  readonly huddleBook: HuddleBook = new HuddleBook(this)
  readonly outbox: Outbox
  readonly reads: ReadState
  readonly presenceBook: PresenceBook
  readonly inbox: Inbox
  private quiet = new Set<string>() // held for search results, not yet on a timeline
  private reactionIndex = new Map<string, { target: string; emoji: string; pubkey: string }>()
  private lastTyping = 0
  private newer = 1
  private older = 0
  private pages = new Map<string, Promise<number>>() // each channel's page on its way
  // Each opened thread's replies: read newest first, a page at a time (decision 385)
  private threadPages = new Map<string, { hasMore: boolean; loading: boolean }>()

  constructor(me: Signer) {
    super(me)
    this.outbox = new Outbox(this.relay, () => this.changed(), me.pubkey)
    this.reads = new ReadState(this)
    this.presenceBook = new PresenceBook(this)
    this.inbox = new Inbox(this)
  }

  // -- channels --------------------------------------------------------------------------
  async openChannel(id: string): Promise<void> {
    // What the channel left showed is read, even when its opening is still on its way (its
    // page's edits and reactions, below): it marks itself read only while it is on screen.
    const left = this.active
    if (left && left !== id && this.visible(left).length) this.reads.markRead(left)
    this.active = id
    history.replaceState(null, '', `#${id}`)
    rememberChannel(this.me.pubkey, id)
    this.thread = null
    this.reads.opened(id)
    this.changed()
    const ch = this.channels.get(id)
    if (ch && !this.roles.has(id)) void this.loadMembers(id)
    if (ch && !this.huddles.has(id)) void this.loadHuddle(id).catch(() => undefined)
    if (!this.timelines.get(id)?.loaded) await this.loadOlder(id)
    // Back to the first unread message, so the divider has it (at most 500 further).
    const divider = this.reads.dividers.get(id)
    const shown = this.visible(id)
    if (divider && shown.length && shown[0].ev.created_at > divider.at) await this.loadOlder(id, divider.at)
    this.reads.settled.add(id)
    // The inbox's queries wait for the first channel on screen (time to the first message).
    if (!this.inbox.started) void this.inbox.load()
    if (this.active === id) this.reads.markRead(id)
    this.changed()
  }

  // -- messages --------------------------------------------------------------------------
  timeline(channel: string): Timeline {
    let t = this.timelines.get(channel)
    if (!t) {
      t = { ids: [], hasMore: true, loading: false, loaded: false, pagedTo: Infinity }
      this.timelines.set(channel, t)
    }
    return t
  }

  /** How far back `channel` is loaded: its oldest timeline message, or further when its pages
   * went further (a page of thread replies shows no row but is read; Infinity: nothing yet). */
  oldestOn(channel: string): number {
    const t = this.timeline(channel)
    return t.ids.reduce((min, id) => Math.min(min, this.msgs.get(id)?.ev.created_at ?? Infinity), t.pagedTo)
  }

  /** One page older than what is shown (paged by `until`, relay.md §6.4: inclusive bounds);
   * with `reach`, everything back to that created_at (at most 500 a call), for a permalink.
   * Returns how many messages it added; asked while a page is on its way, that page's count
   * once it is in (a second click on a channel still opening must not mark it read before its
   * first page is there: read up to "now", the messages it was to show would not be unread). */
  loadOlder(channel: string, reach?: number): Promise<number> {
    const pending = this.pages.get(channel)
    if (pending) return pending
    const page = this.pageOlder(channel, reach).finally(() => this.pages.delete(channel))
    this.pages.set(channel, page)
    return page
  }

  private async pageOlder(channel: string, reach?: number): Promise<number> {
    const t = this.timeline(channel)
    if (t.loading || !t.hasMore) return 0
    t.loading = true
    this.changed()
    let added = 0
    try {
      // The oldest message on the timeline, not of all held: a search hit is held without
      // being placed (`quiet`) and must not make the next page skip what lies between.
      const all = [...this.msgs.values()].filter((m) => m.channel === channel)
      const oldest = this.oldestOn(channel)
      const flt: Filter = { kinds: [MESSAGE], '#h': [channel], limit: PAGE }
      if (oldest !== Infinity) {
        // Same-second neighbours of the oldest shown event come back again; ask for that many more.
        const same = all.filter((m) => m.ev.created_at === oldest).length
        flt.until = oldest
        flt.limit = Math.min(PAGE + same, 500)
        if (reach !== undefined && reach < oldest) {
          flt.since = reach
          flt.limit = 500
        }
      }
      const page = await this.relay.query([flt])
      for (const e of page) t.pagedTo = Math.min(t.pagedTo, e.created_at)
      const fresh = page.filter((e) => !this.msgs.has(e.id) || this.quiet.has(e.id))
      for (const e of fresh) this.place(e)
      added = fresh.length
      await this.decorate(channel, fresh.map((e) => e.id))
      // A page bounded by `since` says nothing about what is older: keep asking on scroll.
      t.hasMore = flt.since !== undefined ? fresh.length > 0 || page.length >= (flt.limit as number) : page.length >= (flt.limit as number) && fresh.length > 0
      t.loaded = true
    } catch (e) {
      const text = String((e as Error).message)
      if (/^(restricted|auth-required|blocked):/.test(text)) this.refused.set(channel, text)
      else this.say(text)
      t.hasMore = false
    } finally {
      t.loading = false
      this.changed()
    }
    return added
  }

  /** Edits and reactions of freshly loaded messages. */
  private async decorate(channel: string, ids: string[]): Promise<void> {
    if (!ids.length) return
    const found = await this.relay.query([
      { kinds: [EDIT], '#e': ids, '#h': [channel] },
      { kinds: [REACTION], '#e': ids },
    ])
    for (const e of found) this.ingest(e, false)
  }

  async openThread(root: string): Promise<void> {
    this.thread = root
    this.changed()
    const m = this.msgs.get(root)
    const channel = m?.channel ?? this.active
    if (!channel) return
    const found = await this.relay.query([
      { ids: [root] },
      { kinds: [MESSAGE], '#h': [channel], '#e': [root], limit: THREAD_PAGE },
    ])
    const fresh = found.filter((e) => !this.msgs.has(e.id))
    for (const e of fresh) this.ingest(e, false)
    await this.decorate(channel, fresh.map((e) => e.id))
    // A full page may have more before it, unless the channel's own pages reached back past the
    // root: every reply, newer than the root, came with them.
    const r = this.msgs.get(root)
    const held = !!r && this.timeline(r.channel).pagedTo < r.ev.created_at
    this.threadPaging(root).hasMore = !held && found.filter((e) => e.id !== root).length >= THREAD_PAGE
    this.changed()
  }

  /** Whether an open thread has older replies than those shown, and whether a page is on its way. */
  threadPaging(root: string): { hasMore: boolean; loading: boolean } {
    let s = this.threadPages.get(root)
    if (!s) this.threadPages.set(root, (s = { hasMore: false, loading: false }))
    return s
  }

  /** The page of replies before the oldest shown (*Load older replies*). */
  async loadOlderReplies(root: string): Promise<void> {
    const s = this.threadPaging(root)
    const msgs = this.threadMessages(root)
    const oldest = msgs[1]
    if (s.loading || !s.hasMore || !oldest) return
    s.loading = true
    this.changed()
    try {
      // `until` is inclusive: the oldest one's same-second neighbours come back; ask for that many more.
      const same = msgs.filter((m) => m.ev.created_at === oldest.ev.created_at).length
      const limit = THREAD_PAGE + same
      const page = await this.relay.query([{ kinds: [MESSAGE], '#h': [oldest.channel], '#e': [root], until: oldest.ev.created_at, limit }])
      const fresh = page.filter((e) => !this.msgs.has(e.id))
      for (const e of fresh) this.ingest(e, false)
      await this.decorate(oldest.channel, fresh.map((e) => e.id))
      s.hasMore = page.length >= limit && fresh.length > 0
    } finally {
      s.loading = false
      this.changed()
    }
  }

  threadMessages(root: string): Msg[] {
    const r = this.msgs.get(root)
    if (!r) return []
    const replies = [...r.replies].map((id) => this.msgs.get(id)).filter((m): m is Msg => !!m && !m.deleted)
    replies.sort(byTime)
    return [r, ...replies]
  }

  /** Every message of `channel` since `since`, thread replies included, oldest first: a
   * huddle's captions (agents answer a transcript in its thread). */
  allSince(channel: string, since: number): Msg[] {
    const out = [...this.msgs.values()].filter((m) => m.channel === channel && !m.deleted && m.ev.created_at >= since)
    return out.sort(byTime)
  }

  visible(channel: string): Msg[] {
    const t = this.timelines.get(channel)
    if (!t) return []
    return t.ids.map((id) => this.msgs.get(id)).filter((m): m is Msg => !!m && !m.deleted)
  }

  ingest(e: NEvent, live: boolean): void {
    switch (e.kind) {
      case MESSAGE:
        return this.addMessage(e, live)
      case EDIT: {
        this.inbox.edited(e) // the inbox shows the current text of what it lists, loaded here or not
        const target = this.msgs.get(firstTag(e, 'e') ?? '')
        if (target && target.ev.pubkey === e.pubkey && (target.editedAt === null || e.created_at >= target.editedAt)) {
          target.content = e.content
          target.editedAt = e.created_at
          this.changed()
        }
        return
      }
      case REACTION: {
        const id = e.tags.filter((t) => t[0] === 'e').pop()?.[1] ?? ''
        const target = this.msgs.get(id)
        if (!target) return
        const emoji = e.content || '+'
        let by = target.reactions.get(emoji)
        if (!by) target.reactions.set(emoji, (by = new Map()))
        by.set(e.pubkey, e.id)
        this.reactionIndex.set(e.id, { target: id, emoji, pubkey: e.pubkey })
        this.changed()
        return
      }
      case DELETION:
      case MODERATION_DELETE:
        for (const t of e.tags) if (t[0] === 'e') this.removeById(t[1])
        this.changed()
        return
      case HUDDLE_STARTED:
      case HUDDLE_JOINED:
      case HUDDLE_LEFT:
      case HUDDLE_ENDED:
        return this.huddleBook.event(e)
      case TYPING: {
        const ch = firstTag(e, 'h')
        if (!ch || e.pubkey === this.me.pubkey || this.presenceBook.stopped(e)) return
        let m = this.typing.get(ch)
        if (!m) this.typing.set(ch, (m = new Map()))
        m.set(e.pubkey, now() + TYPING_TTL_S)
        this.needProfiles([e.pubkey])
        this.changed()
        window.setTimeout(() => this.changed(), TYPING_TTL_S * 1000 + 100)
        return
      }
      default:
        if (live && INBOX_WORK_KINDS.includes(e.kind)) this.inbox.arrived(e)
    }
  }

  private removeById(id: string): void {
    const m = this.msgs.get(id)
    if (m) m.deleted = true
    const r = this.reactionIndex.get(id)
    if (r) {
      this.reactionIndex.delete(id)
      const by = this.msgs.get(r.target)?.reactions.get(r.emoji)
      by?.delete(r.pubkey)
      if (by && by.size === 0) this.msgs.get(r.target)?.reactions.delete(r.emoji)
    }
  }

  private addMessage(e: NEvent, live: boolean): void {
    if (this.msgs.has(e.id)) return
    const channel = firstTag(e, 'h')
    if (!channel) return
    const { parent, root } = threadLinks(e)
    const m: Msg = {
      ev: e,
      channel,
      content: e.content,
      editedAt: null,
      parent,
      root,
      broadcast: e.tags.some((t) => t[0] === 'broadcast'),
      deleted: false,
      replies: new Set(),
      reactions: new Map(),
      seq: live ? this.newer++ : this.older--,
    }
    this.msgs.set(e.id, m)
    this.needProfiles([e.pubkey])
    for (const other of this.msgs.values()) if (other.root === e.id) m.replies.add(other.ev.id)
    if (root) this.msgs.get(root)?.replies.add(e.id)
    if (!root || m.broadcast) insertSorted(this.timeline(channel), m, this.msgs)
    if (live) {
      this.typing.get(channel)?.delete(e.pubkey)
      this.reads.live(m)
      this.inbox.consider(e)
      if (shouldNotify(this, m)) this.notify(m)
    }
    this.changed()
  }

  private notify(m: Msg): void {
    if (!document.hidden || typeof Notification === 'undefined' || Notification.permission !== 'granted') return
    const ch = this.channels.get(m.channel)
    new Notification(`${this.nameOf(m.ev.pubkey)} in ${ch ? this.channelLabel(ch) : 'a channel'}`, { body: m.content.slice(0, 200), tag: m.ev.id })
  }

  typingIn(channel: string): string[] {
    const m = this.typing.get(channel)
    if (!m) return []
    const t = now()
    return [...m.entries()].filter(([, until]) => until > t).map(([pk]) => this.nameOf(pk))
  }

  /** I stopped `pubkey`'s turn here: its "typing" line ends now, not when it expires (decision 154). */
  stoppedTurn(channel: string, pubkey: string): void {
    if (this.typing.get(channel)?.delete(pubkey)) this.changed()
  }

  /** The box was emptied: others' "typing" line clears at once (decision 223). */
  stoppedTyping(channel: string): void {
    if (!this.lastTyping) return
    this.lastTyping = 0
    void this.presenceBook.stoppedTyping(channel)
  }

  async typed(channel: string): Promise<void> {
    if (Date.now() - this.lastTyping < 3000) return
    this.lastTyping = Date.now()
    try {
      await this.relay.publish({ kind: TYPING, created_at: now(), tags: [['h', channel]], content: '' })
    } catch {
      /* typing is best effort */
    }
  }

  /** Members' display names for `@` mentions: {pubkey: name}. */
  memberNames(channel: string): Map<string, string> {
    const out = new Map<string, string>()
    for (const pk of this.roles.get(channel)?.keys() ?? []) out.set(pk, this.profiles.get(pk)?.name ?? '')
    return out
  }

  /** Sign the message and show it at once; the outbox delivers it (its state shows on it).
   * `files`: uploaded attachments (attach.ts), one URL line each after the text and their imeta tags. */
  async send(channel: string, text: string, picked: string[], replyTo: string | null = null, files: { urls: string[]; tags: Tag[] } | null = null): Promise<NEvent> {
    if (!text.trim() && !files?.urls.length) throw new Error('Type a message first.')
    const content = files?.urls.length ? [...(text.trim() ? [text] : []), ...files.urls].join('\n') : text
    if (new TextEncoder().encode(content).length > MAX_CONTENT_BYTES) throw new Error(`Messages are at most ${MAX_CONTENT_BYTES} bytes.`)
    const tags: Tag[] = [['h', channel]]
    if (replyTo) {
      const parent = this.msgs.get(replyTo)
      const links = parent ? threadLinks(parent.ev) : { parent: null, root: null }
      if (links.parent === null) tags.push(['e', replyTo, '', 'reply'])
      else tags.push(['e', links.root as string, '', 'root'], ['e', replyTo, '', 'reply'])
    }
    const names = this.memberNames(channel)
    const resolved = resolveNames(text, names).resolved
    const mentions = [...new Set([...picked.filter((p) => names.has(p)), ...resolved])]
    for (const p of mentions) tags.push(['p', p])
    if (files) tags.push(...files.tags)
    const ev = await this.me.sign({ kind: MESSAGE, created_at: this.outbox.stamp(), tags, content })
    this.lastTyping = 0 // the next keystroke is a new bout of typing
    this.ingest(ev, true)
    void this.outbox.deliver(ev)
    return ev
  }

  async edit(id: string, text: string): Promise<void> {
    const m = this.msgs.get(id)
    if (!m) return
    const ev = await this.relay.publish({ kind: EDIT, created_at: now(), tags: [['h', m.channel], ['e', id]], content: text })
    this.ingest(ev, true)
  }

  async remove(id: string): Promise<void> {
    const m = this.msgs.get(id)
    if (!m) return
    const own = m.ev.pubkey === this.me.pubkey || this.profiles.get(m.ev.pubkey)?.owner === this.me.pubkey
    const kind = own ? DELETION : MODERATION_DELETE
    const ev = await this.relay.publish({ kind, created_at: now(), tags: [['h', m.channel], ['e', id]], content: '' })
    this.ingest(ev, true)
  }

  async react(id: string, emoji: string): Promise<void> {
    const m = this.msgs.get(id)
    if (!m) return
    const mine = m.reactions.get(emoji)?.get(this.me.pubkey)
    if (mine) {
      const ev = await this.relay.publish({ kind: DELETION, created_at: now(), tags: [['e', mine], ['h', m.channel]], content: '' })
      this.ingest(ev, true)
      return
    }
    // A reaction carries its target's channel (`h`): the relay requires it (decision 174).
    const ev = await this.relay.publish({ kind: REACTION, created_at: now(), tags: [['e', id], ['h', m.channel]], content: emoji })
    this.ingest(ev, true)
  }

  /** Messages matching a parsed search (search-query.ts): its words by NIP-50, its filters
   * as the REQ's authors, channels and times; `in:` wins over "only this channel". */
  async search(q: SearchQuery, channel: string | null): Promise<Msg[]> {
    const flt: Filter = { kinds: [MESSAGE], limit: q.hasFile ? 200 : 50 }
    if (q.text) flt.search = q.text
    const channels = q.in.length ? q.in : channel ? [channel] : []
    if (channels.length) flt['#h'] = channels
    if (q.from.length) flt.authors = q.from
    if (q.since !== undefined) flt.since = q.since
    if (q.until !== undefined) flt.until = q.until
    let found = await this.relay.query([flt])
    if (q.hasFile) found = found.filter((e) => hasFile(e.tags)).slice(0, 50)
    for (const e of found) if (!this.msgs.has(e.id)) this.ingestQuiet(e)
    return found.map((e) => this.msgs.get(e.id)).filter((m): m is Msg => !!m && !m.deleted)
  }

  /** Keep a search hit without putting it on a timeline that has not reached it. */
  private ingestQuiet(e: NEvent): void {
    const channel = firstTag(e, 'h')
    if (!channel) return
    const { parent, root } = threadLinks(e)
    const broadcast = e.tags.some((t) => t[0] === 'broadcast')
    this.msgs.set(e.id, { ev: e, channel, content: e.content, editedAt: null, parent, root, broadcast, deleted: false, replies: new Set(), reactions: new Map(), seq: this.older-- })
    this.quiet.add(e.id)
    this.needProfiles([e.pubkey])
  }

  /** A message from a history page: new, or a search hit held quietly until its page came. */
  private place(e: NEvent): void {
    if (!this.quiet.delete(e.id)) return this.ingest(e, false)
    const m = this.msgs.get(e.id)
    if (m && (!m.root || m.broadcast)) insertSorted(this.timeline(m.channel), m, this.msgs)
  }
}
