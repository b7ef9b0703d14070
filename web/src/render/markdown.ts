// Message text as GitHub-flavoured Markdown (marked), made safe (DOMPurify). Raw HTML in a
// message is never markup: marked's `html` tokens are rendered as escaped text, so `<img
// onerror>` shows as typed. Links keep only http(s) and mailto targets, parsed with the URL
// parser (entity, whitespace and case tricks fall out there) and open in a new tab without an
// opener or referrer; images from anywhere are links, never fetched (media spec §15.5); code
// blocks get a language label, a "Copy code" button, highlighting once the highlighter chunk is
// in, and folding when long. `@Name` of a p-tagged member and `nostr:npub…` become mention
// chips, `#channel` a link to it, `:shortcode:` its emoji. DOMPurify then keeps only the
// elements and attributes this renderer writes: a second wall, not the first.
import DOMPurify from 'dompurify'
import { Marked, type Tokens } from 'marked'
import * as nip19 from 'nostr-tools/nip19'
import { emojiTable, generation, highlighter } from './lazy'

export type RenderContext = {
  me: string
  /** Display name → pubkey of the message's p-tagged people: the `@Name`s that are mentions. */
  mentioned: Map<string, string>
  nameOf(pubkey: string): string
  /** Lower-cased channel name → id, for `#name`. */
  channels: Map<string, string>
  channelName(id: string): string | null
  /** Everything above the output depends on, as a string: part of the cache key. */
  sig: string
}

