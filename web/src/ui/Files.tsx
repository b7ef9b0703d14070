// A message's files (render/files.ts decides how each shows). Images are their thumbnail at
// the size `dim` gives, the blurhash behind them until they load, and open full size in a
// dialog on a click (or Enter); video and audio play in the browser's own players; any other
// file is a card: type, a link named after the file that saves it under that name, size and
// type. Blobs are read from this relay with the page's `get` token (media.ts).
import { useEffect, useLayoutEffect, useReducer, useRef, useState } from 'preact/hooks'
import { mediaOf } from '../attach'
import { blobOf, type Media } from '../media'
import '../files.css'
import type { Attachment } from '../render/attachments'
import { blurhashUrl, formatSize, shownAs, thumbBox, typeName } from '../render/files'
import type { Workspace } from '../workspace'

export { formatSize }

/** Re-render when the page's read token is (re)signed. */
function useReadToken(media: Media): void {
  const [, bump] = useReducer((n: number) => n + 1, 0)
  const redraw = () => bump(undefined)
  useEffect(() => media.onRead(redraw), [media])
}

export function Files({ ws, files }: { ws: Workspace; files: Attachment[] }) {
  const media = mediaOf(ws)
  useReadToken(media)
  const [viewing, setViewing] = useState<Attachment | null>(null)
  return (
    <div class="files">
      {files.map((a) => {
        const how = shownAs(a)
        return (
          <div key={a.url} class={`att shown-${how}`}>
            {how === 'image' && <Thumb ws={ws} media={media} a={a} onOpen={() => setViewing(a)} />}
            {how === 'video' && <Player media={media} a={a} kind="video" />}
            {how === 'audio' && <Player media={media} a={a} kind="audio" />}
            {how !== 'image' && <Card ws={ws} media={media} a={a} />}
          </div>
        )
      })}
      {viewing && <Viewer ws={ws} media={media} a={viewing} onClose={() => setViewing(null)} />}
    </div>
  )
}

function Thumb({ ws, media, a, onOpen }: { ws: Workspace; media: Media; a: Attachment; onOpen: () => void }) {
  const blob = blobOf(a.url)!
  const box = thumbBox(a.width!, a.height!)
  const img = useRef<HTMLImageElement>(null)
  const [failed, setFailed] = useState(false)
  // The placeholder goes through the CSSOM (the page's CSP allows no inline style attribute).
  useLayoutEffect(() => {
    const el = img.current
    const url = a.blurhash ? blurhashUrl(a.blurhash, box.width, box.height) : null
    if (el && url) el.style.backgroundImage = `url("${url}")` // cleared by onLoad
  }, [a.blurhash])
  if (failed) return <Card ws={ws} media={media} a={a} />
  const src = media.src(blob.sha256, blob.ext, true)
  return (
    <img
      ref={img}
      class="att-thumb"
      width={box.width}
      height={box.height}
      alt={a.alt || a.name}
      title={`${a.name} (${a.width} × ${a.height}), click to view full size`}
      src={src ?? undefined}
      loading="lazy"
      decoding="async"
      tabIndex={0}
      onLoad={(e) => { e.currentTarget.style.backgroundImage = '' }}
      onError={() => { if (src) setFailed(true) }}
      onClick={onOpen}
      onKeyDown={(e) => {
        if (e.key === 'Enter' || e.key === ' ') {
          e.preventDefault()
          onOpen()
        }
      }}
    />
  )
}

function Player({ media, a, kind }: { media: Media; a: Attachment; kind: 'video' | 'audio' }) {
  const blob = blobOf(a.url)!
  const src = media.src(blob.sha256, blob.ext) ?? undefined
  if (kind === 'audio') return <audio controls preload="none" src={src} aria-label={a.alt || a.name} />
  const box = a.width && a.height ? thumbBox(a.width, a.height, 480) : { width: 480, height: 270 }
  return <video controls preload="metadata" width={box.width} height={box.height} src={src} aria-label={a.alt || a.name} />
}

/** Save a blob under the file's name: an authorized fetch, then a download of its bytes (the
 * relay names attachments `<sha256>.<ext>`, and a header's name wins over `download`). */
async function save(ws: Workspace, media: Media, a: Attachment): Promise<void> {
  const blob = blobOf(a.url)!
  try {
    const bytes = await media.fetchBlob(blob.sha256, blob.ext)
    const url = URL.createObjectURL(bytes)
    const link = document.createElement('a')
    link.href = url
    link.download = a.name
    document.body.appendChild(link)
    link.click()
    link.remove()
    window.setTimeout(() => URL.revokeObjectURL(url), 30_000)
  } catch (e) {
    ws.say(`Could not download ${a.name}: ${(e as Error).message}`)
  }
}

function Card({ ws, media, a }: { ws: Workspace; media: Media; a: Attachment }) {
  const blob = blobOf(a.url)
  const type = typeName(a.mime)
  return (
    <div class="att-card">
      <span class="att-icon" aria-hidden="true">{type.slice(0, 4)}</span>
      <span class="att-text">
        {blob ? (
          <a href={media.path(blob.sha256, blob.ext)} onClick={(e) => { e.preventDefault(); void save(ws, media, a) }}>{a.name}</a>
        ) : (
          <a href={a.url} target="_blank" rel="noopener noreferrer nofollow">{a.name}</a>
        )}
        <span class="att-meta" title={a.mime}>{[formatSize(a.size), type].filter(Boolean).join(' · ')}</span>
      </span>
    </div>
  )
}

function Viewer({ ws, media, a, onClose }: { ws: Workspace; media: Media; a: Attachment; onClose: () => void }) {
  const ref = useRef<HTMLDialogElement>(null)
  const blob = blobOf(a.url)!
  useEffect(() => {
    const d = ref.current
    if (d && !d.open) d.showModal()
  }, [])
  const close = () => ref.current?.close()
  return (
    <dialog ref={ref} class="viewer" aria-label={a.name} onClose={onClose} onCancel={onClose}
      onClick={(e) => { if (e.target === ref.current) close() }}>
      <img src={media.src(blob.sha256, blob.ext) ?? undefined} alt={a.alt || a.name} width={a.width ?? undefined} height={a.height ?? undefined} />
      <div class="row">
        <span class="att-meta">{a.name} · {a.width} × {a.height} · {formatSize(a.size)}</span>
        <button type="button" class="quiet" onClick={() => void save(ws, media, a)}>Download</button>
        <button type="button" onClick={close}>Close</button>
      </div>
    </dialog>
  )
}
