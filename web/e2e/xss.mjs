// The usual XSS corpus as Markdown messages (issue 26, item 1): raw HTML, SVG, javascript: and
// data: links, entity and whitespace tricks, nested Markdown, remote images. Every message
// shows; nothing from them becomes an active element or attribute; every event handler a
// payload could have planted is fired and nothing runs; the CSP reports nothing; no remote
// image is fetched.
import { launch, person, signIn, log, article, scenario, check, finish } from './lib.mjs'

const { config, report } = scenario()
const { browser, close } = await launch()
const fetched = []
try {
  const { page: p } = await person(browser, report, 'reader', undefined, async (context) => {
    await context.route('https://images.example/**', (route) => { fetched.push(route.request().url()); return route.abort() })
    await context.addInitScript(() => {
      window.__csp = []
      document.addEventListener('securitypolicyviolation', (e) => window.__csp.push(`${e.violatedDirective} ${e.blockedURI}`))
    })
  })
  await signIn(p, config.url, config.secret)
  const timeline = log(p)

  await check(report, 'every message of the corpus shows', async () => {
    await article(p, config.last).waitFor()
    const n = await timeline.getByRole('article').count()
    if (n !== config.count) throw new Error(`${n} of ${config.count} messages`)
    await article(p, '<img src=x onerror="window.__pwned=1">').waitFor()
    await article(p, '<svg onload="window.__pwned=2">').waitFor()
    await timeline.locator('pre').filter({ hasText: '<script>window.__pwned=14</script>' }).waitFor()
  })

  await check(report, 'no element or attribute from a message is active', async () => {
    const bad = await timeline.evaluate((root) => {
      const found = []
      const banned = 'script, iframe, object, embed, svg, math, img, style, link, meta, base, form, input, textarea, select, details, video, audio, source'
      for (const el of root.querySelectorAll('.text ' + banned.split(', ').join(', .text '))) found.push(`<${el.tagName.toLowerCase()}>`)
      for (const el of root.querySelectorAll('*')) {
        for (const a of el.attributes) if (/^on/i.test(a.name) || (a.name === 'style' && el.closest('.text')) || /^(src|srcdoc|formaction|action|xlink:href)$/i.test(a.name)) found.push(`${el.tagName.toLowerCase()}[${a.name}]`)
      }
      return found
    })
    if (bad.length) throw new Error(bad.join(', '))
  })

  await check(report, 'links keep only http(s) and mailto targets and open without an opener', async () => {
    const links = await timeline.locator('.text a').evaluateAll((as) => as.map((a) => [a.getAttribute('href'), a.getAttribute('target'), a.getAttribute('rel')]))
    const wrong = links.filter(([href, target, rel]) => !/^(https?:|mailto:|#)/i.test(href) || (!href.startsWith('#') && (target !== '_blank' || !/noopener/.test(rel) || !/noreferrer/.test(rel))))
    if (wrong.length) throw new Error(JSON.stringify(wrong))
    if (!links.some(([h]) => h === 'https://example.com/nested')) throw new Error(`links: ${JSON.stringify(links)}`)
    const everywhere = await p.locator('a[href^="javascript:" i], a[href^="data:" i], a[href^="vbscript:" i]').count()
    if (everywhere) throw new Error(`${everywhere} dangerous links`)
  })

  await check(report, 'firing every event on every element runs nothing', async () => {
    await timeline.evaluate((root) => {
      for (const el of root.querySelectorAll('*')) {
        for (const type of ['mouseover', 'mouseenter', 'focus', 'toggle', 'load', 'error', 'animationstart']) el.dispatchEvent(new Event(type))
      }
    })
    await p.waitForTimeout(300) // let a planted timer or image error fire if there were one
    const pwned = await p.evaluate(() => window.__pwned)
    if (pwned !== undefined) throw new Error(`payload ${pwned} ran`)
  })

  await check(report, 'no remote image was fetched and the CSP reported nothing', async () => {
    if (fetched.length) throw new Error(`fetched ${fetched.join(', ')}`)
    const seen = await p.evaluate(() => window.__csp)
    if (seen.length) throw new Error(seen.join('; '))
  })
} finally {
  finish(report)
  await close()
}
