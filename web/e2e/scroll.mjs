// A long channel scrolled from the bottom to the top (bench/web.py, issue 29's numbers): sign
// in, open `channel`, then drive the scroll from inside the page, `step` px up each animation
// frame, timing every frame with requestAnimationFrame and counting the messages in the DOM.
// At the top it waits for the next page (frames keep being timed: the page must stay smooth
// while a page lands). Ends at the start of the channel or after `limitS` seconds (a page that
// cannot keep up says how far it got). Works against any revision of the page.
import { launch, person, log, scenario, check, finish, signIn } from './lib.mjs'

const { config, report } = scenario()
const { browser, close } = await launch()
try {
  await check(report, 'the channel scrolled from the bottom to the top', async () => {
    const { page } = await person(browser, report, 'reader')
    await signIn(page, config.url, config.secret)
    await page.getByRole('navigation', { name: 'Channels' }).getByRole('link', { name: config.channel, exact: true }).click()
    await log(page).getByRole('article').filter({ hasText: config.newest }).waitFor({ timeout: 120000 })
    const out = await page.evaluate(({ step, limitS }) => new Promise((resolve) => {
      const el = document.querySelector('[role=log]')
      const frames = []
      let most = 0
      let oldest = Infinity // the oldest message seen: how far up a page that did not finish got
      let last = performance.now()
      const began = last
      const started = /This is the start of the channel/
      const tick = (now) => {
        frames.push(now - last)
        last = now
        most = Math.max(most, el.querySelectorAll('article').length)
        if (frames.length % 30 === 0) {
          const n = /message (\d+)/.exec(el.querySelector('article .text')?.textContent ?? '')
          if (n) oldest = Math.min(oldest, Number(n[1]))
        }
        const done = el.scrollTop === 0 && started.test(el.textContent)
        if (done || now - began > limitS * 1000) {
          resolve({ frames, most, oldestSeen: Number.isFinite(oldest) ? oldest : null, reachedStart: done, seconds: (now - began) / 1000, articlesAtEnd: el.querySelectorAll('article').length })
          return
        }
        if (el.scrollTop > 0) el.scrollTop = Math.max(0, el.scrollTop - step)
        requestAnimationFrame(tick)
      }
      requestAnimationFrame((now) => { last = now; requestAnimationFrame(tick) })
    }), { step: config.step, limitS: config.limitS })
    report.numbers = { ...report.numbers, ...out, framesN: out.frames.length }
  })
} finally {
  finish(report)
  await close()
}
