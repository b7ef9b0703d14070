// A long thread (decision 385): the panel opens with its newest replies and says there are
// more; *Load older replies* brings the rest a page at a time, each reply once, in order; and a
// channel whose newest messages are all replies in one thread still shows the thread's root.
import { launch, person, log, article, scenario, check, finish, signIn, frames } from './lib.mjs'

const { config, report } = scenario()
const { browser, close } = await launch()
try {
  const { page: p } = await person(browser, report, 'alice')
  // Straight to the newest reply: the channel's pages then hold only the thread's newest replies.
  await signIn(p, `${config.url}#${config.channel}/${config.newestId}`, config.secret)
  const panel = p.getByRole('complementary', { name: 'Thread' })
  const older = panel.getByRole('button', { name: 'Load older replies' })
  const texts = async () => (await panel.locator('article .text').allTextContents()).map((t) => t.trim())

  await check(report, 'a long thread opens with its newest replies and offers the older ones', async () => {
    await panel.getByRole('article').filter({ hasText: config.newest }).waitFor()
    await older.waitFor()
    const shown = await texts()
    if (shown[0] !== config.root) throw new Error(`the panel starts with ${shown[0]}`)
    if (shown.length !== 1 + config.page) throw new Error(`${shown.length - 1} replies at first`)
    if (!(await panel.getByText(`${config.page}+ replies`, { exact: true }).count())) throw new Error('the count does not say there are more')
    await panel.locator('.panel-body').evaluate((el) => { el.scrollTop = 0 })
    await p.screenshot({ path: `${config.images}/thread-older-desktop.png` })
  })

  await check(report, "a thread groups one author's consecutive replies under one name", async () => {
    const msgs = panel.locator('article.msg')
    const grouped = await msgs.evaluateAll((els) => els.map((el) => el.classList.contains('grouped')))
    if (grouped[0] || grouped[1]) throw new Error('the root or the first reply shows no author')
    if (!grouped.some(Boolean)) throw new Error('no reply is grouped under the one before it')
    // A grouped reply shows no name of its own: the one above it says who wrote both.
    const i = grouped.indexOf(true)
    if (await msgs.nth(i).locator('.msg-head').count()) throw new Error('a grouped reply repeats its author')
  })

  await check(report, 'Load older replies brings the rest, each reply once, in order', async () => {
    for (let i = 0; i < 10 && (await older.count()); i++) {
      const before = (await texts()).length
      await older.click()
      await p.waitForFunction(
        ([n]) => document.querySelectorAll('[aria-label="Thread"] article').length > n || !document.querySelector('.older-replies'),
        [before],
      )
    }
    if (await older.count()) throw new Error('still more to load after 10 pages')
    const shown = await texts()
    const want = [config.root, ...config.replies]
    if (JSON.stringify(shown) !== JSON.stringify(want)) throw new Error(`${shown.length - 1} replies shown, first ${shown[1]}, last ${shown.at(-1)}`)
    await panel.getByText(`${config.replies.length} replies`, { exact: true }).waitFor()
    report.numbers.replies = shown.length - 1
  })

  await check(report, 'a channel whose newest messages are all thread replies shows the root', async () => {
    await p.getByRole('navigation', { name: 'Channels' }).getByRole('link', { name: 'busy', exact: true }).click()
    await article(p, config.busyRoot).waitFor()
  })

  await check(report, 'past ten pages of replies it stops and Load older messages goes on', async () => {
    // The channel's pages, as the page asks the relay for them (REQs of kind 9 in #flood).
    let pages = 0
    let pageSeen = () => {}
    const socket = (ws) => ws.on('framesent', ({ payload }) => {
      try {
        const [type, , filter] = JSON.parse(String(payload))
        // A page is kind 9 alone in #flood alone (the live subscription names more kinds).
        if (type === 'REQ' && filter?.kinds?.join() === '9' && filter['#h']?.join() === config.flood && !filter['#e']) {
          pages += 1
          pageSeen()
        }
      } catch { /* not a frame of ours */ }
    })
    p.on('websocket', socket)
    await signIn(p, config.url, config.secret) // a new socket, watched from its start
    await p.getByRole('navigation', { name: 'Channels' }).getByRole('link', { name: 'flood', exact: true }).click()
    // The opening page and ten more to fill the view, none showing a row: then it stops short
    // of the root, 561 messages back. A page it asked for more would come within two frames
    // of the last one's render.
    while (pages < 11) await new Promise((resolve) => { pageSeen = resolve })
    await p.waitForFunction(() => document.querySelector('[aria-label="Messages"]')?.getAttribute('aria-busy') !== 'true')
    await frames(p)
    const asked = pages
    await frames(p)
    if (pages !== asked || (await article(p, config.floodRoot).count())) throw new Error(`${pages} pages, the root ${(await article(p, config.floodRoot).count()) ? 'shown' : 'not shown'}: the pages did not stop`)
    report.numbers.pagesBeforePress = pages
    await log(p).getByRole('button', { name: 'Load older messages' }).click()
    await article(p, config.floodRoot).waitFor()
  })
} finally {
  finish(report)
  await close()
}
