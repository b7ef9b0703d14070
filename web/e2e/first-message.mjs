// Time from *Sign in* to the newest message of a channel (bench/web.py, issue 26's benchmark):
// each run is a fresh browser context (no cache, no storage), as a person signing in on a new
// device. Works against any revision of the page: it waits for the newest message's text only.
import { launch, person, log, scenario, finish } from './lib.mjs'

const { config, report } = scenario()
const { browser, close } = await launch()
try {
  report.numbers.runsMs = []
  for (let i = 0; i < config.runs; i++) {
    const { context, page } = await person(browser, report, `run ${i}`)
    await page.goto(config.url)
    await page.getByRole('textbox', { name: 'Secret key' }).fill(config.secret)
    const started = Date.now()
    await page.getByRole('button', { name: 'Sign in' }).click()
    await log(page).getByRole('article').filter({ hasText: config.newest }).waitFor({ timeout: 60000 })
    report.numbers.runsMs.push(Date.now() - started)
    report.numbers.articles = await log(page).getByRole('article').count()
    report.numbers.codeBlocks = await log(page).locator('pre').count()
    report.numbers.images = await log(page).locator('img').count()
    await context.close()
  }
  report.checks['the newest message shows after sign-in'] = report.numbers.runsMs.length === config.runs
} catch (e) {
  report.checks['the newest message shows after sign-in'] = false
  report.errors.push(String(e && e.message ? e.message : e).split('\n')[0])
} finally {
  finish(report)
  await close()
}
