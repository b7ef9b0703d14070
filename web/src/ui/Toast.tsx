// A notice (`ws.say`): a line of text with "Dismiss" that also goes away on its own after
// NOTICE_MS. In a channel it sits in the flow above the composer (it covers none of its
// controls); elsewhere it floats at the top of the main column.
import { useEffect } from 'preact/hooks'
import type { Workspace } from '../workspace'

const NOTICE_MS = 8000

export function Toast({ ws, floating }: { ws: Workspace; floating?: boolean }) {
  const text = ws.notice
  useEffect(() => {
    if (!text) return
    const id = window.setTimeout(() => {
      if (ws.notice === text) {
        ws.notice = null
        ws.changed()
      }
    }, NOTICE_MS)
    return () => clearTimeout(id)
  }, [text])
  if (!text) return null
  return (
    <div class={`toast${floating ? ' floating' : ''}`} role="alert">
      <span>{text}</span>
      <button type="button" class="quiet" onClick={() => { ws.notice = null; ws.changed() }}>Dismiss</button>
    </div>
  )
}
