// nostr-tools against our relay, through every relay item of issue 25: the clock window of
// NIP-17 wraps (one from the nip17 helper, one dated 36 h back), kinds 10050 / 10063 / 1111 /
// 6 / 16 / 30024 / the ephemeral range, two AUTHs on one socket, filters without `kinds`,
// `OK false` for a superseded version and a deleted event, reactions matched by `#h` as
// nostr-tools re-checks them, a deletion of several targets, CLOSE without CLOSED, NIP-11.
// Usage: node nostr_tools_citizen.mjs <ws-url>; prints one JSON object {checks, errors, …}.
import { useWebSocketImplementation } from 'nostr-tools/relay'
import { finalizeEvent, generateSecretKey, getPublicKey } from 'nostr-tools/pure'
import * as nip17 from 'nostr-tools/nip17'
import * as nip59 from 'nostr-tools/nip59'
import * as nip44 from 'nostr-tools/nip44'
import { finishReactionEvent } from 'nostr-tools/nip25'
import { finishRepostEvent } from 'nostr-tools/nip18'
import { fetchRelayInformation } from 'nostr-tools/nip11'
import WebSocket from 'ws'
import { connect, query as queryStored, timeout } from './nostr_tools_common.mjs'

// Every frame the relay sends, to see what nostr-tools itself hides (a CLOSED after CLOSE).
const frames = []
class RecordingWebSocket extends WebSocket {
  constructor (...args) {
    super(...args)
    this.addEventListener('message', (m) => frames.push(JSON.parse(String(m.data))))
  }
}
useWebSocketImplementation(RecordingWebSocket)

const url = process.argv[2]
const out = { checks: [], errors: [] }
const check = (name, ok, detail) => {
  out.checks.push(name)
  if (!ok) out.errors.push(`${name}: ${JSON.stringify(detail)}`)
}
const now = () => Math.floor(Date.now() / 1000)
let invalid = 0 // events a subscription got that do not match its filter (nostr-tools drops them)
const query = (relay, filters) => queryStored(relay, filters, { oninvalidevent: () => { invalid++ } })

const refusal = async (relay, event) => {
  try {
    await relay.publish(event)
    return null
  } catch (err) {
    return String(err.message)
  }
}
const ids = (events) => events.map((e) => e.id).sort()
const sign = (sk, kind, content, tags = [], createdAt = undefined) =>
  finalizeEvent({ kind, content, tags, created_at: createdAt ?? now() }, sk)

