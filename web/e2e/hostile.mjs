// Hostile content (issue 12, tests and proof): markup, script and javascript: links in
// messages, names and channel names render as text and run nothing; a 100 KB message neither
// breaks the layout nor stops the page from working.
import { launch, person, signIn, send, log, article, scenario, check, finish } from './lib.mjs'

const { config, report } = scenario()
const { browser, close } = await launch()
try {
  const p = (await person(browser, report, 'reader')).page
  await signIn(p, config.url, config.secret)
  const timeline = log(p)
  await check(report, 'markup in messages is shown as text', async () => {
    await article(p, '<img src=x onerror=alert(1)>').waitFor()
    await article(p, '<script>window.__pwned = 2</script>').waitFor()
    await article(p, '<a href="javascript:alert(3)">click</a>').waitFor()
    if (await timeline.locator('img, script, iframe, svg').count()) throw new Error('markup became elements')
  })
  await check(report, 'no javascript: or data: link exists anywhere', async () => {
    await article(p, 'javascript:alert(4)').waitFor()
    const bad = await p.locator('a[href^="javascript:" i], a[href^="data:" i], a[href^="vbscript:" i]').count()
    if (bad) throw new Error(`${bad} dangerous links`)
    const links = await timeline.locator('a').evaluateAll((as) => as.map((a) => a.getAttribute('href')))
    if (JSON.stringify(links) !== JSON.stringify(['https://example.com/safe'])) throw new Error(`links: ${links}`)
  })
  await check(report, 'hostile names and channel names are text', async () => {
    await timeline.getByText('<b onmouseover=alert(5)>Mallory</b>').first().waitFor()
    await p.getByRole('navigation', { name: 'Channels' }).getByRole('link', { name: '<img src=y onerror=alert(6)>', exact: true }).waitFor()
  })
  await check(report, 'a 100 KB message is folded, expands, and the page stays usable', async () => {
    const big = article(p, 'BIGSTART')
    await big.getByRole('button', { name: /^Show all/ }).click()
    await big.getByText('BIGEND').waitFor()
    const length = await big.locator('.text').evaluate((el) => el.textContent.length)
    if (length < 100_000) throw new Error(`shown ${length} characters`)
    const width = await p.evaluate(() => document.documentElement.scrollWidth)
    if (width > 1280) throw new Error(`page is ${width}px wide`)
    await send(p, 'still responsive after the big one')
  })
  await check(report, 'nothing ran', async () => {
    if (await p.evaluate(() => window.__pwned)) throw new Error('a script ran')
  })
} finally {
  finish(report)
  await close()
}
