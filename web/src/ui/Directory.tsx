// Directory: people and agents (jobs spec §13.1). Each agent shows its owner, persona, whom it
// answers and its live status; its owner changes whom it answers here ("Answers"), its
// parallelism and its persona, which publishes the owner's 30177 that the running harness
// follows without a restart (a persona: for its new sessions).
import { useEffect, useReducer, useState } from 'preact/hooks'
import { ANSWER_MODES, PARALLELISM_MAX, directoryOf, type Status } from '../directory'
import type { Workspace } from '../workspace'
import '../jobs.css'
import { useUi } from './context'
import { humanError } from './hooks'
import { Panel } from './Panel'

const TICK_MS = 30_000 // a snapshot turns stale with time alone: look again now and then

export function DirectoryPanel({ ws, onClose }: { ws: Workspace; onClose: () => void }) {
  const dir = directoryOf(ws)
  const [error, setError] = useState('')
  const [, tick] = useReducer((n: number) => n + 1, 0)
  useEffect(() => {
    dir.load().catch((e: unknown) => setError(humanError(e)))
    const timer = window.setInterval(() => tick(undefined), TICK_MS)
    return () => {
      window.clearInterval(timer)
      dir.stop()
    }
  }, [ws])
  const everyone = [...dir.people].filter((pk) => ws.profiles.has(pk) || pk === ws.me.pubkey)
  const agents = everyone.filter((pk) => !!dir.ownerOf(pk)).sort((a, b) => ws.nameOf(a).localeCompare(ws.nameOf(b)))
  const people = everyone.filter((pk) => !dir.ownerOf(pk)).sort((a, b) => ws.nameOf(a).localeCompare(ws.nameOf(b)))
  return (
    <Panel name="Directory" onClose={onClose}>
      <div class="directory">
        {!dir.loaded && <p class="hint">Loading the directory…</p>}
        {error && <p class="error" role="alert">{error}</p>}
        <h3>Agents</h3>
        {dir.loaded && !agents.length && <p class="hint">No agents in your channels.</p>}
        <ul class="dir-list" aria-label="Agents">
          {agents.map((pk) => <AgentRow ws={ws} agent={pk} />)}
        </ul>
        <h3>People</h3>
        <ul class="dir-list" aria-label="People">
          {people.map((pk) => (
            <li class="dir-row" aria-label={ws.nameOf(pk)}>
              <header><Who ws={ws} pubkey={pk} /></header>
              <p class="fine">{ws.presenceBook.status(pk)}{ws.presenceBook.statusText(pk) && ` · ${ws.presenceBook.statusText(pk)}`}</p>
            </li>
          ))}
        </ul>
      </div>
    </Panel>
  )
}

function Who({ ws, pubkey }: { ws: Workspace; pubkey: string }) {
  const ui = useUi()
  return (
    <>
      <button type="button" class="author" onClick={() => ui.openProfile(pubkey)}>{ws.nameOf(pubkey)}</button>
      {pubkey === ws.me.pubkey && <span class="tag">you</span>}
    </>
  )
}

/** "working in #eng on “…”, 2 queued", "queued 2", "idle" or "offline". */
export function statusText(ws: Workspace, s: Status): string {
  const where = s.channels.map((c) => `#${ws.channels.get(c.id)?.name ?? c.id.slice(0, 8)}${c.title ? ` on “${c.title}”` : ''}`)
  if (s.state === 'working') return `working in ${where.join(', ')}${s.queued ? `, ${s.queued} queued` : ''}`
  if (s.state === 'idle' && s.queued) return `queued ${s.queued}`
  return s.state
}

