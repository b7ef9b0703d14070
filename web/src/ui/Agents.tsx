// My agents: their channels, last turns (44200, decrypted here) and engram memory — list,
// read, edit core and entries, delete (a tombstone) — encrypted and decrypted in this tab.
import { useEffect, useState } from 'preact/hooks'
import { parseSecret } from '../identity'
import * as engram from '../engram'
import type { Workspace } from '../workspace'
import { act, humanError } from './hooks'
import { Panel } from './Panel'

export function AgentsPanel({ ws, onClose }: { ws: Workspace; onClose: () => void }) {
  const desk = ws.desk
  const [agent, setAgent] = useState<string | null>(null)
  useEffect(() => void act(ws, () => desk.discover()), [])
  useEffect(() => {
    if (agent) void act(ws, () => desk.load(agent))
  }, [agent])
  const agents = [...desk.agents].sort((a, b) => ws.nameOf(a).localeCompare(ws.nameOf(b)))
  return (
    <Panel name="My agents" onClose={onClose}>
      {!desk.loaded && <p class="hint">Looking for your agents…</p>}
      {desk.loaded && !agents.length && <p class="hint">No agent has named you as its owner yet.</p>}
      <div class="agent-tabs" role="group" aria-label="Agents">
        {agents.map((pk) => (
          <button type="button" class={agent === pk ? '' : 'quiet'} aria-pressed={agent === pk} onClick={() => setAgent(pk)}>
            {ws.nameOf(pk)}
          </button>
        ))}
      </div>
      {agent && <AgentView ws={ws} agent={agent} />}
    </Panel>
  )
}

function AgentView({ ws, agent }: { ws: Workspace; agent: string }) {
  const desk = ws.desk
  const [open, setOpen] = useState<string | null>(null)
  const [draft, setDraft] = useState('')
  const [newSlug, setNewSlug] = useState('')
  const [key, setKey] = useState('')
  const [error, setError] = useState('')
  const entries = desk.entries(agent)
  const turns = desk.turns.get(agent) ?? []
  const channels = (desk.channels.get(agent) ?? []).map((id) => ws.channels.get(id)).filter((c) => !!c)

  const edit = (slug: string) => {
    const head = desk.memory.get(agent)?.get(slug)
    setOpen(slug)
    setDraft(head ? engram.textOf(head.body) ?? '' : '')
    setError('')
  }
  const save = async (text: string | null) => {
    if (!open) return
    try {
      await desk.write(agent, open, text)
      if (text === null) setOpen(null)
      setError('')
    } catch (e) {
      setError(humanError(e))
    }
  }

  return (
    <section class="agent" aria-label={`Agent ${ws.nameOf(agent)}`}>
      <h3>Channels</h3>
      <p class="hint">{channels.length ? channels.map((c) => ws.channelLabel(c!)).join(', ') : 'None that you can see.'}</p>
      <h3>Last turns</h3>
      {!turns.length && <p class="hint">No turns reported yet.</p>}
      {turns.length > 0 && (
        <table class="turns">
          <thead><tr><th>When</th><th>Model</th><th>Tokens</th><th>Cost</th><th>Outcome</th></tr></thead>
          <tbody>
            {turns.slice(0, 8).map((t) => {
              const p = t.payload ?? {}
              const turn = (p.turn ?? {}) as Record<string, unknown>
              return (
                <tr>
                  <td>{new Date(t.event.created_at * 1000).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' })}</td>
                  <td>{String(p.model ?? '—')}</td>
                  <td>{turn.totalTokens == null ? '—' : String(turn.totalTokens)}</td>
                  <td>{typeof turn.costUsd === 'number' ? `$${turn.costUsd.toFixed(4)}` : '—'}</td>
                  <td>{t.payload ? String(p.stopReason ?? '') : 'unreadable'}</td>
                </tr>
              )
            })}
          </tbody>
        </table>
      )}
      <h3>Memory</h3>
      <ul class="memory" aria-label="Memory entries">
        {entries.map((h) => (
          <li>
            <button type="button" class={`link ${open === h.body.slug ? 'sel' : ''}`} onClick={() => edit(h.body.slug)}>{h.body.slug}</button>
            <span class="hint">{new Date(h.event.created_at * 1000).toLocaleString()}</span>
          </li>
        ))}
        {!entries.length && <li class="hint">No memory yet.</li>}
      </ul>
      {desk.canWrite(agent) ? (
        <form class="row" onSubmit={(e) => { e.preventDefault(); try { edit(engram.normalizeSlug(newSlug.trim())); setNewSlug('') } catch (err) { setError(humanError(err)) } }}>
          <input type="text" aria-label="New memory slug" placeholder="mem/notes/topic" value={newSlug} onInput={(e) => setNewSlug(e.currentTarget.value)} />
          <button type="submit" class="quiet">Add memory</button>
        </form>
      ) : (
        <form class="row" onSubmit={(e) => { e.preventDefault(); try { desk.useAgentKey(agent, parseSecret(key)); setKey('') } catch (err) { setError(humanError(err)) } }}>
          <label class="grow">
            Agent secret key
            <input type="text" class="secret" autocomplete="off" spellcheck={false} value={key} onInput={(e) => setKey(e.currentTarget.value)} />
          </label>
          <button type="submit" class="quiet">Unlock editing</button>
          <p class="fine">Only the agent can write its memory: its key stays in this tab’s memory.</p>
        </form>
      )}
      {open && (
        <div class="entry">
          <h4>{open}</h4>
          <textarea aria-label="Memory text" value={draft} readOnly={!desk.canWrite(agent)} onInput={(e) => setDraft(e.currentTarget.value)} />
          {desk.canWrite(agent) && (
            <div class="row">
              <button type="button" onClick={() => void save(draft)}>Save memory</button>
              {open !== engram.CORE && <button type="button" class="quiet" onClick={() => void save(null)}>Delete memory</button>}
            </div>
          )}
        </div>
      )}
      {error && <p class="error" role="alert">{error}</p>}
    </section>
  )
}
