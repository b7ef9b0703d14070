// The workspace's data: channels, profiles, messages and huddles as the views see them, the
// event kinds the page reads and writes, and the pure helpers that build them from events.
import { ownerOf } from './nipoa'
import type { NEvent } from './types'

export type Role = 'owner' | 'admin' | 'member' | 'guest' | 'bot'
export type Channel = {
  id: string
  name: string
  about: string
  visibility: 'open' | 'private'
  type: string
  archived: boolean
  ttl: number // seconds; > 0 for an ephemeral huddle channel (huddle.md §8.4), kept out of the sidebar
  member: boolean
  peers: string[] // DM participants
}
export type Profile = { name: string; about: string; picture: string; owner: string | null; event: NEvent }
export type Msg = {
  ev: NEvent
  channel: string
  content: string
  editedAt: number | null
  parent: string | null
  root: string | null
  broadcast: boolean
  deleted: boolean
  replies: Set<string>
  reactions: Map<string, Map<string, string>> // emoji -> pubkey -> reaction event id
  seq: number // arrival order (live events count up, history pages down); not the display order
}
/** A channel's timeline: its top-level messages in order, and how far back its pages went
 * (`pagedTo`: the oldest created_at a page brought, thread replies included; Infinity before). */
export type Timeline = { ids: string[]; hasMore: boolean; loading: boolean; loaded: boolean; pagedTo: number }
/** One huddle as its lifecycle events in the parent tell it (huddle.md §8.5). `room` is the
 * channel whose audio socket it uses: its own ephemeral channel, or the parent itself. */
export type HuddleInfo = { room: string; parent: string; startedBy: string | null; startedAt: number; startId: string; ended: boolean; inside: Set<string> }

export const MESSAGE = 9
export const EDIT = 40003
export const REACTION = 7
export const DELETION = 5
export const MODERATION_DELETE = 9005
export const TYPING = 20002
export const PRESENCE = 20001
export const PAGE = 50
export const MAX_CONTENT_BYTES = 65_536 // agents.md §2.3 item 1, as `buzz messages send`
export const HUDDLE_STARTED = 48100
export const HUDDLE_JOINED = 48101
export const HUDDLE_LEFT = 48102
export const HUDDLE_ENDED = 48103
export const HUDDLE_RULES = 48106
export const HUDDLE_KINDS = [HUDDLE_STARTED, HUDDLE_JOINED, HUDDLE_LEFT, HUDDLE_ENDED]
export const HUDDLE_TTL_S = 3600
export const MAX_HUDDLE_AGENTS = 20
// Two huddles whose 48100s are this close in created_at raced: the loser's people move to the
// winner whenever they learn of it. A rival claiming a time further back (a clock far behind,
// or backdated on purpose) does not move a huddle that is on (decisions 81, 129).
export const HUDDLE_RACE_WINDOW_S = 60
// The same words `buzz huddle start` posts (src/buzz/voice/guidelines.py), so agents get one
// voice-mode rule whichever client started the huddle.
export const VOICE_GUIDELINES =
  'You are in a live voice huddle: your replies in this channel are read aloud to the people in ' +
  'the room, and what they say reaches you as transcripts, which may contain recognition errors. ' +
  'Answer briefly, in one to three plain spoken sentences. No markdown, no lists, no tables, no ' +
  'code blocks, no URLs and no emoji; say numbers, dates and names the way a person would say ' +
  'them. If something needs code or a link, say that you will post it in the channel.'

export function threadLinks(ev: NEvent): { parent: string | null; root: string | null } {
  const marked = (m: string) => ev.tags.find((t) => t[0] === 'e' && t.length >= 4 && t[3] === m && /^[0-9a-f]{64}$/.test(t[1]))?.[1] ?? null
  const parent = marked('reply')
  if (parent === null) return { parent: null, root: null }
  return { parent, root: marked('root') ?? parent }
}

export function profileOf(e: NEvent): Profile {
  let fields: Record<string, unknown> = {}
  try {
    const v = JSON.parse(e.content)
    if (v && typeof v === 'object' && !Array.isArray(v)) fields = v
  } catch {
    /* not JSON */
  }
  const pick = (k: string) => (typeof fields[k] === 'string' ? (fields[k] as string).trim() : '')
  // Pictures only over https (the page's CSP allows https images and nothing else remote).
  const picture = /^https:\/\/[^\s]{1,2000}$/.test(pick('picture')) ? pick('picture') : ''
  return { name: pick('display_name') || pick('name'), about: pick('about'), picture, owner: ownerOf(e), event: e }
}

/** One order for every reader, live and after a reload (decision 221): by created_at, then by
 * id — the relay's own tie rule (relay.md §6.4), which a page of history arrives in anyway. */
export const byTime = (a: Msg, b: Msg) => a.ev.created_at - b.ev.created_at || (a.ev.id < b.ev.id ? -1 : a.ev.id > b.ev.id ? 1 : 0)

export function insertSorted(t: Timeline, m: Msg, msgs: Map<string, Msg>): void {
  let i = t.ids.length
  while (i > 0 && byTime(msgs.get(t.ids[i - 1])!, m) > 0) i--
  t.ids.splice(i, 0, m.ev.id)
}
