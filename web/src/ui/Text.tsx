// Message text: always text nodes (never HTML); only http(s) URLs become links, opened
// without an opener or referrer. Very long messages are shown folded until asked.
import { useState } from 'preact/hooks'

const URL_RE = /\bhttps?:\/\/[^\s<>"']{1,2000}/g
const FOLD_CHARS = 4000

export function MessageText({ text }: { text: string }) {
  const [open, setOpen] = useState(false)
  const long = text.length > FOLD_CHARS
  const shown = long && !open ? text.slice(0, FOLD_CHARS) : text
  return (
    <div class="text">
      {linkify(shown)}
      {long && (
        <button type="button" class="link" onClick={() => setOpen(!open)}>
          {open ? 'Show less' : `Show all (${Math.round(text.length / 1000)} k characters)`}
        </button>
      )}
    </div>
  )
}

function linkify(text: string) {
  const out: (string | preact.JSX.Element)[] = []
  let last = 0
  for (const m of text.matchAll(URL_RE)) {
    const i = m.index ?? 0
    if (i > last) out.push(text.slice(last, i))
    out.push(
      <a href={m[0]} target="_blank" rel="noopener noreferrer nofollow">
        {m[0]}
      </a>,
    )
    last = i + m[0].length
  }
  if (last < text.length) out.push(text.slice(last))
  return out
}
