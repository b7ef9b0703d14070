// A 1,000-message channel (issue 12, item 3 and the closing numbers): time to the first
// message after signing in, then history by scrolling up (pages by `until`) until the start,
// every message once and in order.
import { launch, person, log, scenario, check, finish, frames } from './lib.mjs'

const { config, report } = scenario()
const { browser, close } = await launch()
try {
  const p = (await person(browser, report, 'reader')).page
  // The first page as the relay sent it: kind-9 events of each REQ before its EOSE. (The
  // timeline is windowed, so the articles in the page at a moment depend on measured heights.)
  const reqs = new Map()
  p.on('websocket', (ws) => {
    ws.on('framesent', ({ payload }) => {
      const msg = JSON.parse(String(payload))
      if (msg[0] === 'REQ') reqs.set(msg[1], { filters: msg.slice(2), events: 0, eose: false })
    })
    ws.on('framereceived', ({ payload }) => {
      const msg = JSON.parse(String(payload))
      const req = reqs.get(msg[1])
      if (!req || req.eose) return
      if (msg[0] === 'EVENT' && msg[2].kind === 9) req.events++
      if (msg[0] === 'EOSE') req.eose = true
    })
  })
  await p.goto(config.url)
  await p.getByRole('textbox', { name: 'Secret key' }).fill(config.secret)
  await check(report, 'the newest page shows right after sign-in', async () => {
    const started = Date.now()
    await p.getByRole('button', { name: 'Sign in' }).click()
    await log(p).getByRole('article').filter({ hasText: `message ${String(config.count - 1).padStart(4, '0')}` }).waitFor()
    report.numbers.firstMessageMs = Date.now() - started
    const pages = [...reqs.values()].filter((r) => r.eose && r.filters.some((f) => f.kinds?.includes(9) && f['#h'] && f.limit))
    report.numbers.firstPage = pages[0]?.events ?? null
    report.numbers.firstPageReqs = pages.map((r) => [r.filters, r.events])
  })
  await check(report, 'scrolling up loads every older page once, in order', async () => {
    const timeline = log(p)
    // The timeline is windowed (decision 136): what is shown is gathered on the way up, in
    // the order of the page, each id with its text once.
    const seen = new Map()
    const gather = async () => {
      const now = await timeline.getByRole('article').evaluateAll((els) => els.map((e) => [e.getAttribute('data-id'), e.querySelector('.text')?.textContent ?? '']))
      for (const [id, text] of now.reverse()) if (!seen.has(id)) seen.set(id, text)
      report.numbers.maxArticles = Math.max(report.numbers.maxArticles ?? 0, now.length)
    }
    await gather()
    for (let i = 0; i < 2000; i++) {
      const top = await timeline.evaluate((el) => el.scrollTop)
      const start = await p.getByText('This is the start of the channel.').count()
      if (start && top === 0) break
      if (top === 0) {
        // At the top: the next page comes (the view stays where it was), or the start shows.
        await p.waitForFunction(() => document.querySelector('[role=log]').scrollTop > 0 || /This is the start of the channel/.test(document.querySelector('[role=log]').textContent))
      } else {
        await timeline.evaluate((el) => { el.scrollTop = Math.max(0, el.scrollTop - el.clientHeight / 2) })
        await frames(p)
      }
      await gather()
    }
    await gather()
    const ids = [...seen.keys()].reverse()
    const texts = [...seen.values()].reverse()
    report.numbers.loaded = texts.length
    // Oldest first by second; within one second the relay's order (by id) is as good as any.
    const numbers = texts.map((t) => Number(t.replace('message ', '')))
    const second = (n) => Math.floor(n / config.perSecond)
    const backwards = numbers.findIndex((n, i) => i > 0 && second(n) < second(numbers[i - 1]))
    if (backwards >= 0) throw new Error(`out of order at ${backwards}: ${texts[backwards - 1]} then ${texts[backwards]}`)
    const missing = Array.from({ length: config.count }, (_, i) => i).filter((i) => !numbers.includes(i))
    if (missing.length) throw new Error(`missing ${missing.length}, e.g. message ${missing[0]}`)
  })
} finally {
  finish(report)
  await close()
}
