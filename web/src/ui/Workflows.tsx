// The channel's Workflows panel (workflows.md §18 items 1–4): the list with each workflow's
// trigger, state and last run; a YAML editor validated by the relay 500 ms after the last
// keystroke (errors and warnings at their line); the owner's Enabled switch and Run now; and the
// selected workflow's runs, each step with its status, timing and output. Lifecycle events and
// new definitions in the channel refresh what is shown.
import { useEffect, useRef, useState } from 'preact/hooks'
import '../workflows.css'
import {
  parseInputs, problemText, RestError, VALIDATE_DEBOUNCE_MS, workflowsOf, type Problem, type Run, type RunsCursor, type StepTrace, type Workflow,
} from '../workflows'
import type { Channel, Workspace } from '../workspace'
import { humanError } from './hooks'

const OUTPUT_FOLD_BYTES = 2048
const STAMP = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'medium' })
const NEW_YAML = `name: Stand-up reminder
trigger:
  on: schedule
  cron: "0 9 * * MON-FRI"
steps:
  - id: remind
    action: send_message
    text: "Stand-up in 5 minutes!"
`

export const stamp = (s: number): string => STAMP.format(new Date(s * 1000))

function triggerText(w: Workflow): string {
  const on = w.trigger.on
  const next = w.next_fire_at ? `, next ${stamp(w.next_fire_at)}` : ''
  if (on === 'schedule') return `on a schedule${next}`
  if (on === 'webhook') return 'on a webhook call'
  if (on === 'message_posted') return 'when a message is posted'
  if (on === 'reaction_added') return `on a reaction${w.trigger.emoji ? ' ' + w.trigger.emoji : ''}`
  if (on === 'diff_posted') return 'when a diff is posted'
  return on
}

/** A run's or step's status as words (the API's `waiting_approval` is "waiting for approval"). */
const STATUS_WORDS: Record<string, string> = { waiting_approval: 'waiting for approval', waiting: 'waiting' }
const statusText = (status: string): string => STATUS_WORDS[status] ?? status.replace(/_/g, ' ')

function stateText(w: Workflow): string {
  if (w.status !== 'active') return w.status
  if (!w.enabled) return 'disabled'
  return w.effectively_enabled === false ? 'enabled (channel archived)' : 'enabled'
}

type Editing = { id: string | null; yaml: string; revision: string | null }

