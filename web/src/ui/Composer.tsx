// Message box with `@` autocomplete over the channel's members: picking one writes `@Name` and
// remembers the pubkey, which becomes a `p` tag when sent (typed names resolve the same way
// as `buzz messages send`). Enter sends, Shift+Enter breaks the line. Files come through
// *Attach file*, a drop on the channel (or thread) or a paste (AttachTray.tsx, attach.ts).
// The text is the draft of this channel or thread (drafts.ts); sending empties the box at
// once, the message's progress shows on it (outbox.ts), so what is typed meanwhile stays.
import { useLayoutEffect, useRef, useState } from 'preact/hooks'
import { draftKey, useDraft } from '../drafts'
import { editLast } from './Comfort'
import { mentionQuery } from '../mentions'
import { AttachButton, AttachTray, useAttachments } from './AttachTray'
import type { Workspace } from '../workspace'
import { humanError } from './hooks'
import { jobsOf } from '../jobs'
import { AskAgentDialog } from './JobCard'

type Props = { ws: Workspace; channel: string; label: string; button: string; placeholder: string; replyTo?: string }

export function Composer({ ws, channel, label, button, placeholder, replyTo }: Props) {
  const [text, setText] = useDraft(draftKey(ws.me.pubkey, channel, replyTo))
  const [picked, setPicked] = useState<string[]>([])
  const [caret, setCaret] = useState(0)
  const [index, setIndex] = useState(0)
  const [error, setError] = useState('')
  const area = useRef<HTMLTextAreaElement>(null)
  // Where the caret goes once the picked name is in the box. Set in the render that puts it
  // there, before the next key is handled: a frame later (requestAnimationFrame) it moved the
  // caret back into text typed meanwhile ("@Bob  you there?are" under load).
  const caretTo = useRef<number | null>(null)
  useLayoutEffect(() => {
    const pos = caretTo.current
    caretTo.current = null
    if (pos !== null && area.current) area.current.setSelectionRange(pos, pos)
  })
  const form = useRef<HTMLFormElement>(null)
  const files = useAttachments(ws, form, setError)
  const [asking, setAsking] = useState(false)
  const hasAgents = jobsOf(ws).agentsIn(channel).length > 0

  const q = mentionQuery(text, caret)
  const options = q
    ? [...ws.memberNames(channel).entries()]
        .map(([pk, name]) => ({ pk, name: name || ws.nameOf(pk) }))
        .filter((o) => o.name.toLowerCase().startsWith(q.query.toLowerCase()))
        .slice(0, 8)
    : []
  const listId = `mentions-${replyTo ?? channel}`

  const pick = (o: { pk: string; name: string }) => {
    if (!q) return
    const next = text.slice(0, q.start) + '@' + o.name + ' ' + text.slice(caret)
    const pos = q.start + o.name.length + 2
    setText(next)
    setPicked([...new Set([...picked, o.pk])])
    setCaret(pos)
    setIndex(0)
    caretTo.current = pos
  }

  const send = async () => {
    if (!text.trim() && !files.items.length) return
    if (files.busy()) return setError('Wait for the files to finish uploading.')
    if (files.failed()) return setError('Remove the files that could not be uploaded first.')
    const [body, who, attached] = [text, picked, files.ready()]
    setText('')
    setPicked([])
    setCaret(0)
    setError('')
    try {
      await ws.send(channel, body, who, replyTo ?? null, attached)
      files.clear()
    } catch (e) {
      // Refused before it left (too long, not signed): the text comes back unless more was typed.
      if (!area.current?.value) setText(body)
      setError(humanError(e))
    } finally {
      area.current?.focus()
    }
  }

  const onKey = (e: KeyboardEvent) => {
    if (options.length) {
      if (e.key === 'ArrowDown' || e.key === 'ArrowUp') {
        e.preventDefault()
        setIndex((index + (e.key === 'ArrowDown' ? 1 : options.length - 1)) % options.length)
        return
      }
      if (e.key === 'Enter' || e.key === 'Tab') {
        e.preventDefault()
        pick(options[Math.min(index, options.length - 1)])
        return
      }
      if (e.key === 'Escape') {
        setCaret(-1)
        return
      }
    }
    if (e.key === 'ArrowUp' && !text && editLast(ws, channel, replyTo)) {
      e.preventDefault()
      return
    }
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault()
      void send()
    }
  }

  return (
    <>
    <form class="composer" ref={form} onSubmit={(e) => { e.preventDefault(); void send() }}>
      {options.length > 0 && (
        <ul class="mentions" role="listbox" id={listId} aria-label="Mention a member">
          {options.map((o, i) => (
            <li role="option" aria-selected={i === index} class={i === index ? 'sel' : ''} onMouseDown={(e) => { e.preventDefault(); pick(o) }}>
              @{o.name}
            </li>
          ))}
        </ul>
      )}
      <textarea
        ref={area}
        aria-label={label}
        aria-controls={options.length ? listId : undefined}
        aria-autocomplete="list"
        rows={1}
        placeholder={placeholder}
        value={text}
        onInput={(e) => {
          setText(e.currentTarget.value)
          setCaret(e.currentTarget.selectionStart ?? 0)
          setIndex(0)
          void (e.currentTarget.value ? ws.typed(channel) : ws.stoppedTyping(channel))
        }}
        onKeyDown={onKey}
        onClick={(e) => setCaret(e.currentTarget.selectionStart ?? 0)}
        onPaste={(e) => {
          const pasted = [...(e.clipboardData?.files ?? [])]
          if (!pasted.length) return
          e.preventDefault()
          setError(files.add(pasted, true))
        }}
      />
      <AttachButton files={files} onError={setError} />
      {hasAgents && <button type="button" class="quiet" onClick={() => setAsking(true)}>Ask agent</button>}
      <button type="submit">{button}</button>
      <AttachTray files={files} />
      {error && <p class="error" role="alert">{error}</p>}
    </form>
    {asking && <AskAgentDialog ws={ws} channel={channel} source={null} onClose={() => setAsking(false)} />}
    </>
  )
}
