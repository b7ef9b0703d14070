// Catching up (issue 29 items 1 and 11): a channel with unread messages opens at the first of
// them under a "New messages" separator; "Jump to first unread" and "Jump to latest" (with the
// count of messages that arrived while scrolled up); a mention and a DM get their own badge.
import { launch, person, log, article, scenario, check, finish, openChannel, signIn, reached, until, PHONE } from './lib.mjs'

const { config, report } = scenario()
const { browser, close } = await launch()
const shot = async (page, name) => {
  await page.evaluate(() => document.activeElement?.blur())
  await page.screenshot({ path: `${config.images}/${name}.png` })
}
const inView = (loc) => loc.evaluate((el) => {
  const box = el.closest('[role=log]').getBoundingClientRect()
  const r = el.getBoundingClientRect()
  return r.bottom > box.top && r.top < box.bottom
})
try {
  const { page: p } = await person(browser, report, 'alice')
  await signIn(p, config.url, config.secret)
  const nav = p.getByRole('navigation', { name: 'Channels' })
  await openChannel(p, 'general')
  await article(p, 'old 29').waitFor()
  await openChannel(p, 'random')
  reached('read')
  await until('posted')

  await check(report, 'unread, mention and DM badges are distinct descriptions of the links', async () => {
    const general = nav.getByRole('link', { name: 'general', exact: true })
    // On a timeout the failure names what the link said instead (a count, or nothing at all).
    const shown = () => p.evaluate(() => document.querySelector('a[aria-label="general"]')?.textContent ?? '(no link)')
    await p
      .waitForFunction(() => /60 unread/.test(document.querySelector('a[aria-label="general"]')?.textContent ?? ''))
      .catch(async (e) => { throw new Error(`general never showed "60 unread": it shows "${await shown()}" (${e.message.split('\n')[0]})`) })
    const desc = await general.getAttribute('aria-describedby')
    const text = await p.evaluate((ids) => ids.split(' ').map((id) => document.getElementById(id)?.textContent).join(' | '), desc)
    if (text !== '60 unread | 1 mention') throw new Error(`general is described as "${text}"`)
    if ((await general.locator('.badge.mention').count()) !== 1) throw new Error('the mention badge is not distinct')
    const dm = nav.getByRole('link', { name: 'Bob', exact: true })
    await dm.locator('.badge.mention').waitFor()
  })

  await check(report, 'the channel opens at the first unread message under "New messages"', async () => {
    await openChannel(p, 'general')
    const sep = log(p).getByRole('separator', { name: 'New messages' })
    await sep.waitFor()
    const next = await sep.evaluate((el) => el.nextElementSibling?.querySelector('.text')?.textContent?.trim())
    if (next !== 'new 00') throw new Error(`the divider is before "${next}"`)
    await p.waitForFunction(() => {
      const el = document.querySelector('[role=log] .new-divider')
      const box = document.querySelector('[role=log]').getBoundingClientRect()
      const r = el?.getBoundingClientRect()
      return r && r.bottom > box.top && r.top < box.bottom
    })
    if (!(await inView(article(p, 'new 00')))) throw new Error('the first unread message is not in view')
    if (await nav.getByRole('link', { name: 'general', exact: true }).locator('.badge').count()) throw new Error('still unread')
    await shot(p, 'unread-desktop')
  })

  await check(report, '"Jump to first unread" goes back to the divider', async () => {
    await log(p).evaluate((el) => { el.scrollTop = el.scrollHeight })
    await p.getByRole('button', { name: 'Jump to first unread' }).click()
    await p.waitForFunction(() => {
      const el = document.querySelector('[role=log] .new-divider')
      const box = document.querySelector('[role=log]').getBoundingClientRect()
      const r = el.getBoundingClientRect()
      return r.bottom > box.top && r.top < box.bottom
    })
  })

  await check(report, 'scrolled up, new messages show on "Jump to latest", which goes to the bottom', async () => {
    await p.getByRole('button', { name: 'Jump to latest' }).waitFor()
    reached('scrolled up')
    await until('more')
    await p.getByRole('button', { name: 'Jump to latest' }).filter({ hasText: '2 new messages' }).waitFor()
    await p.getByRole('button', { name: 'Jump to latest' }).click()
    await p.getByRole('button', { name: 'Jump to latest' }).waitFor({ state: 'detached' })
    if (!(await inView(article(p, 'live 2')))) throw new Error('the newest message is not in view')
  })
  reached('scrolled up') // again when the check failed before it: the test then reads the failure, not a hang
  await check(report, 'screenshots: the divider at phone width', async () => {
    await openChannel(p, 'random')
    reached('away')
    await until('later')
    const { page: m } = await person(browser, report, 'alice on a phone', PHONE)
    await m.goto(config.url + '#' + config.random)
    await m.getByRole('textbox', { name: 'Secret key' }).fill(config.secret)
    await m.getByRole('button', { name: 'Sign in' }).click()
    await m.getByRole('heading', { name: '# random' }).waitFor()
    await m.getByRole('button', { name: 'Menu' }).click()
    // A fresh browser merges the stored read state before it publishes its own (decision 222).
    await m.getByRole('navigation', { name: 'Channels' }).getByRole('link', { name: 'general', exact: true }).locator('.badge').waitFor()
    await m.getByRole('navigation', { name: 'Channels' }).getByRole('link', { name: 'general', exact: true }).click()
    await log(m).getByRole('separator', { name: 'New messages' }).waitFor()
    await shot(m, 'unread-phone')
  })
  reached('away') // again when the check failed before it: the test then reads the failure, not a hang
} finally {
  finish(report)
  await close()
}
