// The composer's files (attach.ts): the *Attach file* button, the drop zone (the channel or
// thread panel around the composer) and the tray of chips. A chip being uploaded shows a
// progress bar named after its file and *Cancel upload*; a finished one its size and a remove
// button; a refused one the relay's reason.
import type { RefObject } from 'preact'
import { useEffect, useMemo, useReducer, useRef } from 'preact/hooks'
import { Attachments, mediaOf } from '../attach'
import type { Workspace } from '../workspace'
import { formatSize } from '../render/files'

export function useAttachments(ws: Workspace, form: RefObject<HTMLFormElement>, onError: (text: string) => void): Attachments {
  const [, bump] = useReducer((n: number) => n + 1, 0)
  const redraw = () => bump(undefined)
  const files = useMemo(() => new Attachments(mediaOf(ws), redraw), [ws])
  useEffect(() => () => files.items.forEach((i) => i.controller.abort()), [files])
  // Files dropped anywhere on the channel (or the thread panel) come to this composer.
  useEffect(() => {
    const zone = form.current?.closest<HTMLElement>('section.conversation, aside.panel') ?? form.current
    if (!zone) return
    const carriesFiles = (e: DragEvent) => !!e.dataTransfer && [...e.dataTransfer.types].includes('Files')
    const over = (e: DragEvent) => {
      if (!carriesFiles(e)) return
      e.preventDefault()
      e.stopPropagation() // the thread panel's drop is not the channel's
      if (e.dataTransfer) e.dataTransfer.dropEffect = 'copy'
      zone.classList.add('dropping')
    }
    const leave = (e: DragEvent) => {
      if (!zone.contains(e.relatedTarget as Node | null)) zone.classList.remove('dropping')
    }
    const drop = (e: DragEvent) => {
      zone.classList.remove('dropping')
      if (!carriesFiles(e)) return
      e.preventDefault()
      e.stopPropagation()
      onError(files.add([...(e.dataTransfer?.files ?? [])]))
    }
    zone.addEventListener('dragover', over)
    zone.addEventListener('dragenter', over)
    zone.addEventListener('dragleave', leave)
    zone.addEventListener('drop', drop)
    return () => {
      zone.removeEventListener('dragover', over)
      zone.removeEventListener('dragenter', over)
      zone.removeEventListener('dragleave', leave)
      zone.removeEventListener('drop', drop)
    }
  }, [files])
  return files
}

export function AttachButton({ files, onError }: { files: Attachments; onError: (text: string) => void }) {
  const input = useRef<HTMLInputElement>(null)
  return (
    <>
      <button type="button" class="quiet attach" aria-label="Attach file" title="Attach file" onClick={() => input.current?.click()}>
        <span aria-hidden="true">📎</span>
      </button>
      <input
        ref={input}
        type="file"
        multiple
        hidden
        tabIndex={-1}
        onChange={(e) => {
          const picked = [...(e.currentTarget.files ?? [])]
          e.currentTarget.value = '' // the same file may be picked again
          onError(files.add(picked))
        }}
      />
    </>
  )
}

export function AttachTray({ files }: { files: Attachments }) {
  if (!files.items.length) return null
  return (
    <ul class="att-tray" aria-label="Attached files">
      {files.items.map((p) => (
        <li key={p.key} class={`att-chip ${p.state}`}>
          <span class="att-name" title={p.name}>{p.name}</span>
          <span class="att-size">{formatSize(p.file.size)}</span>
          {(p.state === 'waiting' || p.state === 'uploading') && (
            <>
              <progress aria-label={p.name} max={100} value={Math.round(p.progress * 100)} />
              <button type="button" class="link" aria-label="Cancel upload" title={`Cancel the upload of ${p.name}`} onClick={() => files.remove(p.key)}>✕</button>
            </>
          )}
          {p.state === 'failed' && <span class="error" role="alert">{p.error}</span>}
          {(p.state === 'done' || p.state === 'failed') && (
            <button type="button" class="link" aria-label={`Remove ${p.name}`} onClick={() => files.remove(p.key)}>✕</button>
          )}
        </li>
      ))}
    </ul>
  )
}