function AgentRow({ ws, agent }: { ws: Workspace; agent: string }) {
  const dir = directoryOf(ws)
  const owner = dir.ownerOf(agent) ?? ''
  const mine = owner === ws.me.pubkey
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState('')
  const mode = dir.mode(agent)
  const status = dir.status(agent)
  const change = async (fields: Record<string, unknown> | (() => Promise<void>)) => {
    setBusy(true)
    setError('')
    try {
      await (typeof fields === 'function' ? fields() : dir.setPolicy(agent, fields))
    } catch (e) {
      setError(humanError(e))
    } finally {
      setBusy(false)
    }
  }
  return (
    <li class="dir-row" aria-label={ws.nameOf(agent)}>
      <header>
        <Who ws={ws} pubkey={agent} />
        <span class="tag agent">agent</span>
      </header>
      <dl>
        <dt>Owner</dt>
        <dd>{ws.nameOf(owner)}</dd>
        <dt>Persona</dt>
        <dd>
          {mine ? <PersonaPick ws={ws} agent={agent} busy={busy} onPick={(slug) => void change(() => dir.setPersona(agent, slug))} /> : dir.persona(agent) || 'none'}
        </dd>
        <dt>Answers</dt>
        <dd>
          {mine ? (
            <select aria-label="Answers" disabled={busy} value={mode ?? ''} onChange={(e) => void change({ respond_to: e.currentTarget.value })}>
              {!mode && <option value="" disabled>{dir.answers(agent)} (not set)</option>}
              {mode && !(ANSWER_MODES as readonly string[]).includes(mode) && <option value={mode}>{mode}</option>}
              {ANSWER_MODES.map((m) => <option value={m}>{m}</option>)}
            </select>
          ) : (
            dir.answers(agent)
          )}
          {mine && mode === 'allowlist' && <span class="fine"> {dir.answers(agent).replace('allowlist ', '')}</span>}
        </dd>
        {mine && (
          <>
            <dt>Parallelism</dt>
            <dd>
              <input
                type="number"
                aria-label="Parallelism"
                min={1}
                max={PARALLELISM_MAX}
                disabled={busy}
                value={dir.parallelism(agent) ?? ''}
                placeholder="default"
                onChange={(e) => {
                  const n = Number(e.currentTarget.value)
                  if (Number.isInteger(n) && n >= 1 && n <= PARALLELISM_MAX) void change({ parallelism: n })
                  else setError(`Parallelism is a whole number from 1 to ${PARALLELISM_MAX}.`)
                }}
              />
            </dd>
          </>
        )}
        <dt>Status</dt>
        <dd class={`dir-status ${status.state}`}>{statusText(ws, status)}</dd>
      </dl>
      {mine && mode === 'allowlist' && <Allowlist ws={ws} agent={agent} busy={busy} onChange={(list) => void change({ respond_to_allowlist: list })} />}
      {error && <p class="error" role="alert">{error}</p>}
    </li>
  )
}

/** The owner's pick of the agent's persona among their own (30175). The running harness follows
 * the record live (without `--persona`): its new sessions take the persona. */
function PersonaPick({ ws, agent, busy, onPick }: { ws: Workspace; agent: string; busy: boolean; onPick: (slug: string | null) => void }) {
  const dir = directoryOf(ws)
  const current = dir.personaId(agent)
  const choices = dir.myPersonas()
  return (
    <>
      <select aria-label="Persona" aria-describedby={`persona-hint-${agent}`} disabled={busy} value={current ?? ''} onChange={(e) => onPick(e.currentTarget.value || null)}>
        <option value="">none</option>
        {current && !choices.some((p) => p.slug === current) && <option value={current}>{dir.persona(agent)}</option>}
        {choices.map((p) => <option value={p.slug}>{p.shared ? p.name : `${p.name} (not shared: the agent cannot read it)`}</option>)}
      </select>
      {/* Under the control, not after it: beside "none ▾" it read as one run-on label. */}
      <div class="fine" id={`persona-hint-${agent}`}>New sessions take it; a harness started with --persona keeps that one.</div>
    </>
  )
}

/** Who the agent answers besides its owner, in allowlist mode: the people of the directory. */
function Allowlist({ ws, agent, busy, onChange }: { ws: Workspace; agent: string; busy: boolean; onChange: (list: string[]) => void }) {
  const dir = directoryOf(ws)
  const list = dir.allowlist(agent)
  const people = [...dir.people].filter((pk) => pk !== ws.me.pubkey && pk !== agent && !dir.ownerOf(pk)).sort((a, b) => ws.nameOf(a).localeCompare(ws.nameOf(b)))
  return (
    <fieldset class="dir-allow">
      <legend>Allowlist</legend>
      {!people.length && <p class="hint">Nobody else is in your channels yet.</p>}
      {people.map((pk) => (
        <label>
          <input type="checkbox" disabled={busy} checked={list.includes(pk)} onChange={(e) => onChange(e.currentTarget.checked ? [...list, pk] : list.filter((p) => p !== pk))} />
          {ws.nameOf(pk)}
        </label>
      ))}
    </fieldset>
  )
}
