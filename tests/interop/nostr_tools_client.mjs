// A nostr-tools client run against our relay: NIP-42 auth, publish, subscribe (stored + live).
// Usage: node nostr_tools_client.mjs <ws-url>; prints one JSON object with what it saw.
import { Relay, useWebSocketImplementation } from 'nostr-tools/relay'
import { finalizeEvent, generateSecretKey, getPublicKey } from 'nostr-tools/pure'
import WebSocket from 'ws'

useWebSocketImplementation(WebSocket)

const url = process.argv[2]
const sk = generateSecretKey()
const pk = getPublicKey(sk)
const out = { pubkey: pk, errors: [] }

const timeout = (ms, what) => new Promise((_, reject) => setTimeout(() => reject(new Error(`timeout: ${what}`)), ms))

try {
  const relay = await Relay.connect(url)
  relay.onauth = (evt) => finalizeEvent(evt, sk)
  // The relay sends its challenge on connect; wait until nostr-tools has authenticated.
  for (let i = 0; i < 50 && !relay.challenge; i++) await new Promise(r => setTimeout(r, 20))
  out.auth = await Promise.race([relay.auth(relay.onauth), timeout(5000, 'auth')])

  const stored = finalizeEvent({ kind: 1, created_at: Math.floor(Date.now() / 1000), tags: [['t', 'interop']], content: 'from nostr-tools: stored' }, sk)
  out.publish = await Promise.race([relay.publish(stored), timeout(5000, 'publish')])
  out.storedId = stored.id

  const seen = []
  let gotEose
  const eose = new Promise(r => { gotEose = r })
  let gotLive
  const live = new Promise(r => { gotLive = r })
  const liveEvent = finalizeEvent({ kind: 1, created_at: Math.floor(Date.now() / 1000), tags: [['t', 'interop']], content: 'from nostr-tools: live' }, sk)
  relay.subscribe([{ kinds: [1], authors: [pk], '#t': ['interop'] }], {
    onevent (e) { seen.push({ id: e.id, content: e.content }); if (e.id === liveEvent.id) gotLive() },
    oneose () { gotEose() },
    onclose (reason) { out.closed = reason }
  })
  await Promise.race([eose, timeout(5000, 'eose')])
  out.beforeEose = seen.map(e => e.id)
  out.livePublish = await Promise.race([relay.publish(liveEvent), timeout(5000, 'live publish')])
  await Promise.race([live, timeout(5000, 'live event')])
  out.liveId = liveEvent.id
  out.seen = seen
  relay.close()
} catch (err) {
  out.errors.push(String(err && err.message || err))
}
console.log(JSON.stringify(out))
process.exit(0)
