// Work in the inbox (issue 29 items 3, 4): a workflow approval for me and the result of a job
// I asked for wait there in words; each opens its channel at its card (highlighted, the inbox
// closed), as does a link to the card; deciding the approval takes it out; a new approval
// while the tab is hidden raises a notification. On the way: the day heading comes before the
// first card of the day, the "New messages" divider stays when the open channel is clicked
// again, and a notice on a phone wraps, covers none of the composer and goes away on its own.
import { launch, person, scenario, check, finish, signIn, reached, until, scaled, frames, PHONE } from './lib.mjs'

const { config, report } = scenario()
const { browser, close } = await launch()
const shot = async (page, name) => {
  await page.evaluate(() => document.activeElement?.blur())
  await page.screenshot({ path: `${config.images}/${name}.png` })
}
/** Once the focused (highlighted) card is one whose label starts with `name` and it is fully
 * inside the timeline's view: its label. */
const focusedCard = (p, name) => p.waitForFunction((name) => {
  const box = document.querySelector('.timeline')
  const card = document.querySelector('.timeline .row.focus > article')
  if (!box || !card || !card.getAttribute('aria-label').startsWith(name)) return null
  const b = box.getBoundingClientRect()
  const c = card.getBoundingClientRect()
  return c.top >= b.top - 1 && c.bottom <= b.bottom + 1 ? card.getAttribute('aria-label') : null
}, name).then((h) => h.jsonValue())
try {
  const { page: p } = await person(browser, report, 'alice')
  await signIn(p, config.url, config.secret)
  const nav = p.getByRole('navigation', { name: 'Channels' })
  const inbox = p.getByRole('region', { name: 'Inbox' })
  const waiting = (n) => p.waitForFunction((n) => document.getElementById('inbox-count')?.textContent === `${n} waiting`, n)

  await check(report, 'an approval for me and my job\'s result wait in the inbox, in words', async () => {
    await waiting(2)
    await nav.getByRole('link', { name: 'Inbox', exact: true }).click()
    await inbox.getByRole('article', { name: 'Waiting for your approval: Approval: Deploy in #general' }).getByText('Ship 1.2?').waitFor()
    const job = inbox.getByRole('article', { name: /^Your job ended: Job finished without an artifact in #general/ })
    await job.getByText('Three releases and a retro.').waitFor()
    await job.getByText('by Rulesbot').waitFor()
  })

  await check(report, 'the day heading comes before the first card of the day', async () => {
    await p.getByRole('button', { name: 'Close inbox' }).click()
    await p.getByRole('article', { name: 'Approval: Deploy', exact: true }).waitFor()
    const order = await p.evaluate(() => {
      const heads = [...document.querySelectorAll('.timeline h2.day')].map((h) => h.textContent)
      const head = document.querySelector('.timeline h2.day')
      const first = document.querySelector('.timeline article')
      return { heads, before: !!head && !!(head.compareDocumentPosition(first) & Node.DOCUMENT_POSITION_FOLLOWING) }
    })
    if (JSON.stringify(order.heads) !== '["Today"]' || !order.before) throw new Error(`headings ${JSON.stringify(order)}`)
  })

  await check(report, 'the "New messages" divider stays when the open channel is clicked again', async () => {
    await nav.getByRole('link', { name: 'random', exact: true }).click()
    await p.getByRole('heading', { name: '# random' }).waitFor()
    reached('away')
    await until('posted')
    await nav.getByRole('link', { name: /^general/ }).filter({ hasText: '60 unread' }).waitFor()
    await nav.getByRole('link', { name: /^general/ }).click()
    await p.locator('.new-divider').waitFor()
    await nav.getByRole('link', { name: /^general/ }).click()
    await frames(p)
    if (!(await p.locator('.new-divider').count())) throw new Error('the divider went away')
  })
  reached('away') // again when the check failed before it

  let approvalId = ''
  let jobId = ''
  await check(report, 'an approval opens its channel at the card', async () => {
    await nav.getByRole('link', { name: 'Inbox', exact: true }).click()
    await inbox.getByRole('article', { name: /^Waiting for your approval/ }).getByRole('button', { name: 'Open' }).click()
    await p.getByRole('heading', { name: '# general' }).waitFor()
    await p.getByRole('article', { name: 'Approval: Deploy', exact: true }).getByRole('button', { name: 'Approve' }).waitFor()
    await inbox.waitFor({ state: 'detached' })
    await focusedCard(p, 'Approval: Deploy')
    await shot(p, 'inbox-open-approval-desktop')
    approvalId = await p.getByRole('article', { name: 'Approval: Deploy', exact: true }).getAttribute('data-id')
  })

  await check(report, "a job's end opens its channel at the job's card", async () => {
    await nav.getByRole('link', { name: 'Inbox', exact: true }).click()
    await inbox.getByRole('article', { name: /^Your job ended/ }).getByRole('button', { name: 'Open' }).click()
    await inbox.waitFor({ state: 'detached' })
    await focusedCard(p, 'Job:')
    jobId = await p.locator('.timeline .row.focus > article').getAttribute('data-id')
  })

  await check(report, 'a link to an approval or a job opens at its card', async () => {
    const channel = /^#([0-9a-f-]{36})/.exec(await p.evaluate(() => location.hash))[1]
    for (const [id, name] of [[approvalId, 'Approval: Deploy'], [jobId, 'Job:']]) {
      await p.evaluate(() => { const el = document.querySelector('.timeline'); el.scrollTop = el.scrollHeight })
      await p.evaluate((h) => { location.hash = h }, `#${channel}/${id}`)
      await focusedCard(p, name)
    }
    if (await p.getByRole('alert').filter({ hasText: 'not there' }).count()) throw new Error('a "not there" notice')
    await p.evaluate((h) => { location.hash = h }, `#${channel}/${'0'.repeat(64)}`)
    await p.getByRole('alert').filter({ hasText: 'That message is not there' }).waitFor()
    await shot(p, 'notice-desktop')
    await p.getByRole('alert').getByRole('button', { name: 'Dismiss' }).click()
  })

  await check(report, 'a notice on a phone wraps, leaves the composer free and goes away', async () => {
    const { page: m } = await person(browser, report, 'alice on a phone', PHONE)
    await m.goto(config.url)
    await m.getByRole('textbox', { name: 'Secret key' }).fill(config.secret)
    await m.getByRole('button', { name: 'Sign in' }).click()
    await m.getByRole('heading', { name: '# general' }).waitFor()
    const channel = /^#([0-9a-f-]{36})/.exec(await m.evaluate(() => location.hash))[1]
    await m.evaluate((h) => { location.hash = h }, `#${channel}/${'0'.repeat(64)}`)
    const toast = m.getByRole('alert').filter({ hasText: 'That message is not there' })
    await toast.waitFor()
    const fit = await toast.evaluate((t) => {
      const b = t.querySelector('button')
      const ask = [...document.querySelectorAll('.composer button')].find((x) => x.textContent === 'Ask agent')
      const r = t.getBoundingClientRect()
      const a = ask?.getBoundingClientRect()
      const overlaps = !!a && r.left < a.right && a.left < r.right && r.top < a.bottom && a.top < r.bottom
      return { clipped: b.scrollWidth > b.clientWidth + 1, wide: r.right > innerWidth || r.left < 0, overlaps, ask: !!ask }
    })
    if (fit.clipped || fit.wide || fit.overlaps || !fit.ask) throw new Error(JSON.stringify(fit))
    await shot(m, 'notice-phone')
    await m.getByRole('button', { name: 'Ask agent' }).click()
    await m.getByRole('dialog', { name: 'Ask agent' }).waitFor()
    await m.keyboard.press('Escape')
    await toast.waitFor({ state: 'detached', timeout: scaled(60000) })
    await m.evaluate((h) => { location.hash = h }, `#${channel}/${jobId}`)
    await focusedCard(m, 'Job:')
    await shot(m, 'card-phone')
    await m.context().close()
  })

  await check(report, 'deciding the approval takes it out of the inbox', async () => {
    await p.getByRole('article', { name: 'Approval: Deploy', exact: true }).getByRole('button', { name: 'Approve' }).click()
    await p.getByRole('article', { name: 'Approval: Deploy', exact: true }).getByRole('status').filter({ hasText: 'Approved by Alice' }).waitFor()
    await waiting(1)
  })

  await check(report, 'an approval that arrives while the tab is hidden is notified', async () => {
    await p.evaluate(() => {
      window.__notes = []
      window.Notification = class { static permission = 'granted'; constructor(title, o) { window.__notes.push(`${title} | ${o.body}`) } }
      Object.defineProperty(document, 'hidden', { configurable: true, get: () => true })
    })
    reached('hidden')
    await until('second approval')
    await waiting(2)
    const notes = await p.evaluate(() => window.__notes)
    if (JSON.stringify(notes) !== JSON.stringify(['Approval: Deploy | Ship 1.3?'])) throw new Error(`notifications: ${JSON.stringify(notes)}`)
  })
  reached('hidden') // again when the check failed before it: the test then reads the failure, not a hang
} finally {
  finish(report)
  await close()
}
