// The workspace facts a message's rendering depends on (render/markdown.ts RenderContext): who
// its p tags name and how they are called now, my key, the channels `#name` may point to.
import type { RenderContext } from '../render/markdown'
import type { Msg, Workspace } from '../workspace'

const channelIndex = new WeakMap<Map<string, unknown>, { byName: Map<string, string>; sig: string }>()

function channelsOf(ws: Workspace): { byName: Map<string, string>; sig: string } {
  let hit = channelIndex.get(ws.channels)
  if (!hit) {
    const byName = new Map<string, string>()
    for (const c of ws.channels.values()) if (c.type !== 'dm' && !c.ttl && c.name && !byName.has(c.name.toLowerCase())) byName.set(c.name.toLowerCase(), c.id)
    hit = { byName, sig: [...byName].map(([n, id]) => `${n}=${id}`).join(',') }
    channelIndex.set(ws.channels, hit)
  }
  return hit
}

export function renderContext(ws: Workspace, m: Msg): RenderContext {
  const mentioned = new Map<string, string>()
  for (const t of m.ev.tags) {
    if (t[0] !== 'p' || !/^[0-9a-f]{64}$/.test(t[1] ?? '')) continue
    const name = ws.profiles.get(t[1])?.name
    if (name && !mentioned.has(name)) mentioned.set(name, t[1])
  }
  // Only what this text can use goes into the cache key.
  const usesChannels = m.content.includes('#')
  const usesKeys = m.content.includes('nostr:')
  const chans = usesChannels ? channelsOf(ws) : { byName: new Map<string, string>(), sig: '' }
  const sig = [...mentioned].map(([n, pk]) => `${pk}:${n}`).join(',') + '|' + ws.me.pubkey + '|' + chans.sig + '|' +
    (usesKeys ? [...ws.profiles.keys()].length : '')
  return {
    me: ws.me.pubkey,
    mentioned,
    nameOf: (pk) => ws.nameOf(pk),
    channels: chans.byName,
    channelName: (id) => {
      const c = ws.channels.get(id)
      return c ? ws.channelLabel(c) : null
    },
    sig,
  }
}
