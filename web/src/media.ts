// Files on this relay (media spec §2–§4, §15): kind 24242 authorizations, SHA-256 of a file
// read 4 MiB at a time, the `HEAD /upload` preflight and a `PUT /upload` with progress that can
// be aborted, and URLs to read blobs with a host-wide `get` token in `?auth=`.
//
// Blobs are always read from the relay that served the page (by hash and extension, whatever
// host an imeta URL names; decision 195): the page never fetches from another host.
import { sha256 } from '@noble/hashes/sha2.js'
import { bytesToHex } from '@noble/hashes/utils.js'
import { now, type Signer, type Tag } from './types'

export const MAX_FILES_PER_MESSAGE = 10 // media spec §17
const HASH_CHUNK = 4 * 1024 * 1024 // BROWSER_HASH_CHUNK: never the whole file in memory
const UPLOAD_AUTH_TTL_S = 300
const GET_WINDOW_S = 3600 // the relay accepts a `get` token this long after created_at
const GET_RENEW_S = 300 // renewed this long before it leaves that window
const REASK_MS = 60_000
const BLOB = /^([0-9a-f]{64})(?:\.([a-z0-9]{1,16}))?$/i

/** The blob descriptor `PUT /upload` answers (media spec §4.3). */
export type Descriptor = {
  url: string
  sha256: string
  size: number
  type: string
  uploaded?: number
  dim?: string
  blurhash?: string
  thumb?: string
}

/** A refusal from the media routes: the relay's `X-Reason`, else the HTTP status. */
export class MediaError extends Error {
  constructor(readonly status: number, reason: string) {
    super(reason)
  }
}

function base64url(text: string): string {
  const bytes = new TextEncoder().encode(text)
  let bin = ''
  for (const b of bytes) bin += String.fromCharCode(b)
  return btoa(bin).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '')
}

function randomHex(bytes: number): string {
  return bytesToHex(crypto.getRandomValues(new Uint8Array(bytes)))
}

/** The hash and extension a blob URL names (`…/<sha256>[.<ext>]`), or null. */
export function blobOf(url: string): { sha256: string; ext: string | null } | null {
  const path = url.split('#', 1)[0].split('?', 1)[0]
  const m = BLOB.exec(path.slice(path.lastIndexOf('/') + 1))
  return m ? { sha256: m[1].toLowerCase(), ext: m[2]?.toLowerCase() ?? null } : null
}

/** SHA-256 of `file`, read in chunks; `onChunk` gets the bytes hashed so far. */
export async function hashFile(file: Blob, signal?: AbortSignal, onChunk?: (done: number) => void): Promise<string> {
  const h = sha256.create()
  for (let at = 0; at < file.size; at += HASH_CHUNK) {
    if (signal?.aborted) throw new DOMException('Upload cancelled', 'AbortError')
    h.update(new Uint8Array(await file.slice(at, at + HASH_CHUNK).arrayBuffer()))
    onChunk?.(Math.min(file.size, at + HASH_CHUNK))
  }
  return bytesToHex(h.digest())
}

/** Authorizations and URLs for one signer on the page's own relay. */
export class Media {
  private readToken: { token: string; renewAt: number } | null = null
  private pendingRead: Promise<string> | null = null
  private refusedAt = 0
  private listeners = new Set<() => void>()

  constructor(private readonly signer: Signer, private readonly origin = location.origin) {}

  private async token(verb: 'upload' | 'get', tags: Tag[], content: string, ttl: number): Promise<string> {
    const created = now()
    const ev = await this.signer.sign({
      kind: 24242,
      created_at: created,
      tags: [['t', verb], ['expiration', String(created + ttl)], ...tags],
      content,
    })
    return base64url(JSON.stringify(ev))
  }

  /** The host-wide `get` token (a `server` tag, no `x`), signed once and renewed before it
   * expires (media spec §15 item 4). Null until the first one is signed: `onRead` tells when. */
  readNow(): string | null {
    const t = this.readToken
    if (t && now() < t.renewAt) return t.token
    // Signed after this render rather than inside it (a Schnorr signature on the first page). A
    // signer that refuses (an extension's prompt declined) leaves images unloaded and is asked
    // again a minute later, not on every render.
    if (!this.pendingRead && Date.now() - this.refusedAt > REASK_MS) {
      this.pendingRead = new Promise((resolve) => window.setTimeout(resolve, 0)).then(() => this.sign())
      this.pendingRead.catch(() => { this.refusedAt = Date.now() })
    }
    return t && now() < t.renewAt + GET_RENEW_S ? t.token : null
  }

  /** The `get` token, signing a new one when needed. */
  read(): Promise<string> {
    const t = this.readToken
    if (t && now() < t.renewAt) return Promise.resolve(t.token)
    if (!this.pendingRead) this.pendingRead = this.sign()
    return this.pendingRead
  }

  private sign(): Promise<string> {
    return this.token('get', [['server', location.host]], 'Read files', GET_WINDOW_S)
      .then((token) => {
        this.readToken = { token, renewAt: now() + GET_WINDOW_S - GET_RENEW_S }
        for (const fn of this.listeners) fn()
        return token
      })
      .finally(() => {
        this.pendingRead = null
      })
  }

