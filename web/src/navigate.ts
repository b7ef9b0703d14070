// Permalinks: `#<channel>/<event id>` opens the channel scrolled to that message and
// highlighted (`ws.focus`), loading history back to it; a thread reply opens its thread with
// the reply highlighted. Search results jump the same way.
import { threadLinks, type Workspace } from './workspace'
import { firstTag, type NEvent } from './types'

const CHANNEL = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}'
const LINK = new RegExp(`^#(${CHANNEL})(?:/([0-9a-f]{64}))?$`)
const FOCUS_MS = 6000
const MAX_PAGES = 40 // 500 messages a page: a permalink reaches back 20,000 messages

export function parseLink(hash: string): { channel: string; event: string | null } | null {
  const m = LINK.exec(hash)
  return m ? { channel: m[1], event: m[2] ?? null } : null
}

export function permalink(channel: string, event: string): string {
  return `${location.origin}${location.pathname}#${channel}/${event}`
}

let clearing = 0

function focusOn(ws: Workspace, id: string): void {
  ws.focus = id
  ws.changed()
  clearTimeout(clearing)
  clearing = window.setTimeout(() => {
    if (ws.focus === id) {
      ws.focus = null
      ws.changed()
    }
  }, FOCUS_MS)
}

/** A job request and an approval request show as cards in the timeline. */
const CARDS = [43001, 46010]

/** Open the timeline at a card: loaded back to its time, then focused by its row's key (a
 * job by its request's id, an approval by its `d`). */
async function toCard(ws: Workspace, channel: string, ev: NEvent): Promise<null> {
  const t = ws.timeline(channel)
  for (let i = 0; i < MAX_PAGES && t.hasMore && ws.oldestOn(channel) > ev.created_at; i++) {
    if (!(await ws.loadOlder(channel, ev.created_at))) break
  }
  focusOn(ws, ev.kind === 46010 ? firstTag(ev, 'd') ?? ev.id : ev.id)
  return null
}

/** Open `channel` at message `event`. Resolves to the thread root to show when the message is
 * a thread reply (the caller opens the thread panel), else null. */
export async function jumpTo(ws: Workspace, channel: string, event: string): Promise<string | null> {
  if (ws.active !== channel || !ws.timeline(channel).loaded) await ws.openChannel(channel)
  history.replaceState(null, '', `#${channel}/${event}`)
  let m = ws.msgs.get(event)
  let ev = m?.ev
  if (!ev) {
    // Learn where it is without holding it: it joins the timeline when its page arrives.
    ev = (await ws.relay.query([{ ids: [event], kinds: [9, ...CARDS], '#h': [channel] }]))[0]
    if (ev && ev.kind !== 9) return toCard(ws, channel, ev)
    if (!ev) {
      ws.say('That message is not there: deleted, or not yours to read.')
      return null
    }
  }
  const { root } = threadLinks(ev)
  const broadcast = ev.tags.some((t) => t[0] === 'broadcast')
  if (root && !broadcast) {
    focusOn(ws, event)
    return root
  }
  const t = ws.timeline(channel)
  for (let i = 0; i < MAX_PAGES && !t.ids.includes(event) && t.hasMore; i++) {
    if (!(await ws.loadOlder(channel, ev.created_at))) break
  }
  m = ws.msgs.get(event)
  if (!m || !t.ids.includes(event)) {
    ws.say('That message is too far back to open here; scroll up to it.')
    return null
  }
  focusOn(ws, event)
  return null
}
