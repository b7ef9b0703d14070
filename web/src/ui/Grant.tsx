// On an agent's not-admitted notice (its harness refused someone's mention, issue 27 item 3):
// the agent's owner lets that asker in with one click. The asker goes onto the allowlist of the
// owner's 30177 (merged with the head; `owner-only` becomes `allowlist`), which the running
// harness follows without a restart. Nobody else is offered the button.
import { useEffect, useState } from 'preact/hooks'
import { directoryOf } from '../directory'
import type { JobView } from '../jobs'
import type { Msg, Workspace } from '../workspace'
import { humanError } from './hooks'

const NOTICE_TAG = 'buzz:agent-notice'
const ASKER_TAG = 'buzz:asker' // ["buzz:asker", <pubkey>, <the mode that refused them>]
// Where the allowlist lets someone in; in `members` or `nobody` it would not (decision 361).
const GRANTABLE = new Set(['owner-only', 'allowlist'])
const HEX64 = /^[0-9a-f]{64}$/

export type Refused = { agent: string; asker: string; mode: string }

/** The asker a not-admitted notice names, when I own the agent that posted it. */
export function refusedAsker(ws: Workspace, m: Msg): Refused | null {
  if (!m.ev.tags.some((t) => t[0] === NOTICE_TAG && t[1] === 'not-admitted')) return null
  if (ws.profiles.get(m.ev.pubkey)?.owner !== ws.me.pubkey) return null
  const t = m.ev.tags.find((t) => t[0] === ASKER_TAG)
  if (!t || !HEX64.test(t[1] ?? '') || !GRANTABLE.has(t[2] ?? '') || t[1] === ws.me.pubkey) return null
  return { agent: m.ev.pubkey, asker: t[1], mode: t[2] }
}

/** The requester of a job my agent declined (its 43006 `declined`). The harness's mode is not
 * on the card: a head naming none is taken as the harness's default, `owner-only`. */
export function declinedAsker(ws: Workspace, job: JobView): Refused | null {
  if (job.failure?.code !== 'declined' || ws.profiles.get(job.assignee)?.owner !== ws.me.pubkey) return null
  if (!HEX64.test(job.requester) || job.requester === ws.me.pubkey) return null
  return { agent: job.assignee, asker: job.requester, mode: 'owner-only' }
}

export function GrantAccess({ ws, refused }: { ws: Workspace; refused: Refused }) {
  const { agent, asker, mode } = refused
  const dir = directoryOf(ws)
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState('')
  useEffect(() => {
    dir.readPolicy(agent).catch(() => undefined) // only to say "may ask now"; the grant reads the head itself
  }, [agent])
  const who = ws.nameOf(asker)
  const name = ws.nameOf(agent)
  if (dir.lets(agent, asker)) return <p class="msg-stop" role="status">{who} may ask {name} now.</p>
  const known = dir.mode(agent)
  if (known && !GRANTABLE.has(known)) return null // changed since: the allowlist would not let them in
  const grant = () => {
    setBusy(true)
    setError('')
    dir.grant(agent, asker, mode).catch((e: unknown) => setError(humanError(e))).finally(() => setBusy(false))
  }
  return (
    <div class="msg-stop">
      <button type="button" class="quiet" disabled={busy} onClick={grant}>Let {who} ask {name}</button>
      {error && <span class="error" role="alert">{error}</span>}
    </div>
  )
}