try {
  const skA = generateSecretKey(); const pkA = getPublicKey(skA)
  const skB = generateSecretKey(); const pkB = getPublicKey(skB)
  const a = await connect(url, skA)
  const b = await connect(url, skB)

  // -- item 8: NIP-11 ------------------------------------------------------------------------------
  const info = await fetchRelayInformation(url)
  check('nip11 has no null field', Object.values(info).every((v) => v !== null), info)
  check('nip11 clock window', info.limitation.created_at_lower_limit === 900 && info.limitation.created_at_upper_limit === 900, info.limitation)

  // -- item 7: kinds ------------------------------------------------------------------------------
  const note = sign(skA, 1, 'a note', [])
  await a.publish(note)
  const inboxB = sign(skB, 10050, '', [['relay', url]])
  await b.publish(inboxB)
  const blossom = sign(skA, 10063, '', [['server', 'https://blossom.example']])
  const comment = sign(skA, 1111, 'a comment', [['E', note.id, '', pkA], ['K', '1'], ['P', pkA], ['e', note.id, '', pkA], ['k', '1'], ['p', pkA]])
  const repost = finishRepostEvent({ created_at: now() }, note, url, skA)
  const generic = finishRepostEvent({ created_at: now() }, blossom, url, skA)
  const draft = sign(skA, 30024, 'unfinished', [['d', 'essay']])
  for (const e of [blossom, comment, repost, generic, draft]) await a.publish(e)
  check('repost kinds', repost.kind === 6 && generic.kind === 16, [repost.kind, generic.kind])
  const inboxes = await query(a, [{ kinds: [10050], authors: [pkB] }])
  check('10050 served', ids(inboxes).join() === inboxB.id, ids(inboxes))

  // -- item 3: filters without kinds ---------------------------------------------------------------
  const byA = await query(b, [{ authors: [pkA] }])
  const expected = ids([note, blossom, comment, repost, generic])
  check('authors-only filter', ids(byA).join() === expected.join(), { got: ids(byA), expected })
  const ownA = await query(a, [{ authors: [pkA] }])
  check('the author sees its draft', ids(ownA).includes(draft.id), ids(ownA))
  const byK = await query(b, [{ '#k': ['10063'] }])
  check('#k without kinds', ids(byK).join() === generic.id, ids(byK))
  const everything = await query(b, [{}])
  check('{} is served, the draft dropped', everything.some((e) => e.id === note.id) && !everything.some((e) => e.id === draft.id), everything.length)
  let closedDraft = null
  try { await query(b, [{ kinds: [30024] }]) } catch (err) { closedDraft = err.message }
  check('only-gated kinds are CLOSED', closedDraft === 'restricted: author-only kinds require authors=[self]', closedDraft)
  const fresh = sign(skA, 1, 'live for limit 0', [])
  const liveGot = await Promise.race([
    new Promise((resolve) => {
      let eose = false
      const sub = b.subscribe([{ authors: [pkA], limit: 0 }], {
        onevent: (e) => { if (eose && e.id === fresh.id) { sub.close(); resolve(true) } },
        oneose: () => { eose = true; a.publish(fresh) }
      })
    }),
    timeout(5000, 'authors + limit 0 live')
  ])
  check('authors + limit 0 gets EOSE then live', liveGot === true)

  // -- item 7: the ephemeral range ------------------------------------------------------------------
  const signal = sign(skA, 24133, 'encrypted request', [['p', pkB]])
  const relayed = await Promise.race([
    new Promise((resolve) => {
      const sub = b.subscribe([{ kinds: [24133], '#p': [pkB] }], {
        onevent: (e) => { sub.close(); resolve(e.id) },
        oneose: () => a.publish(signal)
      })
    }),
    timeout(5000, 'ephemeral')
  ])
  check('24133 relayed live', relayed === signal.id, relayed)

  // -- item 1: NIP-17 wraps ---------------------------------------------------------------------
  const helperWrap = nip17.wrapEvent(skA, { publicKey: pkB, relayUrl: url }, 'from the nip17 helper')
  await a.publish(helperWrap)
  const rumor = nip59.createRumor({ kind: 14, content: 'dated 36 h back', tags: [['p', pkB]] }, skA)
  const seal = nip59.createSeal(rumor, skA, pkB)
  const wrapKey = generateSecretKey()
  const oldWrap = finalizeEvent({
    kind: 1059,
    created_at: now() - 36 * 3600,
    tags: [['p', pkB]],
    content: nip44.encrypt(JSON.stringify(seal), nip44.getConversationKey(wrapKey, pkB))
  }, wrapKey)
  await a.publish(oldWrap)
  const wraps = await query(b, [{ kinds: [1059], '#p': [pkB] }])
  const texts = wraps.map((w) => nip17.unwrapEvent(w, skB).content).sort()
  check('NIP-17 wraps read by the recipient', texts.join('|') === 'dated 36 h back|from the nip17 helper', texts)
  let pGate = null
  try { await query(a, [{ kinds: [1059], '#p': [pkB] }]) } catch (err) { pGate = err.message }
  check('wraps gated to their p', pGate === 'restricted: p-gated events require #p matching your pubkey', pGate)

  // -- item 2: two AUTHs on one socket --------------------------------------------------------------
  a.authPromise = undefined // nostr-tools keeps its one AUTH; cleared, it sends a second one
  const second = await Promise.race([a.auth((e) => finalizeEvent(e, skB)), timeout(5000, 'second auth')])
  check('second AUTH accepted', second === '', second)
  await a.publish(sign(skB, 1, 'B over A\'s socket', []))
  const bothWraps = await query(a, [{ kinds: [1059], '#p': [pkA, pkB] }])
  check('reads with the union of both keys', ids(bothWraps).join() === ids(wraps).join(), ids(bothWraps))

  // -- item 4: OK false for what is never served ------------------------------------------------------
  const older = sign(skB, 10050, '', [['relay', 'wss://old.example']], inboxB.created_at - 10)
  check('superseded version refused', await refusal(b, older) === 'duplicate: have a newer version')

  // -- items 5, 6: a channel, reactions by #h, a deletion of several targets ------------------------
  const channel = crypto.randomUUID()
  await a.publish(sign(skA, 9007, '', [['h', channel], ['name', 'interop'], ['visibility', 'open']]))
  const said = sign(skA, 9, 'react to me', [['h', channel]])
  await a.publish(said)
  const bare = finishReactionEvent({ content: '-', created_at: now() }, said, skB)
  const bareAnswer = await refusal(b, bare)
  check('reaction without h refused with the fix', bareAnswer === `invalid: reactions of a channel event must carry its channel: add ["h","${channel}"]`, bareAnswer)
  const reaction = finishReactionEvent({ content: '+', tags: [['h', channel]], created_at: now() }, said, skB)
  await b.publish(reaction)
  const byH = await query(b, [{ kinds: [7], '#h': [channel] }])
  check('reaction matched by #h', ids(byH).join() === reaction.id, ids(byH))
  const gone = [sign(skA, 1, 'one'), sign(skA, 1, 'two')]
  for (const e of gone) await a.publish(e)
  await a.publish(sign(skA, 5, '', gone.map((e) => ['e', e.id])))
  const left = await query(b, [{ ids: gone.map((e) => e.id) }])
  check('deletion of two targets', left.length === 0, ids(left))
  check('a deleted event is refused', await refusal(a, gone[0]) === 'blocked: deleted')

  // -- item 8: CLOSE without CLOSED ------------------------------------------------------------------
  const closing = await new Promise((resolve) => {
    const sub = a.subscribe([{ kinds: [1], authors: [pkA] }], { oneose: () => { sub.close(); resolve(sub.id) } })
  })
  await a.count([{ kinds: [1], authors: [pkA] }], { id: 'after-close' }) // a round trip after the CLOSE
  const closedAfter = frames.filter((f) => f[0] === 'CLOSED' && f[1] === closing)
  check('no CLOSED after CLOSE', closedAfter.length === 0, closedAfter)
  const queryCloses = frames.filter((f) => f[0] === 'CLOSED' && f[2] === '')
  check('no empty CLOSED at all', queryCloses.length === 0, queryCloses)

  check('no event outside its filter', invalid === 0, invalid)
  a.close()
  b.close()
} catch (err) {
  out.errors.push(String((err && err.stack) || err))
}
console.log(JSON.stringify(out))
process.exit(0)
