// A windowed list for the chat timeline (issue 29, decision 136): only the rows near the view
// (plus an overscan) are in the DOM, between two spacers whose heights are the sum of the
// rows left out (measured once shown, else an estimate: the mean of those measured). The
// view is held by an anchor, not by scrollTop: the row at the top of the view and how far
// below the view's top it sits, or "pinned" to the bottom. After every render, image load or
// resize (a ResizeObserver on each shown row and on the box) the rows are measured and the
// anchor put back where it was, so a page prepended above, a row that grows, or an estimate
// corrected never moves what the reader looks at. A jump (`place`) names a row and where in
// the view it goes; it becomes the anchor once that row is in the DOM.
import { useEffect, useReducer, useRef } from 'preact/hooks'
import type { RefObject } from 'preact'

export type Place = 'bottom' | { key: string; align: 'top' | 'center'; offset?: number; select?: string }

const OVERSCAN = 800 // px rendered beyond each edge of the view
const MARGIN = 300 // re-window when the view comes this close to an edge of what is rendered
const PIN = 80 // this close to the bottom counts as at the bottom (follows new rows)
const FIRST_ESTIMATE = 56

export class Windower {
  private keys: string[] = []
  private index = new Map<string, number>()
  private offsets: number[] = [0] // offsets[i]: top of row i, rows' origin 0; offsets[n]: their total
  private heights = new Map<string, number>()
  private measured = { sum: 0, n: 0 }
  start = 0 // rendered rows: [start, end)
  end = 0
  private top = 0 // the view's top, in rows' coordinates
  private view = 600
  private pinned = true
  private anchor: { key: string; offset: number } | null = null
  place: Place | null = null
  private expect = -1 // the scrollTop we set last (its scroll event is not the reader's)
  private last = -1 // the scrollTop after the last layout or scroll event
  boxRef: RefObject<HTMLElement> | null = null
  headRef: RefObject<HTMLElement> | null = null // the top spacer: the rows' origin
  private spins = 0 // re-renders asked by layout in a row (a bound, should it not settle)
  rerender: () => void = () => undefined
  private observer: ResizeObserver | null = null
  private watched = new Set<Element>()
  private pressed = false // a pointer is down in the box: what is under it stays put

  private get box(): HTMLElement | null {
    return this.boxRef?.current ?? null
  }

  private get head(): HTMLElement | null {
    return this.headRef?.current ?? null
  }

  private estimate(): number {
    return this.measured.n ? this.measured.sum / this.measured.n : FIRST_ESTIMATE
  }

  private height(key: string): number {
    return this.heights.get(key) ?? this.estimate()
  }

  /** Render time: take the rows' keys, find the view's top from the anchor (or the bottom, or
   * a pending jump) and choose the rows to render. */
  update(keys: string[]): { start: number; end: number; before: number; after: number } {
    if (keys !== this.keys) {
      this.keys = keys
      this.index = new Map(keys.map((k, i) => [k, i]))
      this.sum()
    }
    const n = keys.length
    const total = this.offsets[n]
    const at = (key: string) => this.index.get(key) ?? -1
    if (this.place === 'bottom' || (!this.place && this.pinned)) this.top = total - this.view
    else if (this.place && at(this.place.key) >= 0) {
      const p = this.place
      this.top = this.offsets[at(p.key)] - (p.align === 'center' ? (this.view - this.height(p.key)) / 2 : (p.offset ?? 0))
    } else if (this.anchor && at(this.anchor.key) >= 0) this.top = this.offsets[at(this.anchor.key)] - this.anchor.offset
    this.top = Math.max(0, Math.min(this.top, total - this.view))
    if (!this.covers(MARGIN)) [this.start, this.end] = this.range(OVERSCAN)
    this.start = Math.min(this.start, n)
    this.end = Math.min(Math.max(this.end, this.start), n)
    return { start: this.start, end: this.end, before: this.offsets[this.start], after: total - this.offsets[this.end] }
  }

