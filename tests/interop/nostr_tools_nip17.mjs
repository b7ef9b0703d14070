// nostr-tools' own NIP-17 helper against our relay, for tests/interop/test_private_dms.py.
// Usage:
//   node nostr_tools_nip17.mjs send <ws-url> <secret-hex> <recipient-hex> <text>
//     wraps <text> to the recipient and to the sender (nip17.wrapManyEvents), publishes the
//     wraps after NIP-42 AUTH as the sender; prints {rumorId (of the sender's own copy), wrapIds}
//   node nostr_tools_nip17.mjs read <ws-url> <secret-hex>
//     reads the wraps addressed to the key and unwraps them (nip17.unwrapEvent); prints
//     {messages: [{id, pubkey, content, tags}], unreadable}
import { useWebSocketImplementation } from 'nostr-tools/relay'
import { getPublicKey } from 'nostr-tools/pure'
import { hexToBytes } from 'nostr-tools/utils'
import * as nip17 from 'nostr-tools/nip17'
import WebSocket from 'ws'
import { connect, query, timeout } from './nostr_tools_common.mjs'

useWebSocketImplementation(WebSocket)

const [mode, url, skHex, ...rest] = process.argv.slice(2)
const sk = hexToBytes(skHex)
const pk = getPublicKey(sk)
const relay = await connect(url, sk)
if (mode === 'send') {
  const [recipient, text] = rest
  const wraps = nip17.wrapManyEvents(sk, [{ publicKey: recipient, relayUrl: url }], text)
  for (const wrap of wraps) await Promise.race([relay.publish(wrap), timeout(5000, 'publish')])
  const mine = wraps.find((w) => w.tags.some((t) => t[0] === 'p' && t[1] === pk))
  const rumor = nip17.unwrapEvent(mine, sk)
  console.log(JSON.stringify({ rumorId: rumor.id, wrapIds: wraps.map((w) => w.id) }))
} else if (mode === 'read') {
  const wraps = await query(relay, [{ kinds: [1059], '#p': [pk] }])
  const messages = []
  let unreadable = 0
  for (const wrap of wraps) {
    try {
      const rumor = nip17.unwrapEvent(wrap, sk)
      messages.push({ id: rumor.id, pubkey: rumor.pubkey, content: rumor.content, tags: rumor.tags })
    } catch {
      unreadable++
    }
  }
  console.log(JSON.stringify({ messages, unreadable }))
} else {
  throw new Error(`unknown mode ${mode}`)
}
relay.close()
process.exit(0)
