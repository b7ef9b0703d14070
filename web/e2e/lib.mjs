// Shared helpers for the browser scenarios that tests/web/*.py run: Debian's Chromium through
// playwright-core, one fresh profile per run, and the checks each scenario reports as JSON.
import os from 'node:os'
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { chromium } from 'playwright-core'

export const CHROMIUM = process.env.BUZZ_CHROMIUM || '/usr/bin/chromium'
// Waits are hang detectors, scaled by the load as the Python side's (docs/decisions.md 270):
// with L runnable processes on N cores a page gets about N/L of a core. Read at each use.
export function slowdown() {
  return Math.max(1, os.loadavg()[0] / Math.max(1, os.cpus().length))
}
export const scaled = (ms) => Math.round(ms * slowdown())

export const DESKTOP = { width: 1280, height: 800 }
export const PHONE = { width: 390, height: 844 }

// Playwright adds --headless and a fresh temporary --user-data-dir of its own to each launch.
const ARGS = [
  '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
  '--disable-dev-shm-usage',
]

/** The scenario's JSON config (argv[2]) and a report that is printed as the last line. */
export function scenario() {
  const config = JSON.parse(process.argv[2])
  const report = { checks: {}, numbers: {}, errors: [], console: [] }
  return { config, report }
}

export async function launch(extraArgs = []) {
  const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: [...ARGS, ...extraArgs] })
  return { browser, close: () => browser.close().catch(() => {}) }
}

/** A person: their own context (own localStorage) and page, watching for alerts and errors. */
export async function person(browser, report, name, viewport = DESKTOP, init, options = {}) {
  const context = await browser.newContext({ viewport, ...options })
  if (init) await init(context)
  const page = await context.newPage()
  page.setDefaultTimeout(scaled(15000))
  page.on('dialog', async (d) => {
    report.errors.push(`${name}: unexpected ${d.type()} dialog: ${d.message()}`)
    await d.dismiss()
  })
  page.on('pageerror', (e) => report.errors.push(`${name}: page error: ${e.message}`))
  page.on('console', (m) => {
    if (m.type() === 'error') report.console.push(`${name}: ${m.text()}`)
  })
  return { context, page, name }
}

export async function signIn(page, url, secret) {
  await page.goto(url)
  await page.getByRole('textbox', { name: 'Secret key' }).fill(secret)
  await page.getByRole('button', { name: 'Sign in' }).click()
  await page.getByRole('navigation', { name: 'Channels' }).waitFor()
}

export const log = (page) => page.getByRole('log', { name: 'Messages' })
export const article = (page, text) => log(page).getByRole('article').filter({ hasText: text })

export async function send(page, text) {
  const box = page.getByRole('textbox', { name: 'Message', exact: true })
  await box.fill(text)
  await page.getByRole('button', { name: 'Send', exact: true }).click()
  await article(page, text).first().waitFor()
}

export async function openChannel(page, name) {
  await page.getByRole('navigation', { name: 'Channels' }).getByRole('link', { name, exact: true }).click()
  await page.getByRole('heading', { name: `# ${name}` }).waitFor()
}

/** Run `fn`; record `name` true, or false with the error text, and go on. */
export async function check(report, name, fn) {
  try {
    const started = Date.now()
    await fn()
    report.checks[name] = true
    process.stderr.write(`ok   ${name} (${Date.now() - started} ms)\n`)
  } catch (e) {
    process.stderr.write(`FAIL ${name}: ${e}\n`)
    report.checks[name] = false
    report.errors.push(`${name}: ${String(e && e.message ? e.message : e).split('\n')[0]}`)
  }
}

export function finish(report) {
  process.stdout.write('\n' + JSON.stringify(report) + '\n')
  if (stdinLines) stopListening()
}

// Steps shared with a test that runs beside the page (tests/web/browser.py LiveScenario): the
// scenario prints {"step": name, …} when it gets somewhere and waits for {"go": name, …} on
// stdin, so each side waits on what the other did instead of on a clock.
let stdinLines = null
const goes = new Map()
const waiters = new Map()

