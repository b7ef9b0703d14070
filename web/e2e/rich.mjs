// Messages people and agents can read (issue 26, items 1 and 2): Markdown with tables, quotes,
// highlighted code (Copy code, folding), emoji, mention chips and channel links; a timeline with
// grouped authors, day headings, avatars, "(edited)", profile cards, long answers folded;
// permalinks and search results that open the channel at the message. Screenshots at both sizes.
import { launch, person, signIn, log, article, openChannel, scenario, check, finish, reveal, gatherUp, frames, DESKTOP, PHONE } from './lib.mjs'

const { config, report } = scenario()
const shot = (page, name) => page.screenshot({ path: `${config.images}/${name}.png` })
const { browser, close } = await launch()

/** A person whose page records CSP violations and serves the avatar host from the test. */
async function reader(name, viewport = DESKTOP) {
  return person(browser, report, name, viewport, async (context) => {
    await context.grantPermissions(['clipboard-read', 'clipboard-write'])
    await context.route('https://avatars.example/**', (route) =>
      route.fulfill({ status: 200, contentType: 'image/png', body: Buffer.from(config.avatarPng, 'base64') }))
    await context.addInitScript(() => {
      window.__csp = []
      document.addEventListener('securitypolicyviolation', (e) => window.__csp.push(`${e.violatedDirective} ${e.blockedURI}`))
    })
  }, { timezoneId: config.timezone })
}
const inView = (loc) => loc.evaluate((el) => {
  const r = el.getBoundingClientRect()
  const box = el.closest('[role=log], .thread-list')?.getBoundingClientRect() ?? { top: 0, bottom: innerHeight }
  return r.top >= box.top - 1 && r.top < box.bottom
})

