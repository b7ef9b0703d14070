// The highlighter and the emoji table are chunks of their own, fetched the first time a
// message needs one: signing in does not wait for them. Messages render at once without
// them and again when one arrives (`generation` is part of every rendering's cache key).
type Highlight = typeof import('./hljs')
type Emoji = typeof import('./emoji')

let hl: Highlight | null = null
let em: Emoji | null = null
const asked = new Set<string>()
const listeners = new Set<() => void>()
export let generation = 0

function arrived(): void {
  generation++
  for (const fn of listeners) fn()
}

/** Call `fn` whenever a chunk arrives (messages should render again). */
export function onLoaded(fn: () => void): () => void {
  listeners.add(fn)
  return () => listeners.delete(fn)
}

export function highlighter(): Highlight | null {
  if (!hl && !asked.has('hl')) {
    asked.add('hl')
    import('./hljs').then((m) => { hl = m; arrived() }, () => asked.delete('hl'))
  }
  return hl
}

export function emojiTable(): Emoji | null {
  if (!em && !asked.has('em')) {
    asked.add('em')
    import('./emoji').then((m) => { em = m; arrived() }, () => asked.delete('em'))
  }
  return em
}

/** Fetch the highlighter while the person is still signing in: a channel's first page then
 * renders once, highlighted. */
export function warmUp(): void {
  const idle = window.requestIdleCallback ?? ((fn: () => void) => window.setTimeout(fn, 200))
  idle(() => void highlighter())
}
