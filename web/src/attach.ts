// Files a composer is about to send (media spec §15 items 1–2): each one hashed and uploaded
// as soon as it is added, at most two at a time for this person (the relay's per-pubkey limit
// is two uploads in progress, §11 item 4, so a third would be refused 429), with progress, a
// cancel that aborts the request, and the relay's reason when it refuses. A photo's location
// is removed first (privacy.ts). A message carries
// the finished ones as URL lines and imeta tags, as `buzz messages send --file` does.
import { Media, MediaError, MAX_FILES_PER_MESSAGE, imetaTag, type Descriptor } from './media'
import { withoutLocation } from './privacy'
import type { Tag } from './types'
import type { Workspace } from './workspace'

export type Pending = {
  key: number
  file: File
  name: string
  /** 0–1 while uploading. */
  progress: number
  state: 'waiting' | 'uploading' | 'done' | 'failed'
  error: string
  descriptor: Descriptor | null
  controller: AbortController
}

const UPLOADS_AT_ONCE = 2
const medias = new WeakMap<Workspace, Media>()
let serial = 0

/** The workspace's file access (one read token per signed-in person). */
export function mediaOf(ws: Workspace): Media {
  let m = medias.get(ws)
  if (!m) medias.set(ws, (m = new Media(ws.me)))
  return m
}

// Shared by every composer of the page: the limit is the relay's, per person.
let running = 0
const queue: (() => void)[] = []

async function slot<T>(signal: AbortSignal, fn: () => Promise<T>): Promise<T> {
  if (running >= UPLOADS_AT_ONCE) {
    await new Promise<void>((resolve, reject) => {
      const go = () => {
        signal.removeEventListener('abort', quit)
        resolve()
      }
      const quit = () => {
        const i = queue.indexOf(go)
        if (i >= 0) queue.splice(i, 1)
        reject(new DOMException('Upload cancelled', 'AbortError'))
      }
      queue.push(go)
      signal.addEventListener('abort', quit, { once: true })
    })
  }
  running++
  try {
    return await fn()
  } finally {
    running--
    queue.shift()?.()
  }
}

/** A pasted image has a generic name ("image.png"); give it the time it was pasted. */
function nameOf(file: File, pasted: boolean): string {
  const name = file.name || 'file'
  if (!pasted || !/^image\.\w+$/.test(name)) return name
  const d = new Date()
  const p = (n: number) => String(n).padStart(2, '0')
  return `Pasted image ${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}.${p(d.getMinutes())}.${p(d.getSeconds())}${name.slice(name.lastIndexOf('.'))}`
}

/** One composer's attachments. `onChange` re-renders it. */
export class Attachments {
  items: Pending[] = []

  constructor(private readonly media: Media, private readonly onChange: () => void) {}

  /** Add files and start their uploads; returns a sentence when some were left out. */
  add(files: Iterable<File>, pasted = false): string {
    let left = 0
    for (const file of files) {
      if (this.items.length >= MAX_FILES_PER_MESSAGE) {
        left++
        continue
      }
      const p: Pending = { key: ++serial, file, name: nameOf(file, pasted), progress: 0, state: 'waiting', error: '', descriptor: null, controller: new AbortController() }
      this.items = [...this.items, p]
      void this.run(p)
    }
    this.onChange()
    return left ? `A message carries at most ${MAX_FILES_PER_MESSAGE} files: ${left} left out.` : ''
  }

  private async run(p: Pending): Promise<void> {
    const signal = p.controller.signal
    try {
      const d = await slot(signal, async () => {
        this.update(p, { state: 'uploading' })
        const file = await withoutLocation(p.file)
        return this.media.upload(file, signal, (progress) => this.update(p, { progress }))
      })
      this.update(p, { state: 'done', progress: 1, descriptor: d })
    } catch (e) {
      if (signal.aborted) return
      const text = e instanceof MediaError ? e.message : String((e as Error)?.message ?? e)
      this.update(p, { state: 'failed', error: text })
    }
  }

  private update(p: Pending, fields: Partial<Pending>): void {
    if (!this.items.includes(p)) return
    Object.assign(p, fields)
    this.items = [...this.items]
    this.onChange()
  }

  /** Cancel an upload (the request is aborted) or drop a finished file. */
  remove(key: number): void {
    const p = this.items.find((i) => i.key === key)
    if (!p) return
    p.controller.abort()
    this.items = this.items.filter((i) => i !== p)
    this.onChange()
  }

  busy(): boolean {
    return this.items.some((i) => i.state === 'waiting' || i.state === 'uploading')
  }

  failed(): boolean {
    return this.items.some((i) => i.state === 'failed')
  }

  /** The finished files: URL lines for the content and imeta tags. */
  ready(): { urls: string[]; tags: Tag[] } {
    const done = this.items.filter((i) => i.state === 'done' && i.descriptor)
    return { urls: done.map((i) => i.descriptor!.url), tags: done.map((i) => imetaTag(i.descriptor!, i.name)) }
  }

  clear(): void {
    this.items = []
    this.onChange()
  }
}
