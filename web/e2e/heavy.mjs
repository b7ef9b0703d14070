// The JS heap after a compressed "heavy use" session (bench/web.py, issue 29's numbers): one
// signed-in tab goes round `channels` for `rounds` rounds; each round opens the next channel,
// scrolls `screens` screens up into its history (older pages load), sends a message, and every
// third round opens a thread on a message, replies in it and closes it. Then the heap is
// measured after a forced collection (CDP HeapProfiler.collectGarbage, Runtime.getHeapUsage).
// Works against any revision of the page.
import { launch, person, log, scenario, check, finish, signIn, frames } from './lib.mjs'

const { config, report } = scenario()
const { browser, close } = await launch()
const heap = async (cdp) => {
  await cdp.send('HeapProfiler.collectGarbage')
  await cdp.send('HeapProfiler.collectGarbage')
  const { usedSize } = await cdp.send('Runtime.getHeapUsage')
  return Math.round((usedSize / 1048576) * 10) / 10
}
try {
  await check(report, 'the heavy-use session ran to the end', async () => {
    const { page } = await person(browser, report, 'heavy')
    const cdp = await page.context().newCDPSession(page)
    await signIn(page, config.url, config.secret)
    await log(page).getByRole('article').first().waitFor({ timeout: 120000 })
    report.numbers.heapAfterSignInMb = await heap(cdp)
    const nav = page.getByRole('navigation', { name: 'Channels' })
    const counts = { switches: 0, sends: 0, threads: 0, screens: 0 }
    const began = Date.now()
    for (let r = 0; r < config.rounds; r++) {
      const channel = config.channels[r % config.channels.length]
      await nav.getByRole('link', { name: channel, exact: true }).click()
      await page.getByRole('heading', { name: `# ${channel}` }).waitFor()
      await log(page).getByRole('article').first().waitFor({ timeout: 60000 })
      counts.switches++
      for (let s = 0; s < config.screens; s++) {
        await log(page).evaluate((el) => { el.scrollTop = Math.max(0, el.scrollTop - el.clientHeight) })
        await frames(page)
        await page.waitForFunction(() => document.querySelector('[role=log]').getAttribute('aria-busy') !== 'true', null, { timeout: 60000 })
        counts.screens++
      }
      await log(page).evaluate((el) => { el.scrollTop = el.scrollHeight })
      const text = `heavy use ${r} ${Date.now()}`
      const box = page.getByRole('textbox', { name: 'Message', exact: true })
      await box.fill(text)
      await box.press('Enter')
      const sent = log(page).getByRole('article').filter({ hasText: text })
      await sent.waitFor({ timeout: 60000 })
      counts.sends++
      if (r % 3 === 0) {
        await sent.hover()
        await sent.getByRole('button', { name: 'Reply in thread' }).click()
        const panel = page.getByRole('complementary', { name: 'Thread' })
        const reply = `reply ${r} ${Date.now()}`
        await panel.getByRole('textbox', { name: 'Reply' }).fill(reply)
        await panel.getByRole('button', { name: 'Send reply' }).click()
        await panel.getByRole('article').filter({ hasText: reply }).waitFor({ timeout: 60000 })
        await panel.getByRole('button', { name: 'Close thread' }).click()
        counts.threads++
      }
    }
    report.numbers = { ...report.numbers, ...counts, sessionS: Math.round((Date.now() - began) / 1000) }
    report.numbers.heapMb = await heap(cdp)
    report.numbers.domNodes = await page.evaluate(() => document.getElementsByTagName('*').length)
  })
} finally {
  finish(report)
  await close()
}
