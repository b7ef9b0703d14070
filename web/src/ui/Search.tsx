// NIP-50 search over what I may read, in the open channel or everywhere, with the filters of
// search-query.ts (from:, in:, has:file, before:, after:) said back in words above the hits.
import { useEffect, useState } from 'preact/hooks'
import type { Msg, Workspace } from '../workspace'
import { parseSearch, type Lookups } from '../search-query'
import { humanError } from './hooks'
import { attachmentsOf, withoutAttachmentLines } from '../render/attachments'
import { renderMarkdown } from '../render/markdown'
import { excerpt, plainText, searchedWords } from '../render/excerpt'
import { Files } from './Files'
import { renderContext } from './render-context'
import { Panel } from './Panel'

type Props = { ws: Workspace; query: string; onClose: () => void; onJump: (m: Msg) => void }

/** One name, else one name it starts with; never a guess between two. */
function unique(entries: [string, string][], name: string): string | undefined {
  const want = name.toLowerCase()
  const exact = entries.filter(([, n]) => n.toLowerCase() === want)
  if (exact.length === 1) return exact[0][0]
  const starts = entries.filter(([, n]) => n.toLowerCase().startsWith(want))
  return starts.length === 1 ? starts[0][0] : undefined
}

function lookups(ws: Workspace): Lookups {
  return {
    me: ws.me.pubkey,
    person: (name) => unique([...ws.profiles.entries()].map(([pk, p]) => [pk, p.name]), name),
    channel: (name) => unique([...ws.channels.values()].filter((c) => c.type !== 'dm').map((c) => [c.id, c.name]), name),
    nameOf: (pk) => ws.nameOf(pk),
    channelName: (id) => {
      const c = ws.channels.get(id)
      return c ? (c.type === 'dm' ? ws.channelLabel(c) : `#${c.name}`) : 'a channel'
    },
  }
}

export function SearchPanel({ ws, query, onClose, onJump }: Props) {
  const [here, setHere] = useState(!!ws.active)
  const [hits, setHits] = useState<Msg[] | null>(null)
  const [error, setError] = useState('')
  const parsed = parseSearch(query, lookups(ws))
  const empty = !parsed.text && !parsed.described.length
  useEffect(() => {
    if (!query.trim() || parsed.errors.length || empty) return
    setHits(null)
    setError('')
    // An older search answering after a newer one must not overwrite its results.
    let current = true
    ws.search(parsed, here ? ws.active : null).then(
      (found) => current && setHits(found),
      (e) => current && setError(humanError(e)),
    )
    return () => {
      current = false
    }
  }, [query, here, ws.active, parsed.errors.length])

  const problem = parsed.errors.join('. ') || (empty ? 'Type words to search for, or a filter such as from:, in:, has:file, before: or after:.' : '')
  return (
    <Panel name="Search results" onClose={onClose}>
      <label class="check">
        <input type="checkbox" checked={here && !parsed.in.length} disabled={!ws.active || !!parsed.in.length} onChange={(e) => setHere(e.currentTarget.checked)} />
        Only this channel
      </label>
      {parsed.described.length > 0 && <p class="hint filters">{parsed.described.join(' · ')}</p>}
      {problem && <p class="error" role="alert">{problem}</p>}
      {error && <p class="error" role="alert">{error}</p>}
      {!problem && hits === null && !error && <p class="hint">Searching…</p>}
      {!problem && hits && !hits.length && <p class="hint">No messages match “{query}”.</p>}
      <ul class="hits">
        {!problem && hits?.map((m) => {
          const ch = ws.channels.get(m.channel)
          return (
            <li>
              <article class="msg hit">
                <div class="msg-head">
                  <span class="author">{ws.nameOf(m.ev.pubkey)}</span>
                  <span class="where">in {ch ? ws.channelLabel(ch) : 'a channel'}</span>
                </div>
                <Excerpt ws={ws} m={m} words={searchedWords(parsed.text)} />
                <button type="button" class="link" onClick={() => onJump(m)}>Open</button>
              </article>
            </li>
          )
        })}
      </ul>
    </Panel>
  )
}

/** A hit's text around the searched words (render/excerpt.ts), the words marked, then its files. */
function Excerpt({ ws, m, words }: { ws: Workspace; m: Msg; words: string[] }) {
  const files = attachmentsOf(m.ev.tags)
  const text = excerpt(plainText(renderMarkdown(withoutAttachmentLines(m.content, files), renderContext(ws, m))), words)
  const marks = words.map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
  const parts = marks.length ? text.split(new RegExp(`(${marks.join('|')})`, 'gi')) : [text]
  return (
    <div class="body">
      <p class="excerpt">{parts.map((p, i) => (i % 2 ? <mark>{p}</mark> : p))}</p>
      {files.length > 0 && <Files ws={ws} files={files} />}
    </div>
  )
}
