// Tab → tab delivery (bench/web.py, issue 29's numbers): one key signed in in two tabs (two
// contexts); the first sends `count` messages one at a time, each timed from pressing Enter
// until it is on the second tab's screen. Works against any revision of the page.
import { launch, person, log, scenario, finish } from './lib.mjs'

const { config, report } = scenario()
const { browser, close } = await launch()
try {
  const tabs = []
  for (const name of ['sender', 'receiver']) {
    const { page } = await person(browser, report, name)
    await page.goto(config.url)
    await page.getByRole('textbox', { name: 'Secret key' }).fill(config.secret)
    await page.getByRole('button', { name: 'Sign in' }).click()
    await log(page).getByRole('article').filter({ hasText: config.newest }).waitFor({ timeout: 60000 })
    tabs.push(page)
  }
  const [sender, receiver] = tabs
  const box = sender.getByRole('textbox', { name: 'Message', exact: true })
  report.numbers.deliveryMs = []
  for (let i = 0; i < config.count; i++) {
    const text = `tab to tab ${i} ${Date.now()}`
    await box.fill(text)
    const started = Date.now()
    await box.press('Enter')
    await receiver.waitForFunction((t) => [...document.querySelectorAll('[role=log] article')].some((a) => a.textContent.includes(t)), text, { polling: 'raf' })
    report.numbers.deliveryMs.push(Date.now() - started)
  }
  report.checks['every message reached the other tab'] = report.numbers.deliveryMs.length === config.count
} catch (e) {
  report.checks['every message reached the other tab'] = false
  report.errors.push(String(e && e.message ? e.message : e).split('\n')[0])
} finally {
  finish(report)
  await close()
}
