// Reconnects (issue 29 item 10): the relay stops — every tab says Offline at once; it comes
// back — every tab reconnects, catches up on what was posted meanwhile without duplicates, and
// sends nothing again that the relay already stored.
import { launch, person, article, scenario, check, finish, send, reached, until } from './lib.mjs'

const { config, report } = scenario()
const { browser, close } = await launch()
const signInAt = async (p, secret) => {
  await p.goto(config.url + '#' + config.general)
  await p.getByRole('textbox', { name: 'Secret key' }).fill(secret)
  await p.getByRole('button', { name: 'Sign in' }).click()
  await p.getByRole('heading', { name: '# general' }).waitFor()
}
try {
  const tabs = []
  for (const [name, secret] of [['alice', config.alice], ['alice again', config.alice], ['bob', config.bob]]) {
    const { page } = await person(browser, report, name)
    await signInAt(page, secret)
    await page.getByText('Connected', { exact: true }).waitFor()
    tabs.push(page)
  }
  await send(tabs[0], 'sent before the outage')
  await article(tabs[0], 'sent before the outage').getByText('Sent', { exact: true }).waitFor()
  await article(tabs[2], 'sent before the outage').waitFor()
  reached('ready')
  await until('stopped')
  await check(report, 'every tab shows Offline when the relay stops', async () => {
    const started = Date.now()
    await Promise.all(tabs.map((p) => p.getByText('Offline', { exact: true }).waitFor()))
    report.numbers.offlineMs = Date.now() - started
  })
  reached('offline')
  await until('back')
  await check(report, 'every tab reconnects soon after the relay is back', async () => {
    const started = Date.now()
    await Promise.all(tabs.map((p) => p.getByText('Connected', { exact: true }).waitFor()))
    report.numbers.reconnectMs = Date.now() - started
  })
  await check(report, 'each tab catches up on what was posted meanwhile, once', async () => {
    for (const p of tabs) {
      await article(p, 'posted during the outage').waitFor()
      for (const text of ['posted during the outage', 'sent before the outage']) {
        const n = await article(p, text).count()
        if (n !== 1) throw new Error(`"${text}" shows ${n} times`)
      }
    }
  })
  reached('caught up')
  await until('counted')
} finally {
  finish(report)
  await close()
}