export function WorkflowsPanel({ ws, channel, onClose }: { ws: Workspace; channel: Channel; onClose: () => void }) {
  const desk = workflowsOf(ws)
  const [list, setList] = useState<Workflow[] | null>(null)
  const [error, setError] = useState('')
  const [editing, setEditing] = useState<Editing | null>(null)
  const [selected, setSelected] = useState<string | null>(null)
  const [runs, setRuns] = useState<Run[]>([])
  const [older, setOlder] = useState<RunsCursor | null>(null)
  const [secret, setSecret] = useState<{ id: string; secret: string } | null>(null)
  const latest = useRef({ selected, reloads: 0 })
  latest.current.selected = selected

  // Reloads overlap (a click and a burst of lifecycle events): only the newest one's answers
  // are shown, so an older, slower answer never replaces a newer state.
  const reload = async () => {
    const n = ++latest.current.reloads
    try {
      const got = await desk.list(channel.id)
      const sel = latest.current.selected
      const page = sel ? await desk.runs(sel) : null
      if (n !== latest.current.reloads) return
      setList(got.workflows)
      if (page) {
        setRuns(page.runs)
        setOlder(page.next)
      }
      setError('')
    } catch (e) {
      if (n === latest.current.reloads) setError(humanError(e))
    }
  }

  useEffect(() => {
    setList(null)
    setSelected(null)
    setRuns([])
    setEditing(null)
    void reload()
    const stop = desk.watch(channel.id)
    let timer = 0
    const off = desk.onRuns((c) => {
      if (c !== channel.id) return
      clearTimeout(timer)
      timer = window.setTimeout(() => void reload(), 150)
    })
    return () => {
      clearTimeout(timer)
      off()
      stop()
    }
  }, [channel.id])

  useEffect(() => {
    setRuns([])
    setOlder(null)
    if (selected) void reload()
  }, [selected])

  const edit = async (w: Workflow) => {
    try {
      const got = await desk.get(w.id)
      setEditing({ id: w.id, yaml: got.yaml ?? '', revision: got.workflow.revision })
    } catch (e) {
      setError(humanError(e))
    }
  }

  const shown = list?.find((w) => w.id === selected) ?? null
  return (
    <section class="panel workflows" aria-label="Workflows">
      <header class="panel-head">
        <h2>Workflows</h2>
        <button type="button" class="quiet" aria-label="Close workflows" onClick={onClose}>✕</button>
      </header>
      <div class="panel-body">
        {error && <p class="error" role="alert">{error}</p>}
        {secret && (
          <div class="wf-secret" role="status">
            <p>Webhook secret (shown once): <code>{secret.secret}</code></p>
            <p class="fine">POST {location.origin}/hooks/{secret.id} with the header X-Webhook-Secret.</p>
            <div class="row">
              <button type="button" class="quiet" onClick={() => void navigator.clipboard?.writeText(secret.secret).catch(() => undefined)}>Copy secret</button>
              <button type="button" class="quiet" onClick={() => setSecret(null)}>Done</button>
            </div>
          </div>
        )}
        {editing ? (
          <Editor
            ws={ws}
            channel={channel.id}
            editing={editing}
            onCancel={() => setEditing(null)}
            onSaved={(id, s) => {
              setEditing(null)
              setSelected(id)
              if (s) setSecret({ id, secret: s })
              void reload()
            }}
          />
        ) : (
          channel.member && <button type="button" onClick={() => setEditing({ id: null, yaml: NEW_YAML, revision: null })}>New workflow</button>
        )}
        {list === null ? (
          <p class="hint">Loading workflows…</p>
        ) : list.length === 0 ? (
          <p class="hint">No workflows in this channel yet.</p>
        ) : (
          <ul class="wf-list" aria-label="Channel workflows">
            {list.map((w) => (
              <Row key={w.id} ws={ws} w={w} selected={w.id === selected} onSelect={() => setSelected(w.id)} onEdit={() => void edit(w)} onError={setError} onChanged={() => void reload()} />
            ))}
          </ul>
        )}
        {shown && (
          <section class="wf-runs" aria-label={`Runs of ${shown.name}`}>
            <h3>Runs of {shown.name}</h3>
            {runs.length === 0 ? <p class="hint">No runs yet.</p> : runs.map((r) => <RunView key={r.id} run={r} />)}
            {older && (
              <button type="button" class="quiet" onClick={() => void desk.runs(shown.id, 20, older).then((page) => {
                setRuns((have) => [...have, ...page.runs.filter((r) => !have.some((h) => h.id === r.id))])
                setOlder(page.next)
              }, (e) => setError(humanError(e)))}>Older runs</button>
            )}
          </section>
        )}
      </div>
    </section>
  )
}

