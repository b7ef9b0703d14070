// NDK (@nostr-dev-kit/ndk) against our relay, through every relay item of issue 25: NIP-17
// wraps (NDK's giftWrap, and one dated 36 h back built from NDK's own encrypt and sign),
// kinds 10050 / 10063 / 1111 / 6 / 16 / 30024 / the ephemeral range, two AUTHs on one socket
// (NDK's relay connection sends the second), filters without `kinds` (which NDK waited on
// forever), `OK false` for a superseded version and a deleted event, reactions (NDK copies the
// target's `h`), a deletion of several targets, CLOSE without CLOSED, NIP-11.
// Usage: node ndk_citizen.mjs <ws-url>; prints one JSON object {checks, errors}.
import NDK, { NDKEvent, NDKPrivateKeySigner, NDKUser, giftWrap, giftUnwrap } from '@nostr-dev-kit/ndk'
import WebSocket from 'ws'

// Node 20 has no global WebSocket; NDK opens its sockets with it. Every frame the relay sends is
// recorded, to see what NDK hides (a CLOSED after CLOSE).
const frames = []
globalThis.WebSocket = class RecordingWebSocket extends WebSocket {
  constructor (...args) {
    super(...args)
    this.addEventListener('message', (m) => frames.push(JSON.parse(String(m.data))))
  }
}

const url = process.argv[2]
const out = { checks: [], errors: [] }
const check = (name, ok, detail) => {
  out.checks.push(name)
  if (!ok) out.errors.push(`${name}: ${JSON.stringify(detail)}`)
}
const now = () => Math.floor(Date.now() / 1000)
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const timeout = (ms, what) => new Promise((_, reject) => setTimeout(() => reject(new Error(`timeout: ${what}`)), ms))

// One NDK per identity, authenticated by NDK itself; the challenge is kept for a second AUTH.
async function open (signer) {
  const ndk = new NDK({ explicitRelayUrls: [url], signer, enableOutboxModel: false })
  const session = { ndk, challenge: null }
  ndk.relayAuthDefaultPolicy = async (relay, challenge) => {
    session.challenge = challenge
    return true // NDK signs the AUTH with its signer
  }
  await ndk.connect(5000)
  session.relay = [...ndk.pool.relays.values()][0]
  for (let i = 0; i < 250 && session.relay.status !== 8; i++) await sleep(20) // 8: AUTHENTICATED
  if (session.relay.status !== 8) throw new Error(`NDK did not authenticate (status ${session.relay.status})`)
  return session
}

const fetch = (ndk, filter) =>
  Promise.race([ndk.fetchEvents(filter, { closeOnEose: true, groupable: false }), timeout(5000, `fetch ${JSON.stringify(filter)}`)])
    .then((set) => [...set])
const ids = (events) => events.map((e) => e.id).sort()

async function publish (ndk, fields, signer) {
  const event = new NDKEvent(ndk, { created_at: now(), content: '', tags: [], ...fields })
  await event.sign(signer)
  await event.publish()
  return event
}

async function refusal (ndk, fields, signer) {
  try {
    await publish(ndk, fields, signer)
    return null
  } catch (err) {
    return err.errors ? [...err.errors.values()].map((e) => String(e.message ?? e)).join('; ') : String(err.message)
  }
}

// Stored events up to EOSE, or the CLOSED reason.
const closedReason = (ndk, filter) => Promise.race([
  new Promise((resolve) => {
    const sub = ndk.subscribe(filter, { closeOnEose: true, groupable: false })
    sub.on('eose', () => resolve(null))
    sub.on('closed', (_relay, reason) => resolve(reason))
  }),
  timeout(5000, `closed ${JSON.stringify(filter)}`)
])