export function reached(step, data = {}) {
  process.stdout.write(JSON.stringify({ step, ...data }) + '\n')
}

export async function until(name) {
  if (!stdinLines) {
    const { createInterface } = await import('node:readline')
    stdinLines = createInterface({ input: process.stdin })
    stdinLines.on('line', (line) => {
      let msg
      try {
        msg = JSON.parse(line)
      } catch {
        return
      }
      if (typeof msg?.go !== 'string') return
      goes.set(msg.go, msg)
      waiters.get(msg.go)?.(msg)
    })
  }
  if (goes.has(name)) return goes.get(name)
  return new Promise((resolve) => waiters.set(name, resolve))
}

export function stopListening() {
  stdinLines?.close()
  process.stdin.destroy()
}

// axe-core through the DevTools protocol (the page's CSP stays as served): serious or critical
// violations fail the check, named with their first nodes.
const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8')
export async function audit(page, view) {
  if (!(await page.evaluate(() => !!window.axe))) await page.evaluate(AXE)
  const result = await page.evaluate(() => window.axe.run(document, { resultTypes: ['violations'] }))
  const bad = result.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical')
  if (bad.length) throw new Error(`${view}: ${bad.map((v) => `${v.id}: ${v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join(', ')}`).join('; ')}`)
}

/** `audit` in the light theme, then the dark one (the switch is put back either way). */
export async function auditLightAndDark(page, view) {
  await audit(page, view)
  await page.getByRole('switch', { name: 'Dark theme' }).click()
  try {
    await audit(page, `${view}, dark`)
  } finally {
    await page.getByRole('switch', { name: 'Dark theme' }).click()
  }
}

/** Two animation frames: what a scroll or a render set in motion has been laid out. */
export const frames = (page) => page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))))

// The timeline is windowed (decision 136): only messages near the view are in the DOM.

/** Scroll the timeline up until the message with `text` is in the DOM, then to it. */
export async function reveal(page, text) {
  for (let i = 0; i < 400 && !(await article(page, text).count()); i++) {
    await log(page).evaluate((el) => { el.scrollTop = Math.max(0, el.scrollTop - el.clientHeight / 2) })
    await frames(page)
  }
  await article(page, text).first().scrollIntoViewIfNeeded()
  await frames(page)
}

/** The texts of `selector` in the timeline from its top to where the view is, in page order,
 * gathered while scrolling up to the top (what is loaded; older pages load on the way). */
export async function gatherUp(page, selector) {
  const out = []
  for (let i = 0; i < 400; i++) {
    const now = await log(page).locator(selector).allTextContents()
    const fresh = now.filter((t) => !out.includes(t))
    out.unshift(...fresh)
    const top = await log(page).evaluate((el) => el.scrollTop)
    if (top === 0 && !(await log(page).getAttribute('aria-busy'))?.includes('true')) break
    await log(page).evaluate((el) => { el.scrollTop = Math.max(0, el.scrollTop - el.clientHeight / 2) })
    await frames(page)
  }
  return out
}

/** Wait until a message that arrives live is in the timeline. The timeline is windowed, so a
 * view left up at the first unread (under "New messages") holds a new message below the window
 * and offers "Jump to latest" instead, as a person would see it: the wait takes that button. */
export async function arrives(page, text, ms = 15000) {
  const end = Date.now() + scaled(ms)
  const jump = page.getByRole('button', { name: 'Jump to latest' })
  while (Date.now() < end) {
    if (await article(page, text).count()) return article(page, text).first().waitFor({ timeout: scaled(ms) })
    if (await jump.isVisible().catch(() => false)) await jump.click().catch(() => {})
    await page.waitForTimeout(100)
  }
  throw new Error(`"${text}" did not arrive within ${scaled(ms)} ms`)
}
