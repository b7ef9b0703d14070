// A message's body: its Markdown (render/markdown.ts, sanitised HTML) and then its files
// (imeta, render/attachments.ts, drawn by Files.tsx). Long bodies show their first lines and
// *Show more*; a huge one renders only its first 4,000 characters until *Show all*. The buttons inside the HTML
// (Copy code, code folding, mention chips, channel links) are handled here by delegation.
import { useState } from 'preact/hooks'
import { attachmentsOf, withoutAttachmentLines } from '../render/attachments'
import { renderMarkdown, shownLines } from '../render/markdown'
import type { Msg, Workspace } from '../workspace'
import { useUi, type Ui } from './context'
import { Files } from './Files'
import { renderContext } from './render-context'

const FOLD_CHARS = 4000 // rendered at most until asked
const LONG_LINES = 16
const LONG_CHARS = 1500

export function MessageBody({ ws, m, compact = false }: { ws: Workspace; m: Msg; compact?: boolean }) {
  const [open, setOpen] = useState(false)
  const ui = useUi()
  const files = attachmentsOf(m.ev.tags)
  const text = withoutAttachmentLines(m.content, files)
  const huge = text.length > FOLD_CHARS
  const long = huge || shownLines(text) > LONG_LINES || text.length > LONG_CHARS
  const html = renderMarkdown(huge && !open ? text.slice(0, FOLD_CHARS) : text, renderContext(ws, m))
  return (
    <div class={`body ${long && !open ? 'clamped' : ''} ${compact ? 'compact' : ''}`}>
      <div class="text" onClick={(e) => onBodyClick(e, ui)} dangerouslySetInnerHTML={{ __html: html }} />
      {files.length > 0 && <Files ws={ws} files={files} />}
      {long && (
        <button type="button" class="link more" aria-expanded={open} onClick={() => setOpen(!open)}>
          {open ? 'Show less' : huge ? `Show all (${Math.round(text.length / 1000)} k characters)` : 'Show more'}
        </button>
      )}
    </div>
  )
}

function onBodyClick(e: MouseEvent, ui: Ui): void {
  const target = e.target as HTMLElement | null
  const el = target?.closest('button, a') as HTMLElement | null
  if (!el) return
  if (el.matches('a.channel-link')) {
    e.preventDefault()
    ui.go(el.getAttribute('href') ?? '')
  } else if (el.matches('button.mention')) {
    ui.openProfile(el.dataset.pubkey ?? '')
  } else if (el.matches('button.copy')) {
    const code = el.closest('.code')?.querySelector('pre')?.textContent ?? ''
    void copyText(code).then((ok) => {
      el.classList.toggle('done', ok)
      el.textContent = ok ? 'Copied' : 'Copy failed'
      window.setTimeout(() => {
        el.classList.remove('done')
        el.textContent = 'Copy code'
      }, 1500)
    })
  } else if (el.matches('button.fold')) {
    const block = el.closest('.code')
    const folded = !!block?.classList.toggle('folded')
    el.setAttribute('aria-expanded', String(!folded))
    el.textContent = folded ? `Show all ${el.dataset.lines} lines` : 'Show fewer lines'
  }
}

/** Put `text` on the clipboard: the Clipboard API where the page is a secure context, else
 * the older selection copy (a relay reached over plain http on a LAN address). */
export async function copyText(text: string): Promise<boolean> {
  try {
    if (navigator.clipboard && window.isSecureContext) {
      await navigator.clipboard.writeText(text)
      return true
    }
  } catch {
    /* fall back below */
  }
  const area = document.createElement('textarea')
  area.value = text
  area.setAttribute('readonly', '')
  area.className = 'offscreen'
  document.body.appendChild(area)
  area.select()
  try {
    return document.execCommand('copy')
  } catch {
    return false
  } finally {
    area.remove()
  }
}