function Row({ ws, w, selected, onSelect, onEdit, onError, onChanged }: {
  ws: Workspace; w: Workflow; selected: boolean; onSelect: () => void; onEdit: () => void; onError: (t: string) => void; onChanged: () => void
}) {
  const desk = workflowsOf(ws)
  const mine = w.owner === ws.me.pubkey
  const [busy, setBusy] = useState(false)
  const [confirming, setConfirming] = useState(false)
  const [asking, setAsking] = useState(false)
  const [inputsText, setInputsText] = useState('')
  const [inputsError, setInputsError] = useState('')
  const run = async (fn: () => Promise<unknown>) => {
    setBusy(true)
    try {
      await fn()
      onError('')
      onChanged()
    } catch (e) {
      onError(humanError(e))
    } finally {
      setBusy(false)
    }
  }
  return (
    <li class={`wf-row ${selected ? 'selected' : ''}`} aria-label={w.name}>
      <div class="wf-head">
        <button type="button" class="link wf-name" aria-pressed={selected} onClick={onSelect}>{w.name}</button>
        <span class={`tag wf-state ${w.enabled ? 'on' : 'off'}`}>{stateText(w)}</span>
      </div>
      <p class="fine">
        {triggerText(w)} · by {ws.nameOf(w.owner)}
        {w.last_run && <> · last run <span class={`wf-status s-${w.last_run.status}`}>{statusText(w.last_run.status)}</span></>}
      </p>
      <div class="wf-actions">
        <span class="wf-switch">
          <button type="button" role="switch" aria-checked={w.enabled} aria-label="Enabled" disabled={!mine || busy}
            title={mine ? '' : 'Only the owner can enable or disable it'}
            onClick={() => void run(() => workflowsOf(ws).setEnabled(w.id, !w.enabled))}>
            <span class="knob" aria-hidden="true" />
          </button>
          <span aria-hidden="true">Enabled</span>
        </span>
        <button type="button" class="quiet" disabled={!mine || busy} onClick={() => void run(async () => { await desk.trigger(w.id); onSelect() })}>Run now</button>
        {mine && <button type="button" class="quiet" aria-expanded={asking} onClick={() => setAsking(!asking)}>Run with inputs</button>}
        {mine && <button type="button" class="quiet" onClick={onEdit}>Edit</button>}
        {mine && !confirming && <button type="button" class="quiet danger" onClick={() => setConfirming(true)}>Delete</button>}
      </div>
      {asking && (
        <form
          class="wf-inputs"
          aria-label={`Inputs for ${w.name}`}
          onSubmit={(e) => {
            e.preventDefault()
            const inputs = parseInputs(inputsText)
            if (typeof inputs === 'string') return setInputsError(inputs)
            setInputsError('')
            void run(async () => {
              await desk.trigger(w.id, inputs)
              setAsking(false)
              onSelect()
            })
          }}
        >
          <label class="fine">
            Inputs (a JSON object; each key is <code>trigger.&lt;key&gt;</code> in the run)
            <textarea aria-label="Run inputs" rows={3} value={inputsText} spellcheck={false} placeholder='{"build": "42"}'
              aria-invalid={inputsError ? 'true' : undefined} onInput={(e) => { setInputsError(''); setInputsText(e.currentTarget.value) }} />
          </label>
          {inputsError && <p class="error" role="alert">{inputsError}</p>}
          <div class="wf-actions">
            <button type="submit" disabled={busy}>Run</button>
            <button type="button" class="quiet" onClick={() => setAsking(false)}>Cancel</button>
          </div>
        </form>
      )}
      {confirming && (
        <div class="wf-actions" role="group" aria-label={`Delete ${w.name}?`}>
          <span class="fine">Delete this workflow? Its runs stop.</span>
          <button type="button" class="danger" disabled={busy} onClick={() => void run(() => desk.remove(w))}>Delete workflow</button>
          <button type="button" class="quiet" onClick={() => setConfirming(false)}>Keep</button>
        </div>
      )}
    </li>
  )
}