  private sum(): void {
    const est = this.estimate()
    const o = new Array<number>(this.keys.length + 1)
    o[0] = 0
    for (let i = 0; i < this.keys.length; i++) o[i + 1] = o[i] + (this.heights.get(this.keys[i]) ?? est)
    this.offsets = o
  }

  /** The first row whose bottom is below y. */
  private rowAt(y: number): number {
    let lo = 0
    let hi = this.keys.length
    while (lo < hi) {
      const mid = (lo + hi) >> 1
      if (this.offsets[mid + 1] > y) hi = mid
      else lo = mid + 1
    }
    return lo
  }

  private range(over: number): [number, number] {
    const s = this.rowAt(this.top - over)
    const e = this.rowAt(this.top + this.view + over) + 1
    return [s, Math.min(e, this.keys.length)]
  }

  private covers(margin: number): boolean {
    if (!this.keys.length) return true // nothing to show: nothing to move
    const [s, e] = this.range(margin)
    return this.end > this.start && s >= this.start && e <= this.end
  }

  private rows(): HTMLElement[] {
    return this.box ? [...this.box.querySelectorAll<HTMLElement>(':scope > .row')] : []
  }

  /** Where the rows start in the box's scrolled content. */
  private origin(): number {
    const box = this.box as HTMLElement
    return this.head ? this.head.getBoundingClientRect().top - box.getBoundingClientRect().top + box.scrollTop : 0
  }

  /** What a row is anchored by: its message or card (its last element), not its heading. */
  private pin(row: HTMLElement): HTMLElement {
    return (row.lastElementChild as HTMLElement | null) ?? row
  }

  private topOf(el: HTMLElement): number {
    const box = this.box as HTMLElement
    return el.getBoundingClientRect().top - box.getBoundingClientRect().top + box.scrollTop
  }

  /** After a render, an image load or a resize: measure, put the view back, re-window if needed. */
  layout(): void {
    const box = this.box
    if (!box) return
    const rows = this.rows()
    let changed = false
    for (const row of rows) {
      const key = row.dataset.key as string
      const h = row.getBoundingClientRect().height
      const old = this.heights.get(key)
      if (old === h) continue
      if (old === undefined) this.measured.n++
      this.measured.sum += h - (old ?? 0)
      this.heights.set(key, h)
      changed = true
    }
    if (changed) this.sum()
    this.watch(rows)
    this.view = box.clientHeight
    const shown = (key: string) => rows.find((r) => r.dataset.key === key)
    let want: number | null = null
    const p = this.place
    if (p === 'bottom') {
      this.pinned = true
      this.anchor = null
      this.place = null
    } else if (p) {
      const i = this.index.get(p.key)
      const row = shown(p.key)
      if (i === undefined) this.place = null
      else if (row) {
        const target = (p.select && row.querySelector<HTMLElement>(p.select)) || row
        const offset = p.align === 'center' ? (this.view - target.getBoundingClientRect().height) / 2 : (p.offset ?? 0)
        want = this.topOf(target) - offset
        this.anchor = { key: p.key, offset: offset + (this.topOf(this.pin(row)) - this.topOf(target)) }
        this.pinned = false
        this.place = null
      } else want = this.origin() + this.offsets[i] - (p.offset ?? 0)
    }
    if (!p && Math.abs(box.scrollTop - this.last) >= 1 && this.last >= 0) this.capture() // a scroll whose event is still to come
    // Pinned, a row that grows is followed to the bottom — but not while a pointer is down: a
    // press focuses its message, whose actions then show below it at phone width, and following
    // them moved the pressed button up from under the pointer, so the release missed it and the
    // click went to the message instead (decision 367). The bottom is followed on release.
    if (want === null && this.pinned) want = this.pressed ? null : box.scrollHeight - box.clientHeight
    else if (want === null && this.anchor) {
      const row = shown(this.anchor.key)
      const i = this.index.get(this.anchor.key)
      if (row) want = this.topOf(this.pin(row)) - this.anchor.offset
      else if (i !== undefined) want = this.origin() + this.offsets[i] - this.anchor.offset
    }
    if (want !== null) {
      want = Math.max(0, Math.min(want, box.scrollHeight - box.clientHeight))
      if (Math.abs(box.scrollTop - want) >= 1) {
        box.scrollTop = want
        this.expect = box.scrollTop
      }
    }
    this.top = box.scrollTop - this.origin()
    this.last = box.scrollTop
    if (!this.place && this.covers(MARGIN)) this.spins = 0
    else if (this.spins++ < 8) this.rerender()
  }

