// End-to-end encrypted DMs in the browser (tests/web/test_private_dms.py): Bob signs in, finds
// the private DM nostr-tools' nip17 helper sent him beside his channel DM with Alice, marked
// "end-to-end encrypted", answers it privately, and opens the private conversation from the
// channel DM's view too. No frame the page sends carries the text of what it sent.
import { launch, person, signIn, check, finish, scenario } from './lib.mjs'

const { config, report } = scenario()
const { browser, close } = await launch()
const sentFrames = []
try {
  const bob = await person(browser, report, 'bob')
  const page = bob.page
  page.on('websocket', (ws) => ws.on('framesent', (f) => sentFrames.push(String(f.payload))))
  await signIn(page, config.url, config.bobSecret)
  const nav = page.getByRole('navigation', { name: 'Channels' })
  const privateLog = page.getByRole('log', { name: 'Private messages' })

  await check(report, 'a private DM from nostr-tools shows beside the channel DM, marked end-to-end encrypted', async () => {
    await nav.getByRole('link', { name: 'Alice', exact: true }).waitFor()
    await nav.getByRole('link', { name: 'Alice (end-to-end encrypted)', exact: true }).click()
    await page.getByRole('heading', { name: 'Alice', exact: true }).waitFor()
    const msg = privateLog.getByRole('article').filter({ hasText: config.hello })
    await msg.waitFor()
    if (!(await msg.getByText('End-to-end encrypted').isVisible())) throw new Error('no end-to-end encrypted mark')
  })

  await check(report, 'a hostile private DM shows as text and runs nothing', async () => {
    const msg = privateLog.getByRole('article').filter({ hasText: config.hostile })
    await msg.waitFor()
    if ((await msg.locator('img').count()) !== 0) throw new Error('the markup became an element')
    if (await page.evaluate(() => window.__pwned === 1)) throw new Error('the handler ran')
  })

  await check(report, 'the browser answers privately', async () => {
    await page.getByRole('textbox', { name: 'Private message' }).fill(config.reply)
    await page.getByRole('button', { name: 'Send encrypted' }).click()
    await privateLog.getByRole('article').filter({ hasText: config.reply }).waitFor()
  })

  await check(report, "the channel DM's view opens the private conversation", async () => {
    await nav.getByRole('link', { name: 'Alice', exact: true }).click()
    await page.getByRole('log', { name: 'Messages' }).getByRole('article').filter({ hasText: config.plain }).waitFor()
    await page.getByRole('button', { name: '🔒 End-to-end encrypted' }).click()
    await privateLog.getByRole('article').filter({ hasText: config.hello }).waitFor()
    await privateLog.getByRole('article').filter({ hasText: config.reply }).waitFor()
  })

  await check(report, 'no frame the page sent holds the private text', async () => {
    const leaked = sentFrames.filter((f) => f.includes(config.reply))
    if (leaked.length) throw new Error(`${leaked.length} frame(s) carry the plaintext`)
    if (!sentFrames.some((f) => f.includes('"kind":1059'))) throw new Error('no gift wrap was sent')
  })
  await page.screenshot({ path: `${config.images}/private-dm.png` })
} catch (e) {
  report.errors.push(String(e && e.message ? e.message : e).split('\n')[0])
} finally {
  finish(report)
  await close()
}
