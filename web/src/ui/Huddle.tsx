// The huddle of the open channel: join the live one, or start one (its own ephemeral channel,
// huddle.md §8.4) and join it; leave, mute; the roster with speaking indicators; captions (transcripts and
// agent replies are kind 9 in the huddle's channel) and, optionally, agent replies spoken by
// the browser's own speech synthesis (§10.6: only `bot` members' messages, never 48106).
import { useEffect, useReducer, useRef, useState } from 'preact/hooks'
import { HuddleCall } from '../huddle'
import { now } from '../types'
import { DELETION, EDIT, HUDDLE_RACE_WINDOW_S, MESSAGE, MAX_HUDDLE_AGENTS, type Channel, type Msg, type Workspace } from '../workspace'
import { Panel } from './Panel'

const CAPTIONS = 6

export function HuddlePanel({ ws, channel, onClose }: { ws: Workspace; channel: Channel; onClose: () => void }) {
  const call = useRef<HuddleCall | null>(null)
  const [, bump] = useReducer((n: number) => n + 1, 0)
  const [speak, setSpeak] = useState(false)
  const [starting, setStarting] = useState(false)
  const [error, setError] = useState('')
  const [unticked, setUnticked] = useState<Set<string>>(new Set())
  const joinedAt = useRef(0)
  const spoken = useRef(new Set<string>())
  const roomSub = useRef<(() => void) | null>(null)
  const c = call.current
  const active = !!c && (c.state === 'joined' || c.state === 'connecting')
  const live = ws.liveHuddle(channel.id)
  const agents = [...(ws.roles.get(channel.id)?.entries() ?? [])].filter(([, r]) => r === 'bot').map(([pk]) => pk).sort((a, b) => ws.nameOf(a).localeCompare(ws.nameOf(b)))

  useEffect(() => {
    const timer = window.setInterval(() => bump(0), 250) // speaking indicators decay
    if (!ws.huddles.has(channel.id)) void ws.loadHuddle(channel.id).catch(() => undefined)
    return () => {
      clearInterval(timer)
      roomSub.current?.()
      call.current?.leave()
    }
  }, [])

  // The room's messages from the moment of joining: its own subscription, since the huddle
  // channel is not in the sidebar's; opened once the relay has seated (and so added) me.
  const watchRoom = (room: string) => {
    roomSub.current = ws.relay.subscribe([{ kinds: [MESSAGE, EDIT, DELETION], '#h': [room], since: joinedAt.current }], (e) => ws.ingest(e, true))
    if (room !== channel.id) void ws.loadMembers(room).catch(() => undefined)
  }

  const enter = (room: string, parent: string | null) => {
    roomSub.current?.()
    roomSub.current = null
    const next = new HuddleCall(room, ws.me, parent)
    next.onchange = () => {
      if (next.state === 'joined' && !roomSub.current && call.current === next) watchRoom(room)
      bump(0)
    }
    call.current = next
    joinedAt.current = now()
    setError('')
    void next.join()
    bump(0)
  }

  const start = async () => {
    setStarting(true)
    setError('')
    try {
      const room = await ws.startHuddle(channel.id, agents.filter((a) => !unticked.has(a)).slice(0, MAX_HUDDLE_AGENTS))
      enter(room, channel.id)
    } catch (e) {
      setError((e as Error).message)
    } finally {
      setStarting(false)
    }
  }

  const leave = () => {
    call.current?.leave()
    roomSub.current?.()
    roomSub.current = null
    bump(0)
  }

  // Two people who start at once each get a huddle; startHuddle applies the race rule once,
  // but a rival announced after that look only shows up here (decision 81). While I sit in a
  // started huddle of this channel that is not the winner, I move to the winner, ending mine
  // first when I started it (nobody else picks a losing huddle: liveHuddle is the winner).
  // Only for a rival that started at about the same time as mine (created_at within the race
  // window): a settled huddle is not moved by a rival claiming a much earlier time. Measured on
  // the two 48100s, not on the clock at arrival: under load the winner may reach me long after
  // I started, and must still move me (decision 129).
  const moving = useRef(false)
  useEffect(() => {
    const cur = call.current
    if (!cur || moving.current || cur.parent === null || (cur.state !== 'joined' && cur.state !== 'connecting')) return
    const won = ws.winningHuddle(channel.id)
    const here = ws.huddles.get(channel.id)?.get(cur.channel)
    if (!won || won.room === cur.channel || !here?.startedBy || here.startedAt - won.startedAt > HUDDLE_RACE_WINDOW_S) return
    moving.current = true
    leave()
    void (async () => {
      if (here.startedBy === ws.me.pubkey) await ws.endHuddle(cur.channel, channel.id)
      moving.current = false
      enter(won.room, channel.id)
    })()
  })

  const room = c?.channel ?? null
  const isAgent = (pk: string) => (room !== null && ws.roleOf(room, pk) === 'bot') || ws.roleOf(channel.id, pk) === 'bot' || !!ws.profiles.get(pk)?.owner
  const captions: Msg[] = room && c && c.state !== 'failed'
    ? ws.allSince(room, joinedAt.current).filter((m) => m.ev.pubkey !== ws.me.pubkey).slice(-CAPTIONS)
    : []
  useEffect(() => {
    if (!speak || typeof speechSynthesis === 'undefined') return
    for (const m of captions) {
      if (isAgent(m.ev.pubkey) && !spoken.current.has(m.ev.id)) {
        spoken.current.add(m.ev.id)
        speechSynthesis.speak(new SpeechSynthesisUtterance(m.content.replace(/\s+/g, ' ').trim().slice(0, 500)))
      }
    }
  })
  const toggleSpeak = (on: boolean) => {
    // Turning it on speaks what comes next, not the replies already on screen.
    if (on) for (const m of captions) spoken.current.add(m.ev.id)
    else if (typeof speechSynthesis !== 'undefined') speechSynthesis.cancel()
    setSpeak(on)
  }

  const t = Date.now()
  const others = live ? [...live.inside].map((pk) => ws.nameOf(pk)) : []
  return (
    <Panel name="Huddle" title={`Huddle in #${channel.name}`} onClose={onClose}>
      <div class="huddle-actions">
        {active ? (
          <>
            <button type="button" onClick={leave}>Leave huddle</button>
            <button type="button" class="quiet" aria-pressed={c.muted} onClick={() => c.setMuted(!c.muted)}>Mute</button>
          </>
        ) : (
          // One button whether a huddle is on or not (the accessible name): it joins
          // the live one, or starts one and joins it.
          <button type="button" disabled={starting} onClick={() => (live ? enter(live.room, live.room === channel.id ? null : channel.id) : void start())}>Join huddle</button>
        )}
        <label class="check"><input type="checkbox" checked={speak} onChange={(e) => toggleSpeak(e.currentTarget.checked)} />Speak agent replies</label>
      </div>
      {!active && live && (
        <p class="hint">
          {live.startedBy ? `${ws.nameOf(live.startedBy)} started a huddle here.` : 'A huddle is on in this channel.'}
          {others.length ? ` In it now: ${others.join(', ')}.` : ''}
        </p>
      )}
      {!active && !live && (
        <p class="hint">{starting ? 'Starting the huddle…' : `No huddle is on here: joining starts one in its own channel${agents.length ? ', with the agents ticked below' : ''}.`}</p>
      )}
      {!active && !live && agents.length > 0 && (
        <fieldset class="invite">
          <legend>Agents to invite</legend>
          {agents.map((pk) => (
            <label class="check">
              <input
                type="checkbox"
                checked={!unticked.has(pk)}
                onChange={(e) => {
                  const next = new Set(unticked)
                  if (e.currentTarget.checked) next.delete(pk)
                  else next.add(pk)
                  setUnticked(next)
                }}
              />
              {ws.nameOf(pk)}
            </label>
          ))}
        </fieldset>
      )}
      {error && <p class="error" role="alert">{error}</p>}
      {c?.state === 'connecting' && <p class="hint">Joining…</p>}
      {c?.state === 'failed' && <p class="error" role="alert">{c.error}</p>}
      {c && c.state === 'joined' && (
        <ul class="roster" aria-label="In the huddle">
          {[...c.peers.values()].sort((a, b) => a.index - b.index).map((p) => {
            const me = p.index === c.self
            const speaking = me ? c.speakingSelf : p.speakingUntil > t
            return (
              <li class={speaking ? 'speaking' : ''} data-decoded={me ? undefined : p.decoded} data-peer={p.index}>
                <span class="dot" aria-hidden="true" />
                <span class="name">{ws.nameOf(p.pubkey)}{me ? ' (you)' : ''}</span>
                {isAgent(p.pubkey) && <span class="tag agent">agent</span>}
                {speaking && <span class="tag">speaking</span>}
                {me && c.muted && <span class="tag">muted</span>}
              </li>
            )
          })}
        </ul>
      )}
      {c?.state === 'joined' && (
        <p class="fine playback" data-sent={c.sent} data-room={c.channel} data-live={live?.room ?? ""}>
          <label class="check">
            Playback
            <meter aria-label="Playback level" min={-60} max={0} low={-45} value={Math.max(-60, c.playbackDbov)} data-dbov={c.playbackDbov} data-peak-dbov={c.playbackPeakDbov} />
          </label>
          <span>Sending {c.muted ? 'silence' : 'your microphone'} as Opus.</span>
        </p>
      )}
      <section class="captions" aria-label="Captions" aria-live="polite">
        {captions.map((m) => (
          <p class={isAgent(m.ev.pubkey) ? 'from-agent' : ''}><strong>{ws.nameOf(m.ev.pubkey)}:</strong> {m.content.slice(0, 400)}</p>
        ))}
      </section>
      <p class="fine">
        Agents do not hear browser speech: this page does not transcribe your microphone (no speech
        recognizer ships with it), so type to them in the channel. People hear you; CLI clients
        transcribe their own speech.
      </p>
    </Panel>
  )
}