  /** The reader scrolled: a new anchor (the first row at the view's top), pinned or not. */
  scrolled(): void {
    const box = this.box
    if (!box) return
    const own = Math.abs(box.scrollTop - this.expect) < 1
    this.spins = 0
    this.expect = -1
    const origin = this.origin()
    this.top = box.scrollTop - origin
    this.view = box.clientHeight
    if (!own) this.capture()
    this.last = box.scrollTop
    if (!this.covers(MARGIN)) this.rerender()
  }

  /** The reader's own scroll: the first row whose message is (partly) in view anchors it. */
  private capture(): void {
    const box = this.box as HTMLElement
    this.place = null
    this.pinned = box.scrollHeight - box.scrollTop - box.clientHeight < PIN
    const row = this.rows().find((r) => {
      const el = this.pin(r)
      return this.topOf(el) + el.getBoundingClientRect().height > box.scrollTop
    })
    if (row && this.topOf(row) <= box.scrollTop + box.clientHeight) {
      this.anchor = { key: row.dataset.key as string, offset: this.topOf(this.pin(row)) - box.scrollTop }
    } else if (this.keys.length) {
      const top = box.scrollTop - this.origin()
      const i = Math.min(this.rowAt(top), this.keys.length - 1)
      this.anchor = { key: this.keys[i], offset: this.offsets[i] - top }
    }
  }

  /** A pointer went down in the box: hold the view until its release and the click it makes. */
  press(): void {
    if (this.pressed) return
    this.pressed = true
    // A release outside the page may never come (the window lost focus mid-press): blur ends it.
    const release = (e: Event) => {
      if (e.type === 'blur' && e.target !== window) return // an element's blur, caught on its way down
      for (const type of ['pointerup', 'pointercancel', 'blur']) window.removeEventListener(type, release, true)
      // The click comes right after the pointerup, in the same task: follow the bottom after it.
      window.setTimeout(() => {
        this.pressed = false
        this.layout()
      }, 0)
    }
    for (const type of ['pointerup', 'pointercancel', 'blur']) window.addEventListener(type, release, true)
  }

  /** Is row `key` above the view (its top more than 20 px over the view's top)? */
  above(key: string): boolean {
    const i = this.index.get(key)
    return i !== undefined && this.offsets[i] + 20 < this.top
  }

  private watch(rows: HTMLElement[]): void {
    if (!this.observer) {
      this.observer = new ResizeObserver(() => this.layout())
      if (this.box) this.observer.observe(this.box)
    }
    const now = new Set<Element>(rows)
    for (const el of this.watched) if (!now.has(el)) this.observer.unobserve(el)
    for (const el of now) if (!this.watched.has(el)) this.observer.observe(el)
    this.watched = now
  }

  /** A new list (another channel): forget the view, keep the measured heights. */
  reset(): void {
    this.anchor = null
    this.place = null
    this.pinned = true
    this.start = this.end = 0
    this.top = 0
    this.last = -1
  }

  close(): void {
    this.observer?.disconnect()
    this.observer = null
    this.watched.clear()
  }
}

/** A Windower for the box `box`, re-rendering the caller when the window must move. */
export function useWindower(box: RefObject<HTMLElement>, head: RefObject<HTMLElement>): Windower {
  const [, bump] = useReducer((n: number) => n + 1, 0)
  const w = useRef<Windower | null>(null)
  if (!w.current) w.current = new Windower()
  const win = w.current
  win.rerender = () => bump(0)
  win.boxRef = box
  win.headRef = head
  useEffect(() => () => win.close(), [win])
  return win
}
