// The huddle of the open channel: join/leave, mute, the roster with speaking indicators,
// captions (transcripts and agent replies are kind 9 in the channel) and, optionally, agent
// replies spoken by the browser's own speech synthesis.
import { useEffect, useReducer, useRef, useState } from 'preact/hooks'
import { HuddleCall } from '../huddle'
import type { Channel, Workspace } from '../workspace'
import { Panel } from './Panel'

export function HuddlePanel({ ws, channel, onClose }: { ws: Workspace; channel: Channel; onClose: () => void }) {
  const call = useRef<HuddleCall | null>(null)
  const [, bump] = useReducer((n: number) => n + 1, 0)
  const [speak, setSpeak] = useState(false)
  const joinedAt = useRef(0)
  const spoken = useRef(new Set<string>())
  const c = call.current
  const active = c && (c.state === 'joined' || c.state === 'connecting')

  useEffect(() => {
    const timer = window.setInterval(() => bump(0), 250) // speaking indicators decay
    return () => {
      clearInterval(timer)
      call.current?.leave()
    }
  }, [])

  const join = () => {
    const next = new HuddleCall(channel.id, ws.me)
    next.onchange = () => bump(0)
    call.current = next
    joinedAt.current = Math.floor(Date.now() / 1000)
    void next.join()
    bump(0)
  }

  // Captions: the channel's messages since joining, newest last.
  const captions = active || c?.state === 'left'
    ? ws.visible(channel.id).filter((m) => m.ev.created_at >= joinedAt.current && m.ev.pubkey !== ws.me.pubkey).slice(-4)
    : []
  useEffect(() => {
    if (!speak || typeof speechSynthesis === 'undefined') return
    for (const m of captions) {
      const agent = ws.roleOf(channel.id, m.ev.pubkey) === 'bot' || !!ws.profiles.get(m.ev.pubkey)?.owner
      if (agent && !spoken.current.has(m.ev.id)) {
        spoken.current.add(m.ev.id)
        speechSynthesis.speak(new SpeechSynthesisUtterance(m.content.slice(0, 500)))
      }
    }
  })

  const now = Date.now()
  return (
    <Panel name="Huddle" title={`Huddle in #${channel.name}`} onClose={onClose}>
      <div class="huddle-actions">
        {!active ? (
          <button type="button" onClick={join}>Join huddle</button>
        ) : (
          <>
            <button type="button" onClick={() => { c.leave(); bump(0) }}>Leave huddle</button>
            <button type="button" class="quiet" aria-pressed={c.muted} onClick={() => c.setMuted(!c.muted)}>Mute</button>
          </>
        )}
        <label class="check"><input type="checkbox" checked={speak} onChange={(e) => setSpeak(e.currentTarget.checked)} />Speak agent replies</label>
      </div>
      {c?.state === 'connecting' && <p class="hint">Joining…</p>}
      {c?.state === 'failed' && <p class="error" role="alert">{c.error}</p>}
      {c && c.state === 'joined' && (
        <ul class="roster" aria-label="In the huddle">
          {[...c.peers.values()].sort((a, b) => a.index - b.index).map((p) => {
            const me = p.index === c.self
            const speaking = me ? c.speakingSelf : p.speakingUntil > now
            return (
              <li class={speaking ? 'speaking' : ''} data-decoded={me ? undefined : p.decoded} data-peer={p.index}>
                <span class="dot" aria-hidden="true" />
                <span class="name">{ws.nameOf(p.pubkey)}{me ? ' (you)' : ''}</span>
                {speaking && <span class="tag">speaking</span>}
                {me && c.muted && <span class="tag">muted</span>}
              </li>
            )
          })}
        </ul>
      )}
      {c?.state === 'joined' && <p class="fine" data-sent={c.sent}>Sending {c.muted ? 'silence' : 'your microphone'} as Opus.</p>}
      <section class="captions" aria-label="Captions" aria-live="polite">
        {captions.map((m) => <p><strong>{ws.nameOf(m.ev.pubkey)}:</strong> {m.content.slice(0, 400)}</p>)}
      </section>
      <p class="fine">
        Agents do not hear browser speech: this page does not transcribe your microphone (no speech
        recognizer ships with it), so type to them in the channel. People hear you; CLI clients
        transcribe their own speech.
      </p>
    </Panel>
  )
}