function Editor({ ws, channel, editing, onCancel, onSaved }: {
  ws: Workspace; channel: string; editing: Editing; onCancel: () => void; onSaved: (id: string, secret: string | null) => void
}) {
  const desk = workflowsOf(ws)
  const [yaml, setYaml] = useState(editing.yaml)
  const [errors, setErrors] = useState<Problem[]>([])
  const [warnings, setWarnings] = useState<Problem[]>([])
  const [fires, setFires] = useState<number[]>([])
  const [refusal, setRefusal] = useState('')
  const [conflict, setConflict] = useState(false)
  const [saving, setSaving] = useState(false)
  const [revision, setRevision] = useState(editing.revision)
  const asked = useRef(0)

  const check = async (text: string): Promise<boolean> => {
    const n = ++asked.current
    try {
      const v = await desk.validate(text, channel)
      if (n !== asked.current) return v.valid
      setErrors(v.errors)
      setWarnings(v.warnings)
      setFires(v.next_fires)
      return v.valid
    } catch (e) {
      setRefusal(humanError(e))
      return false
    }
  }

  useEffect(() => {
    const t = window.setTimeout(() => void check(yaml), VALIDATE_DEBOUNCE_MS)
    return () => clearTimeout(t)
  }, [yaml])

  const save = async () => {
    setSaving(true)
    setRefusal('')
    setConflict(false)
    try {
      if (!(await check(yaml))) return
      const out = await desk.save(channel, yaml, editing.id, revision)
      onSaved(out.id, out.secret)
    } catch (e) {
      const text = humanError(e)
      setRefusal(text)
      setConflict(text.startsWith('conflict:'))
    } finally {
      setSaving(false)
    }
  }

  const reload = async () => {
    if (!editing.id) return
    try {
      const got = await desk.get(editing.id)
      setYaml(got.yaml ?? '')
      setRevision(got.workflow.revision)
      setConflict(false)
      setRefusal('')
    } catch (e) {
      setRefusal(e instanceof RestError ? e.message : humanError(e))
    }
  }

  const lines = yaml.split('\n').length
  return (
    <form class="wf-editor" onSubmit={(e) => { e.preventDefault(); void save() }}>
      <h3>{editing.id ? 'Edit workflow' : 'New workflow'}</h3>
      <textarea
        aria-label="Workflow YAML"
        aria-invalid={errors.length > 0}
        aria-describedby="wf-problems"
        spellcheck={false}
        wrap="off"
        rows={Math.min(24, Math.max(10, lines + 1))}
        value={yaml}
        onInput={(e) => setYaml(e.currentTarget.value)}
      />
      <ul id="wf-problems" class="wf-problems" aria-label="Validation">
        {errors.map((p, i) => <li key={`e${i}`} class="error">{problemText(p)}</li>)}
        {warnings.map((p, i) => <li key={`w${i}`} class="warning">Warning: {problemText(p)}</li>)}
      </ul>
      {fires.length > 0 && errors.length === 0 && <p class="fine">Next runs: {fires.slice(0, 3).map(stamp).join('; ')}</p>}
      {refusal && (
        <p class="error" role="alert">
          {refusal}
          {conflict && <button type="button" class="quiet" onClick={() => void reload()}>Reload</button>}
        </p>
      )}
      <div class="row">
        <button type="submit" disabled={saving}>Save workflow</button>
        <button type="button" class="quiet" onClick={onCancel}>Cancel</button>
      </div>
    </form>
  )
}

function duration(s: StepTrace | Run): string {
  if (!s.started_at) return ''
  const end = s.completed_at ?? null
  return end === null ? `started ${stamp(s.started_at)}` : `${Math.max(0, end - s.started_at)} s`
}

function Output({ value }: { value: unknown }) {
  const text = JSON.stringify(value, null, 2)
  if (new TextEncoder().encode(text).length <= OUTPUT_FOLD_BYTES) return <pre class="wf-output">{text}</pre>
  return (
    <details>
      <summary>Output ({Math.round(text.length / 1024)} KB)</summary>
      <pre class="wf-output">{text}</pre>
    </details>
  )
}

export function RunView({ run }: { run: Run }) {
  return (
    <article class="wf-run" aria-label={`Run ${stamp(run.created_at)}`}>
      <header>
        <span class={`wf-status s-${run.status}`}>{statusText(run.status)}</span>
        <time dateTime={new Date(run.created_at * 1000).toISOString()}>{stamp(run.created_at)}</time>
        {run.completed_at && run.started_at && <span class="fine">{run.completed_at - run.started_at} s</span>}
      </header>
      {run.error_code && <p class="error">{run.error_code}{run.error_message ? `: ${run.error_message}` : ''}</p>}
      <ol class="wf-steps" aria-label="Steps">
        {run.execution_trace.map((s) => (
          <li key={s.index}>
            <div class="wf-step-head">
              <strong>{s.step_id}</strong>
              <span class="fine">{s.action}</span>
              <span class={`wf-status s-${s.status}`}>{statusText(s.status)}</span>
              <span class="fine">{duration(s)}{s.attempts > 1 ? ` · ${s.attempts} attempts` : ''}</span>
            </div>
            {s.error_code && <p class="error">{s.error_code}{s.error_message ? `: ${s.error_message}` : ''}</p>}
            {s.output !== undefined && <Output value={s.output} />}
          </li>
        ))}
      </ol>
    </article>
  )
}
