// How a message's file is shown (media spec §15 item 5), decided from its imeta tag alone:
// raster images inline (their thumbnail at the size `dim` gives, the blurhash behind it while
// it loads), video and audio in the browser's players, everything else as a file card. Only
// the types the relay serves inline are ever drawn (§5.4); the rest is never more than a link.
import { decode } from 'blurhash'
import { blobOf } from '../media'
import type { Attachment } from './attachments'

export type Shown = 'image' | 'video' | 'audio' | 'card'

const IMAGES = new Set(['image/jpeg', 'image/png', 'image/gif', 'image/webp'])
const VIDEOS = new Set(['video/mp4', 'video/webm'])
const AUDIOS = new Set(['audio/mpeg', 'audio/mp4', 'audio/ogg', 'audio/wav', 'audio/flac'])
export const THUMB_BOX = 320 // the relay's thumbnails fit 320 × 320 (§6.3)
const HASH_SIDE = 32 // a blurhash is drawn this small and stretched: it is a blur anyway
const TYPE_NAMES: Record<string, string> = {
  'application/pdf': 'PDF',
  'application/zip': 'ZIP archive',
  'application/gzip': 'gzip archive',
  'application/x-tar': 'tar archive',
  'application/json': 'JSON',
  'text/plain': 'Text',
  'text/csv': 'CSV',
  'text/markdown': 'Markdown',
  'application/octet-stream': 'Binary file',
  'application/vnd.openxmlformats-officedocument.wordprocessingml.document': 'Word document',
  'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet': 'Excel sheet',
  'application/vnd.openxmlformats-officedocument.presentationml.presentation': 'PowerPoint',
}

/** How `a` is shown: a local blob (the URL names a hash) of an inline type, else a card. */
export function shownAs(a: Attachment): Shown {
  if (!blobOf(a.url)) return 'card'
  if (IMAGES.has(a.mime) && a.width && a.height) return 'image'
  if (VIDEOS.has(a.mime)) return 'video'
  if (AUDIOS.has(a.mime)) return 'audio'
  return 'card'
}

/** The box a thumbnail takes: `dim` scaled to fit THUMB_BOX, never enlarged. */
export function thumbBox(width: number, height: number, box = THUMB_BOX): { width: number; height: number } {
  const k = Math.min(1, box / width, box / height)
  return { width: Math.max(1, Math.round(width * k)), height: Math.max(1, Math.round(height * k)) }
}

/** "PDF", "Word document"…, else the subtype in capitals. */
export function typeName(mime: string): string {
  return TYPE_NAMES[mime] ?? (mime.split('/')[1] ?? mime).replace(/^x-/, '').toUpperCase()
}

export function formatSize(bytes: number | null): string {
  if (bytes === null) return ''
  if (bytes < 1024) return `${bytes} B`
  const units = ['KB', 'MB', 'GB']
  let v = bytes / 1024
  let i = 0
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024
    i++
  }
  return `${v >= 100 ? Math.round(v) : v.toFixed(1)} ${units[i]}`
}

const placeholders = new Map<string, string>()

/** The blurhash as a small PNG data URL (cached), or null when it does not decode. */
export function blurhashUrl(hash: string, width: number, height: number): string | null {
  const key = `${hash}|${width > height ? 'w' : 'h'}`
  const hit = placeholders.get(key)
  if (hit !== undefined) return hit || null
  let url = ''
  try {
    const k = HASH_SIDE / Math.max(width, height)
    const w = Math.max(4, Math.round(width * k))
    const h = Math.max(4, Math.round(height * k))
    const pixels = decode(hash, w, h)
    const canvas = document.createElement('canvas')
    canvas.width = w
    canvas.height = h
    const c = canvas.getContext('2d')
    if (c) {
      c.putImageData(new ImageData(new Uint8ClampedArray(pixels), w, h), 0, 0)
      url = canvas.toDataURL()
    }
  } catch {
    url = '' // not a blurhash: no placeholder
  }
  if (placeholders.size > 500) placeholders.clear()
  placeholders.set(key, url)
  return url || null
}
