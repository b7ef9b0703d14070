// The inbox and notifications (issue 29 items 3, 4 and 11): the sidebar link "Inbox" with its
// count, the region "Inbox" of articles (a mention, a DM, a reply in my thread), Open in
// context, Mark done (kept across a reload: it rides in the read state); per channel the
// "Notifications" level and mute decide which messages raise a notification.
import { launch, person, article, scenario, check, finish, openChannel, reached, until, PHONE } from './lib.mjs'

const { config, report } = scenario()
const { browser, close } = await launch()
const shot = async (page, name) => {
  await page.evaluate(() => document.activeElement?.blur())
  await page.screenshot({ path: `${config.images}/${name}.png` })
}
const signIn = async (p) => {
  await p.goto(config.url + '#' + config.random)
  await p.getByRole('textbox', { name: 'Secret key' }).fill(config.secret)
  await p.getByRole('button', { name: 'Sign in' }).click()
  await p.getByRole('heading', { name: '# random' }).waitFor()
}
try {
  const { page: p } = await person(browser, report, 'alice')
  await signIn(p)
  const nav = p.getByRole('navigation', { name: 'Channels' })
  const inbox = p.getByRole('region', { name: 'Inbox' })
  const countIs = async (n) => {
    await p.waitForFunction((n) => document.getElementById('inbox-count')?.textContent === `${n} waiting`, n)
    const desc = await nav.getByRole('link', { name: 'Inbox', exact: true }).getAttribute('aria-describedby')
    if (desc !== 'inbox-count') throw new Error(`the Inbox link is described by ${desc}`)
  }

  await check(report, 'the Inbox link counts what waits: a mention, a DM, a reply in my thread', async () => {
    await countIs(3)
    await nav.getByRole('link', { name: 'Inbox', exact: true }).click()
    await inbox.getByRole('article').first().waitFor()
    const texts = await inbox.getByRole('article').allTextContents()
    for (const t of ['@Alice look at this', 'psst in a DM', 'an answer in your thread']) {
      if (!texts.some((x) => x.includes(t))) throw new Error(`missing "${t}" in ${JSON.stringify(texts)}`)
    }
    if (texts.length !== 3) throw new Error(`${texts.length} items`)
    await shot(p, 'inbox-desktop')
  })

  await check(report, 'an item opens in its context (a thread reply in its thread)', async () => {
    await inbox.getByRole('article').filter({ hasText: 'an answer in your thread' }).getByRole('button', { name: 'Open' }).click()
    await p.getByRole('complementary', { name: 'Thread' }).getByRole('article').filter({ hasText: 'an answer in your thread' }).waitFor()
    await p.getByRole('heading', { name: '# general' }).waitFor()
  })

  await check(report, 'Mark done removes an item, also after a reload', async () => {
    await nav.getByRole('link', { name: 'Inbox', exact: true }).click()
    await inbox.getByRole('article').filter({ hasText: '@Alice look at this' }).getByRole('button', { name: 'Mark done' }).click()
    await countIs(2)
    await p.reload()
    await signIn(p)
    await countIs(2)
  })

  await check(report, 'a new mention arrives in the inbox live', async () => {
    reached('mention again')
    await until('mentioned')
    await countIs(3)
  })
  reached('mention again') // again when the check failed before it: the test then reads the failure, not a hang

  await check(report, '"Notifications" per channel: all, then muted', async () => {
    await openChannel(p, 'general')
    await p.evaluate(() => {
      window.__notes = []
      window.Notification = class { static permission = 'granted'; constructor(title, o) { window.__notes.push(o.body) } }
      Object.defineProperty(document, 'hidden', { configurable: true, get: () => true })
    })
    await p.getByRole('button', { name: 'Channel settings' }).click()
    const dialog = p.getByRole('dialog', { name: 'Channel settings' })
    const level = dialog.getByRole('combobox', { name: 'Notifications' })
    if ((await level.inputValue()) !== 'mentions') throw new Error('a channel does not default to mentions')
    await level.selectOption('all')
    reached('level all')
    await until('plain posted')
    await article(p, 'a plain message').waitFor()
    await dialog.getByRole('checkbox', { name: 'Mute channel' }).check()
    reached('muted')
    await until('muted posted')
    await article(p, 'a message while muted').waitFor()
    const notes = await p.evaluate(() => window.__notes)
    if (JSON.stringify(notes) !== JSON.stringify(['a plain message'])) throw new Error(`notifications: ${JSON.stringify(notes)}`)
    await p.keyboard.press('Escape')
  })
  reached('level all') // again when the check failed before it: the test then reads the failure, not a hang
  reached('muted') // again when the check failed before it: the test then reads the failure, not a hang
  await check(report, 'screenshots: the inbox at phone width', async () => {
    const { page: m } = await person(browser, report, 'alice on a phone', PHONE)
    await signIn(m)
    await m.getByRole('button', { name: 'Menu' }).click()
    await m.getByRole('navigation', { name: 'Channels' }).getByRole('link', { name: 'Inbox', exact: true }).click()
    await m.getByRole('region', { name: 'Inbox' }).getByRole('article').first().waitFor()
    await shot(m, 'inbox-phone')
  })
} finally {
  finish(report)
  await close()
}
