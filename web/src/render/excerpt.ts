// A search hit's preview: the message rendered (render/markdown.ts) and read back as plain text
// — table cells and list items apart, code kept, buttons and code labels dropped — cut to a window around the
// first searched word, so a table or a long code block never shows half drawn.

const BLOCKS = 'p, li, tr, h1, h2, h3, h4, h5, h6, pre, blockquote, hr, br'

/** The text of the rendered `html`, one space between blocks and between table cells. */
export function plainText(html: string): string {
  const doc = new DOMParser().parseFromString(`<div>${html}</div>`, 'text/html')
  const root = doc.body
  // A code block's head (its language label, "Copy code") is chrome, not text: kept, it glued
  // "python" to the code's first word.
  root.querySelectorAll('button:not(.mention), .code-head, script, style').forEach((el) => el.remove())
  root.querySelectorAll('td, th').forEach((el) => el.nextElementSibling && el.append(' · '))
  root.querySelectorAll(BLOCKS).forEach((el) => el.append('\n'))
  return (root.textContent ?? '').replace(/\s+/g, ' ').trim()
}

/** `text` cut to about `max` characters around the first of `words` found (case-insensitive),
 * with … where it was cut; the start when none is found. */
export function excerpt(text: string, words: string[], max = 220): string {
  if (text.length <= max) return text
  const lower = text.toLowerCase()
  const found = words.map((w) => lower.indexOf(w.toLowerCase())).filter((i) => i >= 0)
  const at = found.length ? Math.min(...found) : 0
  let start = Math.max(0, at - Math.floor(max / 3))
  if (start > 0) start = text.lastIndexOf(' ', start) + 1
  const end = Math.min(text.length, start + max)
  return `${start > 0 ? '…' : ''}${text.slice(start, end).trim()}${end < text.length ? '…' : ''}`
}

/** The searched words of a query text: quoted phrases whole, `key:value` words as typed. */
export function searchedWords(query: string): string[] {
  return [...query.matchAll(/"([^"]+)"|(\S+)/g)].map((m) => m[1] ?? m[2]).filter((w) => w.length > 1)
}