try {
  const { page: p } = await reader('alice')
  await signIn(p, config.url, config.secret)
  await openChannel(p, 'general')
  const timeline = log(p)
  const showcase = article(p, 'Here is the plan')

  await check(report, 'markdown renders: emphasis, lists, quote, table, links, inline code', async () => {
    await showcase.locator('strong', { hasText: 'plan' }).waitFor()
    await showcase.locator('em', { hasText: 'today' }).waitFor()
    await showcase.locator('del', { hasText: 'not tomorrow' }).waitFor()
    if ((await showcase.locator('ol > li').count()) !== 2) throw new Error('the numbered list')
    await showcase.locator('blockquote', { hasText: 'Quotes look like this' }).waitFor()
    await showcase.getByRole('table').getByRole('cell', { name: 'Carol' }).waitFor()
    await showcase.getByRole('columnheader', { name: 'owner' }).waitFor()
    const link = showcase.getByRole('link', { name: 'https://example.com/docs' })
    if ((await link.getAttribute('target')) !== '_blank' || !(await link.getAttribute('rel')).includes('noopener')) throw new Error('link target/rel')
    await showcase.locator('code', { hasText: 'inline code' }).waitFor()
    if (await showcase.getByText('**plan**').count()) throw new Error('raw Markdown shown')
  })

  await check(report, 'a fenced code block is highlighted and Copy code copies it exactly', async () => {
    const block = article(p, 'def greet').locator('.code')
    await block.locator('.hljs-keyword', { hasText: 'def' }).waitFor()
    await block.getByText('python', { exact: true }).waitFor()
    await block.getByRole('button', { name: 'Copy code' }).click()
    await p.waitForFunction(async (want) => (await navigator.clipboard.readText()) === want, config.code)
  })

  await check(report, 'a long code block is folded until Show all', async () => {
    const block = article(p, 'the full log').locator('.code')
    const before = await block.locator('pre').evaluate((el) => el.clientHeight)
    await block.getByRole('button', { name: 'Show all 40 lines' }).click()
    const after = await block.locator('pre').evaluate((el) => el.clientHeight)
    if (!(after > before * 2)) throw new Error(`pre ${before}px then ${after}px`)
    await block.getByRole('button', { name: 'Show fewer lines' }).waitFor()
  })

  await check(report, 'emoji shortcodes become emoji', async () => {
    await showcase.getByText('🎉').waitFor()
    if (await showcase.getByText(':tada:').count()) throw new Error(':tada: shown as typed')
  })

  await check(report, 'mentions are chips, a mention of me is highlighted, a channel name links to it', async () => {
    const msg = article(p, 'can you check')
    const chip = msg.getByRole('button', { name: '@Alice' })
    if (!(await chip.evaluate((el) => el.classList.contains('mention') && el.classList.contains('me')))) throw new Error('no "me" chip')
    if (!(await msg.evaluate((el) => el.classList.contains('mentions-me')))) throw new Error('the message is not marked')
    await article(p, 'Rulesbot, summarise').getByRole('button', { name: '@Rulesbot' }).waitFor()
    await msg.getByRole('link', { name: '#random' }).click()
    await p.getByRole('heading', { name: '# random' }).waitFor()
    await openChannel(p, 'general')
  })

  await check(report, "one author's consecutive messages are grouped under one name", async () => {
    await reveal(p, 'Here is the plan')
    // Bob's three messages in a row: one name and avatar, then two grouped ones.
    const bobs = timeline.locator('article').filter({ has: p.locator('.msg-head button.author', { hasText: /^Bob$/ }) })
    const showcaseId = await showcase.getAttribute('data-id')
    const ids = await timeline.locator('article').evaluateAll((els) => els.map((e) => [e.dataset.id, e.classList.contains('grouped')]))
    const i = ids.findIndex(([id]) => id === showcaseId)
    if (ids[i][1] || !ids[i + 1][1] || !ids[i + 2][1] || ids[i + 3][1]) throw new Error(`grouping ${JSON.stringify(ids.slice(i, i + 4))}`)
    if ((await bobs.count()) < 1) throw new Error('no head for Bob')
  })

  await check(report, 'days have headings: Today, Yesterday and a date', async () => {
    await log(p).evaluate((el) => { el.scrollTop = el.scrollHeight })
    const days = await gatherUp(p, 'h2')
    if (days.slice(-2).join('|') !== 'Yesterday|Today' || days.length < 3 || !/\d/.test(days[days.length - 3])) throw new Error(`days: ${days}`)
  })

  await check(report, 'avatars: a profile picture, else a generated initial', async () => {
    await reveal(p, 'Here is the plan')
    const img = showcase.locator('img.avatar')
    await p.waitForFunction((el) => el.complete && el.naturalWidth > 0, await img.elementHandle())
    const carol = article(p, 'can you check').locator('.avatar.gen')
    if ((await carol.textContent()) !== 'C') throw new Error('no initial for Carol')
  })

  await check(report, 'an edit is marked (edited)', async () => {
    await article(p, 'one more thing, corrected').getByText('(edited)').waitFor()
  })

  await check(report, 'a name opens a profile card with about, npub and the agent owner', async () => {
    await article(p, 'Here is the full log').getByRole('button', { name: 'Rulesbot', exact: true }).click()
    const card = p.getByRole('dialog', { name: 'Rulesbot' })
    await card.getByText('I answer questions about the build.').waitFor()
    await card.getByText(config.agentNpub).waitFor()
    await card.getByRole('button', { name: 'Bob' }).click()
    await p.getByRole('dialog', { name: 'Bob' }).getByText(config.bobNpub).waitFor()
    await p.getByRole('dialog', { name: 'Bob' }).getByRole('button', { name: 'Close' }).click()
  })

  await check(report, 'a long agent answer shows its first lines and Show more', async () => {
    const answer = article(p, 'Summary of the build')
    const body = answer.locator('.text')
    const clamped = await body.evaluate((el) => el.scrollHeight > el.clientHeight + 20)
    if (!clamped) throw new Error('not clamped')
    await answer.getByRole('button', { name: 'Show more' }).click()
    await answer.getByRole('button', { name: 'Show less' }).waitFor()
    if (await body.evaluate((el) => el.scrollHeight > el.clientHeight + 2)) throw new Error('still clamped')
    await answer.getByRole('button', { name: 'Show less' }).click()
  })

  await check(report, "Copy link copies the message's permalink", async () => {
    const msg = article(p, 'can you check')
    const id = await msg.getAttribute('data-id')
    await msg.hover()
    await msg.getByRole('button', { name: 'Copy link' }).click()
    const want = `${new URL(config.url).origin}/#${config.general}/${id}`
    await p.waitForFunction(async (w) => (await navigator.clipboard.readText()) === w, want)
  })

  await check(report, 'screenshots at 1280×800 and 390×844', async () => {
    // The README's pictures: the Markdown showcase, the code block and Bob's grouped run at
    // the top of the view; at phone width also the newest end (the agent's folded answers).
    const frame = () => showcase.evaluate((el) => el.previousElementSibling?.scrollIntoView({ block: 'start' }))
    await p.evaluate(() => document.activeElement?.blur())
    await p.mouse.move(0, 0)
    await frame()
    await shot(p, 'messages-desktop')
    await p.setViewportSize(PHONE)
    await frame()
    await shot(p, 'messages-phone')
    await timeline.evaluate((el) => { el.scrollTop = el.scrollHeight })
    await shot(p, 'agent-answer-phone')
    await p.setViewportSize(DESKTOP)
  })

  const { page: s } = await reader('alice-search')
  await signIn(s, config.url, config.secret)
  await check(report, 'a search result opens its channel scrolled to the message, highlighted', async () => {
    await s.getByRole('heading', { name: '# general' }).waitFor()
    const box = s.getByRole('searchbox', { name: 'Search' })
    await box.fill('haystack')
    await box.press('Enter')
    const results = s.getByRole('complementary', { name: 'Search results' })
    await results.getByRole('checkbox', { name: 'Only this channel' }).uncheck()
    const hit = results.getByRole('article').filter({ hasText: 'needle in the haystack' })
    await hit.getByRole('button', { name: 'Open' }).click()
    await s.getByRole('heading', { name: '# history' }).waitFor()
    const target = log(s).locator(`article[data-id="${config.needle}"]`)
    await target.and(s.locator('.focus')).waitFor()
    if (!(await inView(target))) throw new Error('the message is not in view')
    // History between the newest page and the needle is loaded, in order, without gaps.
    // The timeline is windowed (decision 136): read it down to the bottom, in page order.
    const order = []
    for (let i = 0; i < 500; i++) {
      for (const t of await log(s).locator('article .text').allTextContents()) if (!order.includes(t)) order.push(t)
      const end = await log(s).evaluate((el) => el.scrollHeight - el.scrollTop - el.clientHeight < 2)
      if (end) break
      await log(s).evaluate((el) => { el.scrollTop += el.clientHeight / 2 })
      await frames(s)
    }
    const fillers = order.filter((t) => t.startsWith('filler')).map((t) => Number(t.split(' ')[1]))
    if (fillers.length !== config.fillers || fillers.some((n, i) => n !== i)) throw new Error(`fillers: ${fillers.length}`)
  })

  const { page: l } = await reader('alice-link', PHONE)
  await check(report, 'a permalink opens the channel at the message, history loaded back to it', async () => {
    await l.goto(`${config.url}#${config.history}/${config.needle}`)
    await l.getByRole('textbox', { name: 'Secret key' }).fill(config.secret)
    await l.getByRole('button', { name: 'Sign in' }).click()
    const target = log(l).locator(`article[data-id="${config.needle}"]`)
    await target.and(l.locator('.focus')).waitFor()
    if (!(await inView(target))) throw new Error('the message is not in view')
  })

  await check(report, 'a permalink to a thread reply opens the thread with the reply highlighted', async () => {
    await l.evaluate((h) => { location.hash = h }, `#${config.general}/${config.reply}`)
    const thread = l.getByRole('complementary', { name: 'Thread' })
    await thread.locator(`article[data-id="${config.reply}"].focus`).waitFor()
    await thread.getByRole('article').filter({ hasText: 'can you check' }).waitFor()
  })

  await check(report, 'the CSP reported nothing', async () => {
    for (const page of [p, s, l]) {
      const seen = await page.evaluate(() => window.__csp)
      if (seen.length) throw new Error(seen.join('; '))
    }
  })
} finally {
  finish(report)
  await close()
}
