// What the nostr-tools interop scripts share: a timeout, a connection that has answered the
// relay's NIP-42 challenge, and a query of the stored events. The caller picks the WebSocket
// implementation (useWebSocketImplementation) before connecting.
import { Relay } from 'nostr-tools/relay'
import { finalizeEvent } from 'nostr-tools/pure'

export const timeout = (ms, what) => new Promise((_, reject) => setTimeout(() => reject(new Error(`timeout: ${what}`)), ms))

// A connection to `url` authenticated (NIP-42) as the secret key `sk`.
export async function connect (url, sk) {
  const relay = await Relay.connect(url)
  for (let i = 0; i < 100 && !relay.challenge; i++) await new Promise((r) => setTimeout(r, 20))
  await Promise.race([relay.auth((e) => finalizeEvent(e, sk)), timeout(5000, 'auth')])
  return relay
}

// Stored events up to EOSE; rejects with the CLOSED reason. `hooks` adds subscription callbacks.
export function query (relay, filters, hooks = {}) {
  return Promise.race([
    new Promise((resolve, reject) => {
      const got = []
      const sub = relay.subscribe(filters, {
        ...hooks,
        onevent: (e) => got.push(e),
        oneose: () => { resolve(got); sub.close() },
        onclose: (reason) => reject(new Error(reason)) // after EOSE: no effect
      })
    }),
    timeout(5000, `query ${JSON.stringify(filters)}`)
  ])
}