  /** Call `fn` whenever a new read token is ready (images re-render with it). */
  onRead(fn: () => void): () => void {
    this.listeners.add(fn)
    return () => this.listeners.delete(fn)
  }

  /** This relay's URL of a blob (or its thumbnail), without a token. */
  path(sha256: string, ext: string | null, thumb = false): string {
    return `${this.origin}/media/${sha256}${thumb ? '.thumb.jpg' : ext ? '.' + ext : ''}`
  }

  /** The blob's URL with the read token, or null while there is none yet. */
  src(sha256: string, ext: string | null, thumb = false): string | null {
    const token = this.readNow()
    return token ? `${this.path(sha256, ext, thumb)}?auth=${token}` : null
  }

  /** The blob's bytes through an authorized fetch (saving a file under its own name). */
  async fetchBlob(sha256: string, ext: string | null): Promise<Blob> {
    const token = await this.read()
    const r = await fetch(this.path(sha256, ext), { headers: { Authorization: `Nostr ${token}` } })
    if (!r.ok) throw new MediaError(r.status, r.headers.get('X-Reason') || `HTTP ${r.status}`)
    return r.blob()
  }

  /** Upload `file` (hash, preflight, PUT). `onProgress` gets a fraction 0–1; `signal` aborts
   * whichever step is running, and an aborted upload sends nothing more. */
  async upload(file: File, signal: AbortSignal, onProgress: (fraction: number) => void): Promise<Descriptor> {
    // Hashing is the first tenth of the bar: reading a large file takes a moment too.
    const hash = await hashFile(file, signal, (done) => onProgress(file.size ? (0.1 * done) / file.size : 0.1))
    if (signal.aborted) throw new DOMException('Upload cancelled', 'AbortError')
    const token = await this.token('upload', [['x', hash], ['nonce', randomHex(8)]], `Upload ${file.name}`.slice(0, 300), UPLOAD_AUTH_TTL_S)
    const type = file.type || 'application/octet-stream'
    const headers = { Authorization: `Nostr ${token}`, 'X-SHA-256': hash }
    // The preflight (BUD-06) gets refusals as answers: a refused PUT is answered before its
    // body and the connection closed, which a browser may report as a network error.
    const pre = await fetch(`${this.origin}/upload`, {
      method: 'HEAD',
      headers: { ...headers, 'X-Content-Length': String(file.size), 'X-Content-Type': type },
      signal,
    })
    if (!pre.ok) throw new MediaError(pre.status, pre.headers.get('X-Reason') || `HTTP ${pre.status}`)
    return put(`${this.origin}/upload`, file, { ...headers, 'Content-Type': type }, signal, (f) => onProgress(0.1 + 0.9 * f))
  }
}

/** `PUT` through XMLHttpRequest: fetch reports no upload progress. */
function put(url: string, body: Blob, headers: Record<string, string>, signal: AbortSignal, onProgress: (f: number) => void): Promise<Descriptor> {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest()
    xhr.open('PUT', url)
    for (const [k, v] of Object.entries(headers)) xhr.setRequestHeader(k, v)
    xhr.responseType = 'text'
    xhr.upload.onprogress = (e) => {
      if (e.lengthComputable && e.total) onProgress(e.loaded / e.total)
    }
    const onAbort = () => xhr.abort()
    signal.addEventListener('abort', onAbort, { once: true })
    const done = () => signal.removeEventListener('abort', onAbort)
    xhr.onload = () => {
      done()
      if (xhr.status !== 200) {
        reject(new MediaError(xhr.status, xhr.getResponseHeader('X-Reason') || `HTTP ${xhr.status}`))
        return
      }
      try {
        resolve(JSON.parse(xhr.responseText) as Descriptor)
      } catch {
        reject(new MediaError(xhr.status, 'the relay answered no blob descriptor'))
      }
    }
    xhr.onerror = () => {
      done()
      reject(new MediaError(0, 'the upload was interrupted'))
    }
    xhr.onabort = () => {
      done()
      reject(new DOMException('Upload cancelled', 'AbortError'))
    }
    if (signal.aborted) {
      done()
      reject(new DOMException('Upload cancelled', 'AbortError'))
      return
    }
    xhr.send(body)
  })
}

/** The imeta tag of an uploaded file (media spec §9.1, the CLI's shape: url, m, x, size, dim,
 * blurhash, thumb from the descriptor, then `name`). */
export function imetaTag(d: Descriptor, name: string): Tag {
  const tag: Tag = ['imeta', `url ${d.url}`, `m ${d.type}`, `x ${d.sha256}`, `size ${d.size}`]
  if (d.dim) tag.push(`dim ${d.dim}`)
  if (d.blurhash) tag.push(`blurhash ${d.blurhash}`)
  if (d.thumb) tag.push(`thumb ${d.thumb}`)
  if (validName(name)) tag.push(`name ${name}`)
  return tag
}

/** A name an imeta `name` may carry: 1–255 UTF-8 bytes, no `/`, no control characters. */
export function validName(name: string): boolean {
  // eslint-disable-next-line no-control-regex
  return !!name && new TextEncoder().encode(name).length <= 255 && !/[/\u0000-\u001f\u007f]/.test(name)
}
