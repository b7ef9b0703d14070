// NIP-50 search over what I may read, in the open channel or everywhere.
import { useEffect, useState } from 'preact/hooks'
import type { Msg, Workspace } from '../workspace'
import { humanError } from './hooks'
import { MessageBody } from './MessageBody'
import { Panel } from './Panel'

type Props = { ws: Workspace; query: string; onClose: () => void; onJump: (m: Msg) => void }

export function SearchPanel({ ws, query, onClose, onJump }: Props) {
  const [here, setHere] = useState(!!ws.active)
  const [hits, setHits] = useState<Msg[] | null>(null)
  const [error, setError] = useState('')
  useEffect(() => {
    if (!query.trim()) return
    setHits(null)
    setError('')
    // An older search answering after a newer one must not overwrite its results.
    let current = true
    ws.search(query.trim(), here ? ws.active : null).then(
      (found) => current && setHits(found),
      (e) => current && setError(humanError(e)),
    )
    return () => {
      current = false
    }
  }, [query, here, ws.active])

  return (
    <Panel name="Search results" onClose={onClose}>
      <label class="check">
        <input type="checkbox" checked={here} disabled={!ws.active} onChange={(e) => setHere(e.currentTarget.checked)} />
        Only this channel
      </label>
      {error && <p class="error" role="alert">{error}</p>}
      {hits === null && !error && <p class="hint">Searching…</p>}
      {hits && !hits.length && <p class="hint">No messages match “{query}”.</p>}
      <ul class="hits">
        {hits?.map((m) => {
          const ch = ws.channels.get(m.channel)
          return (
            <li>
              <article class="msg hit">
                <div class="msg-head">
                  <span class="author">{ws.nameOf(m.ev.pubkey)}</span>
                  <span class="where">in {ch ? ws.channelLabel(ch) : 'a channel'}</span>
                </div>
                <MessageBody ws={ws} m={m} compact />
                <button type="button" class="link" onClick={() => onJump(m)}>Open</button>
              </article>
            </li>
          )
        })}
      </ul>
    </Panel>
  )
}
