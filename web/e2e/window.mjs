// A long channel in a windowed timeline (issue 29, decision 136): it opens at the first unread
// message far below the last read one, "Jump to latest" and "Jump to first unread" work, and
// scrolling from the bottom to the start of the channel loads every older page with the view
// held in place, while the messages in the DOM stay a bounded few.
import { launch, person, log, article, send, scenario, check, finish, openChannel, signIn, reached, until, scaled, frames } from './lib.mjs'

const { config, report } = scenario()
const { browser, close } = await launch()
const count = (p) => p.evaluate(() => document.querySelectorAll('[role=log] article').length)
const most = { n: 0 }
const track = async (p) => { most.n = Math.max(most.n, await count(p)); report.numbers.maxArticles = most.n }
const inView = (loc) => loc.evaluate((el) => {
  const box = el.closest('[role=log]').getBoundingClientRect()
  const r = el.getBoundingClientRect()
  return r.bottom > box.top && r.top < box.bottom
})
/** Once the "New messages" divider is (partly) in the timeline's view. */
const dividerInView = (p) => p.waitForFunction(() => {
  const el = document.querySelector('[role=log] .new-divider')
  const box = document.querySelector('[role=log]').getBoundingClientRect()
  const r = el?.getBoundingClientRect()
  return r && r.bottom > box.top && r.top < box.bottom
})
try {
  const { page: p } = await person(browser, report, 'alice')
  await signIn(p, config.url, config.secret)
  await openChannel(p, 'long')
  await article(p, config.lastRead).waitFor()
  await openChannel(p, 'random')
  reached('read')
  await until('posted')

  await check(report, 'the long channel opens at its first unread message, far below the last read one', async () => {
    // The relay took the new messages; this page learns of them live, later on a busy box.
    // Opened before it knows, the channel has nothing unread to divide: it is opened as a
    // person would, once its badge says so.
    const badge = p.getByRole('navigation', { name: 'Channels' }).getByRole('link', { name: 'long', exact: true }).locator('.badge')
    report.numbers.badgeWhenPosted = (await badge.count()) ? await badge.textContent() : ''
    await badge.filter({ hasText: `${config.unread} unread` }).waitFor({ timeout: scaled(60000) })
    await openChannel(p, 'long')
    const sep = log(p).getByRole('separator', { name: 'New messages' })
    await sep.waitFor({ timeout: 60000 })
    const next = await sep.evaluate((el) => el.nextElementSibling?.querySelector('.text')?.textContent?.trim())
    if (next !== config.firstUnread) throw new Error(`the divider is before "${next}"`)
    await dividerInView(p)
    await track(p)
  })

  await check(report, '"Jump to latest" goes to the newest message', async () => {
    await p.getByRole('button', { name: 'Jump to latest' }).click()
    await p.getByRole('button', { name: 'Jump to latest' }).waitFor({ state: 'detached' })
    await article(p, config.newest).waitFor()
    if (!(await inView(article(p, config.newest)))) throw new Error('the newest message is not in view')
    await track(p)
  })

  await check(report, '"Jump to first unread" goes back to the divider, hundreds of messages up', async () => {
    await p.getByRole('button', { name: 'Jump to first unread' }).click()
    await dividerInView(p)
    await track(p)
  })

  await check(report, 'scrolling up to the start loads every older page with the view held, the DOM bounded', async () => {
    const timeline = log(p)
    await p.getByRole('button', { name: 'Jump to latest' }).click()
    await article(p, config.newest).waitFor()
    const seen = new Set()
    let landed = 0
    for (let i = 0; i < 5000; i++) {
      const top = await timeline.evaluate((el) => el.scrollTop)
      if (top === 0 && (await p.getByText('This is the start of the channel.').count())) break
      // Scroll up (unless at the top, waiting for a page), then the first message in view and
      // where it is: any page that loads above meanwhile must leave it exactly there.
      const mark = await timeline.evaluate((el) => {
        el.scrollTop = Math.max(0, el.scrollTop - Math.round(el.clientHeight * 0.8))
        const box = el.getBoundingClientRect()
        const a = [...el.querySelectorAll('article')].find((x) => x.getBoundingClientRect().bottom > box.top + 1)
        return { id: a?.dataset.id, y: a?.getBoundingClientRect().top, height: el.scrollHeight }
      })
      if (top === 0) {
        await p.waitForFunction(() => document.querySelector('[role=log]').scrollTop > 0 || /This is the start of the channel/.test(document.querySelector('[role=log]').textContent), null, { timeout: 60000 })
      }
      await frames(p)
      await p.waitForFunction(() => document.querySelector('[role=log]').getAttribute('aria-busy') !== 'true', null, { timeout: 60000 })
      await frames(p)
      const after = await timeline.evaluate((el, id) => ({ y: el.querySelector(`article[data-id="${id}"]`)?.getBoundingClientRect().top ?? null, height: el.scrollHeight }), mark.id)
      if (mark.id && (after.y === null || Math.abs(after.y - mark.y) > 2)) {
        throw new Error(`the view moved: the message at ${mark.y} px went to ${after.y} px (scrolled from ${top}, step ${i})`)
      }
      if (after.height > mark.height + 500) landed++
      for (const t of await timeline.locator('article .text').allTextContents()) seen.add(t.trim())
      await track(p)
    }
    report.numbers.seen = seen.size
    report.numbers.pagesLanded = landed
    if (!landed) throw new Error('no older page loaded on the way up')
    if (!seen.has(config.oldest)) throw new Error(`the oldest message "${config.oldest}" never showed`)
    if (seen.size < config.total) throw new Error(`${seen.size} of ${config.total} messages showed on the way up`)
  })

  await check(report, 'back at the bottom, a new message is followed', async () => {
    await p.getByRole('button', { name: 'Jump to latest' }).click()
    await article(p, config.newest).waitFor()
    await p.getByRole('button', { name: 'Jump to latest' }).waitFor({ state: 'detached' })
    reached('bottom')
    await until('live')
    await article(p, 'live one').waitFor()
    await p.waitForFunction(() => {
      const a = [...document.querySelectorAll('[role=log] article')].find((x) => x.textContent.includes('live one'))
      const box = document.querySelector('[role=log]').getBoundingClientRect()
      const r = a?.getBoundingClientRect()
      return r && r.bottom <= box.bottom + 1 && r.top < box.bottom
    })
    await track(p)
  })

  await check(report, 'an edit in progress survives its message scrolled far out of view and back', async () => {
    // The window unmounts a message far from the view; the open edit box and its text must
    // come back with it (decision 366), as in Slack or Element.
    await send(p, 'mine to edit')
    const id = await article(p, 'mine to edit').getAttribute('data-id')
    const mine = log(p).locator(`article[data-id="${id}"]`)
    await mine.getByRole('button', { name: 'Edit' }).click()
    const box = mine.getByRole('textbox', { name: 'Edit message' })
    await box.press('End')
    await box.pressSequentially(', typed before scrolling away')
    await log(p).evaluate((el) => { el.scrollTop = 0 })
    await mine.waitFor({ state: 'detached' })
    await p.getByRole('button', { name: 'Jump to latest' }).click()
    await box.waitFor()
    const kept = await box.inputValue()
    if (kept !== 'mine to edit, typed before scrolling away') throw new Error(`the edit box came back with "${kept}"`)
    await mine.getByRole('button', { name: 'Save' }).click()
    await box.waitFor({ state: 'detached' })
    await mine.filter({ hasText: 'mine to edit, typed before scrolling away' }).filter({ hasText: '(edited)' }).waitFor()
    await track(p)
  })

  await check(report, 'the messages in the DOM stay bounded', async () => {
    if (most.n >= config.bound) throw new Error(`${most.n} messages were in the DOM at once (bound ${config.bound})`)
  })
} finally {
  reached('bottom') // again when a check failed before it: the test then reads the failure, not a hang
  finish(report)
  await close()
}
