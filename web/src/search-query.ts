// Search filters as Slack and Element users type them (issue 29 item 8): `from:`, `in:`,
// `has:file`, `before:` and `after:` beside the words. Pure: names are resolved by the caller's
// lookups, so the parser is the one place the syntax lives. The words go to the relay's NIP-50
// search; the filters become the REQ's `authors`, `#h`, `since` and `until` — what the relay
// already gates and indexes — and `has:file` is checked on the answers (an `imeta` tag).
import * as nip19 from 'nostr-tools/nip19'

export type SearchQuery = {
  text: string
  from: string[] // pubkeys
  in: string[] // channel ids
  hasFile: boolean
  since?: number // unix seconds, inclusive
  until?: number
  /** What the filters say, in words ("from Alice · in #general"); empty without filters. */
  described: string[]
  /** Filters that could not be read: shown instead of searching. */
  errors: string[]
}

export type Lookups = {
  /** A person's pubkey by name (case-insensitive), or undefined. */
  person(name: string): string | undefined
  /** A channel's id by name (without #), or undefined. */
  channel(name: string): string | undefined
  me: string
  nameOf(pubkey: string): string
  channelName(id: string): string
}

const TOKEN = /(\S+?):(?:"([^"]*)"|(\S+))|"([^"]*)"|(\S+)/g
const DAY = /^(\d{4})-(\d{2})-(\d{2})$/

/** Local midnight of a YYYY-MM-DD date (the day as the person reads it), unix seconds. */
function dayStart(text: string): number | undefined {
  const m = DAY.exec(text)
  if (!m) return undefined
  const d = new Date(Number(m[1]), Number(m[2]) - 1, Number(m[3]))
  if (d.getMonth() !== Number(m[2]) - 1) return undefined // 2026-02-31
  return Math.floor(d.getTime() / 1000)
}

function pubkeyOf(value: string, look: Lookups): string | undefined {
  if (value === 'me') return look.me
  if (/^[0-9a-f]{64}$/i.test(value)) return value.toLowerCase()
  if (value.startsWith('npub1')) {
    try {
      const d = nip19.decode(value)
      return d.type === 'npub' ? d.data : undefined
    } catch {
      return undefined
    }
  }
  return look.person(value.replace(/^@/, ''))
}

export function parseSearch(input: string, look: Lookups): SearchQuery {
  const q: SearchQuery = { text: '', from: [], in: [], hasFile: false, described: [], errors: [] }
  const words: string[] = []
  for (const m of input.matchAll(TOKEN)) {
    const [, key, quoted, bare, phrase, word] = m
    if (key === undefined) {
      words.push(phrase !== undefined ? `"${phrase}"` : word)
      continue
    }
    const value = quoted ?? bare
    switch (key.toLowerCase()) {
      case 'from': {
        const pk = pubkeyOf(value, look)
        if (pk) {
          q.from.push(pk)
          q.described.push(`from ${look.nameOf(pk)}`)
        } else q.errors.push(`No person named “${value}”`)
        break
      }
      case 'in': {
        const id = look.channel(value.replace(/^#/, ''))
        if (id) {
          q.in.push(id)
          q.described.push(`in ${look.channelName(id)}`)
        } else q.errors.push(`No channel named “${value}”`)
        break
      }
      case 'has':
        if (value.toLowerCase() === 'file') {
          q.hasFile = true
          q.described.push('with a file')
        } else q.errors.push(`“has:${value}” is not a filter (has:file is)`)
        break
      case 'before':
      case 'after': {
        const start = dayStart(value)
        if (start === undefined) {
          q.errors.push(`“${key}:${value}” needs a date as YYYY-MM-DD`)
        } else if (key.toLowerCase() === 'before') {
          q.until = Math.min(q.until ?? Infinity, start - 1) // the day itself is not before it
          q.described.push(`before ${value}`)
        } else {
          q.since = Math.max(q.since ?? 0, dayStart(nextDay(value))!) // nor after it
          q.described.push(`after ${value}`)
        }
        break
      }
      default:
        words.push(m[0]) // `key:value` that is no filter (a URL, a time): plain words
    }
  }
  q.text = words.join(' ').trim()
  return q
}

function nextDay(text: string): string {
  const m = DAY.exec(text)!
  const d = new Date(Number(m[1]), Number(m[2]) - 1, Number(m[3]) + 1)
  const pad = (n: number) => String(n).padStart(2, '0')
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`
}

/** Does a message carry a file (a NIP-92 `imeta` tag, as attach.ts and `--file` write)? */
export const hasFile = (tags: string[][]): boolean => tags.some((t) => t[0] === 'imeta')