export const FOLD_LINES = 15 // a code block longer than this shows its first lines and "Show all"
const CACHE_MAX = 1500
const HEX64 = /^[0-9a-f]{64}$/
const CHANNEL_HASH = /^#([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})(?:\/([0-9a-f]{64}))?$/
const REF = /nostr:(?:npub|nprofile)1[02-9ac-hj-np-z]{6,}|:[a-z0-9_+-]{1,40}:|(?<![\p{L}\p{N}_@])@(?=[\p{L}\p{N}_])|(?<![\p{L}\p{N}_#&/])#(?=[\p{L}\p{N}_])/gu
const FENCE = /(^|\n)\s{0,3}(```|~~~)/
const SHORTCODE = /:[a-z0-9_+-]{1,40}:/
const CHANNEL_WORD = /^[\p{L}\p{N}_-]{1,80}/u
const WORD = /^[\p{L}\p{N}_]/u

const ESC: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }
export const esc = (s: string): string => s.replace(/[&<>"']/g, (c) => ESC[c])

let ctx: RenderContext | null = null // the message being rendered (rendering is synchronous)
let inLink = 0 // inside a link's text: no chips or links nested in it

/** An absolute http(s) or mailto URL, normalised by the URL parser; null for anything else. */
export function safeUrl(raw: string, allowMail = true): string | null {
  let u: URL
  try {
    u = new URL(raw.trim())
  } catch {
    return null
  }
  if (u.protocol === 'http:' || u.protocol === 'https:' || (allowMail && u.protocol === 'mailto:')) return u.href
  return null
}

/** `#<channel>` or `#<channel>/<event>` when `url` points into this workspace, else null. */
function workspaceHash(url: string): string | null {
  const u = new URL(url)
  if (u.origin !== location.origin || (u.pathname !== '/' && u.pathname !== location.pathname)) return null
  return CHANNEL_HASH.test(u.hash) ? u.hash : null
}

function chip(pubkey: string, label: string): string {
  const me = ctx?.me === pubkey ? ' me' : ''
  return `<button type="button" class="mention${me}" data-pubkey="${pubkey}">${esc(label)}</button>`
}

function profileKey(bech: string): string | null {
  try {
    const d = nip19.decode(bech)
    if (d.type === 'npub') return d.data
    if (d.type === 'nprofile') return d.data.pubkey
  } catch {
    /* not a key */
  }
  return null
}

/** Plain text with mentions, channel names and emoji shortcodes replaced; the rest escaped. */
function refs(text: string): string {
  const c = ctx
  if (!c || inLink) return esc(text)
  let out = ''
  let last = 0
  for (const m of text.matchAll(REF)) {
    const i = m.index ?? 0
    if (i < last) continue
    const s = m[0]
    let html: string | null = null
    let len = s.length
    if (s.startsWith('nostr:')) {
      const pk = profileKey(s.slice(6))
      if (pk && HEX64.test(pk)) html = chip(pk, '@' + c.nameOf(pk))
    } else if (s[0] === ':') {
      const e = emojiTable()?.emoji(s.slice(1, -1))
      if (e) html = e
    } else if (s === '@') {
      const rest = text.slice(i + 1)
      let best = ''
      for (const name of c.mentioned.keys()) {
        if (name.length > best.length && rest.startsWith(name) && !WORD.test(rest.slice(name.length))) best = name
      }
      if (best) {
        html = chip(c.mentioned.get(best)!, '@' + best)
        len = 1 + best.length
      }
    } else {
      const name = CHANNEL_WORD.exec(text.slice(i + 1))?.[0] ?? ''
      const id = c.channels.get(name.toLowerCase())
      if (id) {
        html = `<a class="channel-link" href="#${id}">#${esc(name)}</a>`
        len = 1 + name.length
      }
    }
    if (html === null) continue
    out += esc(text.slice(last, i)) + html
    last = i + len
  }
  return out + esc(text.slice(last))
}

function codeBlock(text: string, lang: string | undefined): string {
  const language = (lang ?? '').trim().split(/\s/)[0].toLowerCase().slice(0, 32)
  const body = (language && highlighter()?.highlight(text, language)) || esc(text)
  const lines = text.split('\n').length
  const long = lines > FOLD_LINES
  return (
    `<div class="code${long ? ' folded' : ''}"><div class="code-head"><span class="code-lang">${esc(language || 'text')}</span>` +
    `<button type="button" class="copy" aria-label="Copy code">Copy code</button></div>` +
    `<pre><code class="hljs">${body}</code></pre>` +
    (long ? `<button type="button" class="fold" aria-expanded="false" data-lines="${lines}">Show all ${lines} lines</button>` : '') +
    `</div>`
  )
}

const marked = new Marked({
  gfm: true,
  breaks: true, // a chat line break is a line break
  renderer: {
    html({ text, block }: Tokens.HTML | Tokens.Tag): string {
      const shown = esc(text.replace(/\n+$/, ''))
      return block ? `<p>${shown.replace(/\n/g, '<br>')}</p>` : shown
    },
    text(token: Tokens.Text | Tokens.Escape): string | false {
      if (token.type !== 'text' || token.tokens || token.escaped) return false
      return refs(token.text)
    },
    code({ text, lang }: Tokens.Code): string {
      return codeBlock(text, lang)
    },
    heading({ tokens, depth }: Tokens.Heading): string {
      // Below the page's own headings (channel h1, day h2): a message is not a document.
      const level = Math.min(depth + 2, 6)
      return `<h${level} class="md-h">${this.parser.parseInline(tokens)}</h${level}>`
    },
    checkbox({ checked }: Tokens.Checkbox): string {
      return checked ? '☑ ' : '☐ '
    },
    link({ href, title, text, tokens }: Tokens.Link): string {
      inLink++
      let inner: string
      try {
        inner = this.parser.parseInline(tokens)
      } finally {
        inLink--
      }
      const url = inLink ? null : safeUrl(href)
      if (!url) return inner
      const hash = workspaceHash(url)
      if (hash) {
        const [, channel, event] = CHANNEL_HASH.exec(hash)!
        const name = ctx?.channelName(channel)
        const label = text === href && name ? esc(event ? `message in #${name}` : `#${name}`) : inner
        return `<a class="channel-link" href="${hash}">${label}</a>`
      }
      return `<a href="${esc(url)}"${title ? ` title="${esc(title)}"` : ''}>${inner}</a>`
    },
    image({ href, text }: Tokens.Image): string {
      const url = inLink ? null : safeUrl(href, false)
      return url ? `<a class="image-link" href="${esc(url)}">🖼 ${esc(text || url)}</a>` : esc(text)
    },
  },
})

const PURIFY = {
  ALLOWED_TAGS: ['p', 'br', 'strong', 'em', 'del', 'code', 'pre', 'blockquote', 'ul', 'ol', 'li', 'a', 'table', 'thead', 'tbody', 'tr', 'th', 'td', 'hr', 'span', 'div', 'button', 'h3', 'h4', 'h5', 'h6'],
  ALLOWED_ATTR: ['href', 'title', 'class', 'type', 'aria-label', 'aria-expanded', 'data-pubkey', 'data-lines', 'start', 'align'],
  ALLOW_DATA_ATTR: false,
  ALLOW_ARIA_ATTR: false,
  ALLOWED_URI_REGEXP: /^(?:https?:|mailto:|#[0-9a-f-]{36}(?:\/[0-9a-f]{64})?$)/i,
}

DOMPurify.addHook('afterSanitizeAttributes', (node) => {
  if (node.nodeName === 'A' && /^(?:https?|mailto):/i.test(node.getAttribute('href') ?? '')) {
    node.setAttribute('target', '_blank')
    node.setAttribute('rel', 'noopener noreferrer nofollow')
  }
})

const cache = new Map<string, string>()

/** `text` as sanitised HTML for a message body (cached per text, context and loaded chunks). */
export function renderMarkdown(text: string, context: RenderContext): string {
  // Only a text that uses a lazy chunk renders again when one arrives: the rest keep their
  // HTML, so the page does not redo every message when the highlighter comes in.
  const lazy = FENCE.test(text) || SHORTCODE.test(text) ? generation : 0
  const key = `${lazy}\u0001${context.sig}\u0001${text}`
  const hit = cache.get(key)
  if (hit !== undefined) return hit
  ctx = context
  inLink = 0
  let html: string
  try {
    html = DOMPurify.sanitize(marked.parse(text, { async: false }), PURIFY)
  } finally {
    ctx = null
  }
  if (cache.size >= CACHE_MAX) cache.delete(cache.keys().next().value as string)
  cache.set(key, html)
  return html
}

/** Lines a reader scrolls past: a code block counts as at most its folded height. */
export function shownLines(text: string): number {
  let n = 0
  let fence = 0
  for (const line of text.split('\n')) {
    if (/^\s{0,3}(```|~~~)/.test(line)) {
      fence = fence ? 0 : 1
      n++
    } else if (!fence || fence++ <= 12) n++
  }
  return n
}
