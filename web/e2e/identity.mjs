// Identity (issue 12, item 1): create, name, keep encrypted (NIP-49), unlock after reload,
// import nsec / hex, NIP-07 extension; the key never appears in storage or on the wire.
import { finalizeEvent } from 'nostr-tools/pure'
import { hexToBytes, bytesToHex } from 'nostr-tools/utils'
import * as nip19 from 'nostr-tools/nip19'
import * as nip49 from 'nostr-tools/nip49'
import { launch, person, scenario, check, finish } from './lib.mjs'

const { config, report } = scenario()
const url = config.url
const { browser, close } = await launch()
const sent = []
const watchFrames = (page) => page.on('websocket', (ws) => ws.on('framesent', (f) => sent.push(String(f.payload))))

try {
  const a = await person(browser, report, 'ada')
  watchFrames(a.page)
  const p = a.page
  let nsec = ''
  await check(report, 'create identity enters the workspace and names me', async () => {
    await p.goto(url)
    await p.getByRole('button', { name: 'Create identity' }).click()
    const dialog = p.getByRole('dialog', { name: 'Profile' })
    await dialog.waitFor()
    await dialog.getByText('only in this tab’s memory').waitFor()
    await dialog.getByRole('textbox', { name: 'Display name' }).fill('Ada')
    await dialog.getByRole('button', { name: 'Save profile' }).click()
    await dialog.getByRole('status').filter({ hasText: 'Profile saved.' }).waitFor()
    report.npub = (await dialog.locator('code').first().textContent()).trim()
  })
  await check(report, 'the key is exported on request', async () => {
    const dialog = p.getByRole('dialog', { name: 'Profile' })
    await dialog.getByRole('button', { name: 'Show secret key' }).click()
    nsec = (await dialog.getByLabel('Secret key (nsec)').textContent()).trim()
    if (!nsec.startsWith('nsec1')) throw new Error(`export shows ${nsec}`)
  })
  await check(report, 'a passphrase stores the key as ncryptsec only', async () => {
    const dialog = p.getByRole('dialog', { name: 'Profile' })
    await dialog.getByLabel('Passphrase').fill('correct horse battery')
    await dialog.getByRole('button', { name: 'Remember on this device' }).click()
    await dialog.getByText('stored encrypted in this browser').first().waitFor({ timeout: 20000 })
    const storage = await p.evaluate(() => Object.entries(localStorage))
    const hex = bytesToHex(nip19.decode(nsec).data)
    const blob = JSON.stringify(storage)
    if (!storage.some(([k, v]) => k === 'buzz.ncryptsec' && v.startsWith('ncryptsec1'))) throw new Error(`storage: ${blob}`)
    if (blob.includes(nsec) || blob.includes(hex)) throw new Error('the secret is in localStorage in clear')
    await dialog.getByRole('button', { name: 'Close' }).click()
  })
  await check(report, 'after a reload the passphrase unlocks the same identity', async () => {
    await p.reload()
    await p.getByLabel('Passphrase').fill('wrong passphrase')
    await p.getByRole('button', { name: 'Unlock' }).click()
    await p.getByRole('alert').filter({ hasText: 'Wrong passphrase.' }).waitFor({ timeout: 20000 })
    await p.getByLabel('Passphrase').fill('correct horse battery')
    await p.getByRole('button', { name: 'Unlock' }).click()
    await p.getByRole('navigation', { name: 'Channels' }).waitFor({ timeout: 20000 })
    await p.getByRole('banner').getByRole('button', { name: 'Ada' }).waitFor()
  })

  const b = await person(browser, report, 'ada-again')
  watchFrames(b.page)
  await check(report, 'signing in with a pasted nsec enters at once', async () => {
    await b.page.goto(url)
    await b.page.getByRole('textbox', { name: 'Secret key' }).fill(nsec)
    await b.page.getByRole('button', { name: 'Sign in' }).click()
    await b.page.getByRole('navigation', { name: 'Channels' }).waitFor()
    await b.page.getByRole('banner').getByRole('button', { name: 'Ada' }).waitFor()
    if (await b.page.evaluate(() => localStorage.getItem('buzz.ncryptsec')) !== null) throw new Error('stored without being asked')
  })

  const h = await person(browser, report, 'hexa')
  watchFrames(h.page)
  await check(report, 'a hex key is refused when mistyped and accepted when right', async () => {
    await h.page.goto(url)
    await h.page.getByRole('textbox', { name: 'Secret key' }).fill('nsec1notakey')
    await h.page.getByRole('button', { name: 'Sign in' }).click()
    await h.page.getByRole('alert').filter({ hasText: 'not valid' }).waitFor()
    await h.page.getByRole('textbox', { name: 'Secret key' }).fill(config.hexSecret)
    await h.page.getByRole('button', { name: 'Sign in' }).click()
    await h.page.getByRole('banner').getByRole('button', { name: 'Hexa' }).waitFor()
  })

  const e = await person(browser, report, 'encrypted')
  watchFrames(e.page)
  await check(report, 'a pasted ncryptsec asks for its passphrase and unlocks', async () => {
    const ncryptsec = nip49.encrypt(hexToBytes(config.hexSecret), 'key pass phrase', 16)
    await e.page.goto(url)
    const box = e.page.getByRole('textbox', { name: 'Secret key' })
    if (await e.page.getByLabel('Key passphrase').count()) throw new Error('a passphrase field before any ncryptsec')
    await box.fill(ncryptsec)
    await e.page.getByLabel('Key passphrase').fill('not the pass phrase')
    if (await e.page.getByRole('button', { name: 'Sign in' }).count()) throw new Error('Sign in still offered for an encrypted key')
    await e.page.getByRole('button', { name: 'Unlock' }).click()
    await e.page.getByRole('alert').filter({ hasText: 'Wrong passphrase.' }).waitFor({ timeout: 20000 })
    await e.page.getByLabel('Key passphrase').fill('key pass phrase')
    await e.page.getByLabel('Key passphrase').press('Enter')
    await e.page.getByRole('banner').getByRole('button', { name: 'Hexa' }).waitFor({ timeout: 20000 })
    if (await e.page.evaluate(() => localStorage.getItem('buzz.ncryptsec')) !== null) throw new Error('stored without being asked')
  })

  const sk = hexToBytes(config.extensionSecret)
  const x = await person(browser, report, 'extension', undefined, async (context) => {
    await context.exposeFunction('__testSign', (t) => finalizeEvent(t, sk))
    await context.addInitScript((pubkey) => {
      window.nostr = { getPublicKey: async () => pubkey, signEvent: async (t) => window.__testSign(t) }
    }, config.extensionPubkey)
  })
  watchFrames(x.page)
  await check(report, 'a NIP-07 extension signs in without a key in the page', async () => {
    await x.page.goto(url)
    await x.page.getByRole('button', { name: 'Use browser extension' }).click()
    await x.page.getByRole('banner').getByRole('button', { name: 'Nip Seven' }).waitFor()
  })

  await check(report, 'no secret key was ever sent on the socket', async () => {
    const secrets = [nsec, bytesToHex(nip19.decode(nsec).data), config.hexSecret, config.extensionSecret]
    if (!sent.length) throw new Error('no frames seen')
    const leaks = sent.filter((f) => secrets.some((s) => f.includes(s)))
    if (leaks.length) throw new Error(`${leaks.length} frames carry a secret`)
    report.numbers.framesChecked = sent.length
  })
} finally {
  finish(report)
  await close()
}
