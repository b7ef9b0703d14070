// Files a message carries: its NIP-92 `imeta` tags (media spec §9.1: `url`, `m`, `x`, `size`,
// `dim` for images; `blurhash`, `thumb`, `alt`, `name` optional). The message body renders
// the Markdown of the content and then these; a content line that is exactly an attachment's
// URL is left out of the text (the attachment shows it). Fetching and drawing local blobs
// (24242 `get` tokens, thumbnails, file cards) belongs to the files feature; until then each
// attachment renders as a link named after its file.
import type { Tag } from '../types'

export type Attachment = {
  url: string
  mime: string
  sha256: string
  size: number | null
  width: number | null
  height: number | null
  thumb: string | null
  blurhash: string | null
  alt: string
  name: string
}

const MAX_IMETA = 20 // media spec §9.2 item 1: the relay refuses more

export function attachmentsOf(tags: Tag[]): Attachment[] {
  const out: Attachment[] = []
  for (const t of tags) {
    if (t[0] !== 'imeta' || out.length >= MAX_IMETA) continue
    const f = new Map<string, string>()
    for (const part of t.slice(1)) {
      const i = part.indexOf(' ')
      if (i > 0 && !f.has(part.slice(0, i))) f.set(part.slice(0, i), part.slice(i + 1))
    }
    const url = f.get('url') ?? ''
    if (!/^https?:\/\//i.test(url)) continue
    const dim = /^(\d{1,5})x(\d{1,5})$/.exec(f.get('dim') ?? '')
    const size = Number(f.get('size'))
    const sha256 = (f.get('x') ?? '').toLowerCase()
    out.push({
      url,
      mime: f.get('m') ?? 'application/octet-stream',
      sha256,
      size: Number.isSafeInteger(size) && size >= 0 ? size : null,
      width: dim ? Number(dim[1]) : null,
      height: dim ? Number(dim[2]) : null,
      thumb: f.get('thumb') ?? null,
      blurhash: f.get('blurhash') ?? null,
      alt: f.get('alt') ?? '',
      name: f.get('name') || url.split('/').pop() || sha256,
    })
  }
  return out
}

/** The content without the lines that are exactly one of `attachments`' URLs. */
export function withoutAttachmentLines(content: string, attachments: Attachment[]): string {
  if (!attachments.length) return content
  const urls = new Set(attachments.map((a) => a.url))
  return content.split('\n').filter((line) => !urls.has(line.trim())).join('\n').trimEnd()
}