try {
  const signerA = NDKPrivateKeySigner.generate()
  const signerB = NDKPrivateKeySigner.generate()
  const pkA = (await signerA.user()).pubkey
  const pkB = (await signerB.user()).pubkey
  const A = await open(signerA)
  const B = await open(signerB)
  const a = A.ndk
  const b = B.ndk

  // -- item 8: NIP-11 ------------------------------------------------------------------------------
  const info = await A.relay.fetchInfo(true)
  check('nip11 has no null field', Object.values(info).every((v) => v !== null), info)
  check('nip11 clock window', info.limitation?.created_at_lower_limit === 900, info.limitation)

  // -- item 7: kinds ------------------------------------------------------------------------------
  const note = await publish(a, { kind: 1, content: 'a note' }, signerA)
  const inboxB = await publish(b, { kind: 10050, tags: [['relay', url]] }, signerB)
  const blossom = await publish(a, { kind: 10063, tags: [['server', 'https://blossom.example']] }, signerA)
  const comment = await publish(a, { kind: 1111, content: 'a comment', tags: [['E', note.id], ['K', '1'], ['e', note.id], ['k', '1']] }, signerA)
  const repost = await publish(a, { kind: 6, content: JSON.stringify(note.rawEvent()), tags: [['e', note.id], ['p', pkA]] }, signerA)
  const generic = await publish(a, { kind: 16, content: JSON.stringify(blossom.rawEvent()), tags: [['e', blossom.id], ['k', '10063']] }, signerA)
  const draft = await publish(a, { kind: 30024, content: 'unfinished', tags: [['d', 'essay']] }, signerA)
  const inboxes = await fetch(a, { kinds: [10050], authors: [pkB] })
  check('10050 served', ids(inboxes).join() === inboxB.id, ids(inboxes))

  // -- item 3: filters without kinds (NDK waited on these for ever) --------------------------------
  const byA = await fetch(b, { authors: [pkA] })
  const expected = ids([note, blossom, comment, repost, generic])
  check('authors-only filter', ids(byA).join() === expected.join(), { got: ids(byA), expected })
  check('the author sees its draft', ids(await fetch(a, { authors: [pkA] })).includes(draft.id))
  check('#k without kinds', ids(await fetch(b, { '#k': ['10063'] })).join() === generic.id)
  check('only-gated kinds are CLOSED', await closedReason(b, { kinds: [30024] }) === 'restricted: author-only kinds require authors=[self]')
  const fresh = new NDKEvent(a, { kind: 1, content: 'live for limit 0', tags: [], created_at: now() })
  await fresh.sign(signerA)
  const liveGot = await Promise.race([
    new Promise((resolve) => {
      const sub = b.subscribe({ authors: [pkA], limit: 0 }, { closeOnEose: false, groupable: false })
      sub.on('event', (e) => { if (e.id === fresh.id) { sub.stop(); resolve(true) } })
      sub.on('eose', () => fresh.publish())
    }),
    timeout(5000, 'authors + limit 0 live')
  ])
  check('authors + limit 0 gets EOSE then live', liveGot === true)

  // -- item 7: the ephemeral range ------------------------------------------------------------------
  const signal = new NDKEvent(a, { kind: 24133, content: 'encrypted request', tags: [['p', pkB]], created_at: now() })
  await signal.sign(signerA)
  const relayed = await Promise.race([
    new Promise((resolve) => {
      const sub = b.subscribe({ kinds: [24133], '#p': [pkB] }, { closeOnEose: false, groupable: false })
      sub.on('event', (e) => { sub.stop(); resolve(e.id) })
      sub.on('eose', () => signal.publish())
    }),
    timeout(5000, 'ephemeral')
  ])
  check('24133 relayed live', relayed === signal.id, relayed)

  // -- item 1: NIP-17 wraps ---------------------------------------------------------------------
  const userB = new NDKUser({ pubkey: pkB })
  const dm = new NDKEvent(a, { kind: 14, content: 'from NDK giftWrap', tags: [['p', pkB]], created_at: now() })
  const wrapped = await giftWrap(dm, userB, signerA)
  await wrapped.publish()
  const rumor = new NDKEvent(a, { kind: 14, content: 'dated 36 h back', tags: [['p', pkB]], created_at: now(), pubkey: pkA })
  rumor.id = rumor.getEventHash()
  const seal = new NDKEvent(a, { kind: 13, content: JSON.stringify(rumor.rawEvent()), tags: [], created_at: now() })
  await seal.encrypt(userB, signerA, 'nip44')
  await seal.sign(signerA)
  const wrapSigner = NDKPrivateKeySigner.generate()
  const oldWrap = new NDKEvent(a, { kind: 1059, content: JSON.stringify(seal.rawEvent()), tags: [['p', pkB]], created_at: now() - 36 * 3600 })
  await oldWrap.encrypt(userB, wrapSigner, 'nip44')
  await oldWrap.sign(wrapSigner)
  await oldWrap.publish()
  const wraps = await fetch(b, { kinds: [1059], '#p': [pkB] })
  const texts = (await Promise.all(wraps.map((w) => giftUnwrap(w, undefined, signerB)))).map((r) => r.content).sort()
  check('NIP-17 wraps read by the recipient', texts.join('|') === 'dated 36 h back|from NDK giftWrap', texts)
  check('wraps gated to their p', await closedReason(a, { kinds: [1059], '#p': [pkB] }) === 'restricted: p-gated events require #p matching your pubkey')

  // -- item 2: two AUTHs on one socket (NDK's relay connection sends the second) ---------------------
  const second = new NDKEvent(a, { kind: 22242, content: '', tags: [['relay', A.relay.url], ['challenge', A.challenge]], created_at: now() })
  await second.sign(signerB)
  const answer = await Promise.race([A.relay.connectivity.auth(second), timeout(5000, 'second auth')])
  check('second AUTH accepted', answer === '', answer)
  await publish(a, { kind: 1, content: "B over A's socket" }, signerB)
  const bothWraps = await fetch(a, { kinds: [1059], '#p': [pkA, pkB] })
  check('reads with the union of both keys', ids(bothWraps).join() === ids(wraps).join(), ids(bothWraps))

  // -- item 4: OK false for what is never served ------------------------------------------------------
  const stale = await refusal(b, { kind: 10050, tags: [['relay', 'wss://old.example']], created_at: inboxB.created_at - 10 }, signerB)
  check('superseded version refused', stale !== null && stale.includes('duplicate: have a newer version'), stale)

  // -- items 5, 6: a channel, NDK's reaction (it copies the target's h), several targets -------------
  const channel = crypto.randomUUID()
  await publish(a, { kind: 9007, tags: [['h', channel], ['name', 'ndk'], ['visibility', 'open']] }, signerA)
  const said = await publish(a, { kind: 9, content: 'react to me', tags: [['h', channel]] }, signerA)
  const [fetched] = await fetch(b, { kinds: [9], '#h': [channel] })
  const reaction = await fetched.react('+')
  check('NDK reaction carries the h', reaction.tagValue('h') === channel, reaction.tags)
  const byH = await fetch(b, { kinds: [7], '#h': [channel] })
  check('reaction matched by #h', ids(byH).join() === reaction.id && fetched.id === said.id, ids(byH))
  const gone = [await publish(a, { kind: 1, content: 'one' }, signerA), await publish(a, { kind: 1, content: 'two' }, signerA)]
  await publish(a, { kind: 5, tags: gone.map((e) => ['e', e.id]) }, signerA)
  check('deletion of two targets', (await fetch(b, { ids: gone.map((e) => e.id) })).length === 0)
  let resent = null
  try {
    await gone[0].publish()
  } catch (err) {
    resent = [...err.errors.values()].map((e) => String(e.message ?? e)).join('; ')
  }
  check('a deleted event is refused', resent !== null && resent.includes('blocked: deleted'), resent)

  // -- item 8: CLOSE without CLOSED ------------------------------------------------------------------
  const closing = await new Promise((resolve) => {
    const sub = a.subscribe({ kinds: [1], authors: [pkA] }, { closeOnEose: false, groupable: false })
    sub.on('eose', () => { sub.stop(); resolve(true) })
  })
  await fetch(a, { kinds: [0], authors: [pkA] }) // a round trip after the CLOSE
  const closedFrames = frames.filter((f) => f[0] === 'CLOSED' && f[2] === '')
  check('no CLOSED after CLOSE', closing === true && closedFrames.length === 0, closedFrames)

  for (const ndk of [a, b]) for (const relay of ndk.pool.relays.values()) relay.disconnect()
} catch (err) {
  out.errors.push(String((err && err.stack) || err))
}
console.log(JSON.stringify(out))
process.exit(0)
