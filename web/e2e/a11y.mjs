// Accessible and phone-sized (issue 29 item 9): axe-core finds no serious or critical
// violation on the sign-in, channel, thread, inbox and settings views (light and dark); at
// 390×844 message actions appear on tap, not under every message, and every tap target is at
// least 32 px each way (words inside a message's text excepted, as WCAG 2.5.8 allows).
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { launch, person, article, scenario, check, finish, PHONE } from './lib.mjs'

const require = createRequire(import.meta.url)
// Evaluated through the DevTools protocol: the page's CSP (script-src 'self') stays as served.
const AXE = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8')
const { config, report } = scenario()
const { browser, close } = await launch()
report.numbers.violations = {}

async function audit(p, view) {
  if (!(await p.evaluate(() => !!window.axe))) await p.evaluate(AXE)
  const result = await p.evaluate(() => window.axe.run(document, { resultTypes: ['violations'] }))
  const bad = result.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical')
  report.numbers.violations[view] = bad.map((v) => `${v.id} (${v.impact}): ${v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join(', ')}`)
  if (bad.length) throw new Error(`${view}: ${report.numbers.violations[view].join('; ')}`)
}

async function signIn(p) {
  await p.goto(config.url + '#' + config.general)
  await p.getByRole('textbox', { name: 'Secret key' }).fill(config.secret)
  await p.getByRole('button', { name: 'Sign in' }).click()
  await p.getByRole('heading', { name: '# general' }).waitFor()
  await article(p, 'a question').waitFor()
}

async function views(p, suffix) {
  await check(report, `axe: channel${suffix}`, () => audit(p, `channel${suffix}`))
  await check(report, `axe: thread${suffix}`, async () => {
    await article(p, 'a question').getByRole('button', { name: '1 reply' }).click()
    await p.getByRole('complementary', { name: 'Thread' }).getByRole('article').nth(1).waitFor()
    try {
      await audit(p, `thread${suffix}`)
    } finally {
      await p.getByRole('button', { name: 'Close thread' }).click()
    }
  })
  await check(report, `axe: inbox${suffix}`, async () => {
    await p.getByRole('navigation', { name: 'Channels' }).getByRole('link', { name: 'Inbox', exact: true }).click()
    await p.getByRole('region', { name: 'Inbox' }).getByRole('article').first().waitFor()
    try {
      await audit(p, `inbox${suffix}`)
    } finally {
      await p.getByRole('button', { name: 'Close inbox' }).click()
    }
  })
  await check(report, `axe: settings${suffix}`, async () => {
    await p.getByRole('button', { name: 'Channel settings' }).click()
    await p.getByRole('dialog', { name: 'Channel settings' }).waitFor()
    try {
      await audit(p, `settings${suffix}`)
    } finally {
      await p.getByRole('dialog', { name: 'Channel settings' }).getByRole('button', { name: 'Cancel' }).click()
    }
  })
}

try {
  const { page: p } = await person(browser, report, 'alice')
  await p.goto(config.url)
  await p.getByRole('textbox', { name: 'Secret key' }).waitFor()
  await check(report, 'axe: sign-in', () => audit(p, 'sign-in'))
  await signIn(p)
  await views(p, '')
  await p.getByRole('switch', { name: 'Dark theme' }).click()
  await views(p, ' (dark)')

  const { page: m } = await person(browser, report, 'alice on a phone', PHONE)
  await signIn(m)
  await check(report, 'at 390×844 message actions show on tap only', async () => {
    const msg = article(m, 'a question')
    const reply = msg.getByRole('button', { name: 'Reply in thread' })
    if (await reply.isVisible()) throw new Error('actions show under every message')
    await msg.locator('.text').click()
    await reply.waitFor()
  })
  await check(report, 'at 390×844 every tap target is at least 32 px', async () => {
    const small = await m.evaluate(() => {
      const out = []
      for (const el of document.querySelectorAll('button, a[href], input, select, textarea, [role=option], [role=switch]')) {
        if (el.closest('.text')) continue // words inside a message's text: inline, exempt
        const r = el.getBoundingClientRect()
        const s = getComputedStyle(el)
        if (!r.width || !r.height || s.visibility === 'hidden' || s.display === 'none' || Number(s.opacity) === 0) continue
        if (r.width < 32 || r.height < 32) out.push(`${el.tagName.toLowerCase()} "${(el.getAttribute('aria-label') || el.textContent || '').trim().slice(0, 30)}" ${Math.round(r.width)}×${Math.round(r.height)}`)
      }
      return out
    })
    report.numbers.smallTargets = small
    if (small.length) throw new Error(small.slice(0, 8).join('; '))
  })
} finally {
  finish(report)
  await close()
}
