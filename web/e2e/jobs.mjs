// Jobs in the browser (issue 27 items 4, 5, 7; jobs spec §9, §13): Ask agent from the composer
// and from a message's menu, job cards whose status follows a real harness live (accepted,
// working, completed; cancelled by Stop), a relay refusal on the card, Stop on an agent's
// working message, and the Directory where the owner changes whom the agent answers
// (tests/web/test_jobs.py runs the relay, the harness and the other side of each step).
import { auditLightAndDark, launch, person, signIn, scenario, check, finish, openChannel, article, send, reached, until, PHONE, DESKTOP } from './lib.mjs'

/** Alice's relay socket drops the 43006 of the jobs named in `held` on their way to the page:
 * her card stays open while the relay already has the job failed (for the refusal). */
async function gate(context, held) {
  await context.routeWebSocket((u) => u.pathname === '/', (ws) => {
    const server = ws.connectToServer()
    ws.onMessage((m) => server.send(m))
    server.onMessage((m) => {
      try {
        const msg = typeof m === 'string' ? JSON.parse(m) : null
        const e = msg?.[0] === 'EVENT' ? msg[2] : null
        if (e?.kind === 43006 && e.tags.some((t) => t[0] === 'e' && held.has(t[1]))) return
      } catch {
        /* not JSON: pass it on */
      }
      ws.send(m)
    })
  })
}

/** Every text the job card's status shows, in order, from the moment this is installed. */
async function watchBadges(page) {
  await page.evaluate(() => {
    window.__badges = {}
    const look = () => {
      for (const card of document.querySelectorAll('article.job-card')) {
        const name = card.getAttribute('aria-label')
        const text = card.querySelector('[role=status]')?.textContent ?? ''
        const seen = (window.__badges[name] ??= [])
        if (seen[seen.length - 1] !== text) seen.push(text)
      }
    }
    new MutationObserver(look).observe(document.body, { subtree: true, childList: true, characterData: true })
    look()
  })
}
const badges = (page, name) => page.evaluate((n) => window.__badges[n] ?? [], name)

const { config, report } = scenario()
const shot = (page, name) => page.screenshot({ path: `${config.images}/${name}.png` })
const held = new Set()
const { browser, close } = await launch()
try {
  const alice = (await person(browser, report, 'alice', DESKTOP, (ctx) => gate(ctx, held))).page
  const bob = (await person(browser, report, 'bob')).page
  await signIn(alice, config.url, config.alice)
  await signIn(bob, config.url, config.bob)
  await openChannel(alice, 'general')
  await openChannel(bob, 'general')
  await watchBadges(alice)
  await watchBadges(bob)
  const card = (page, outcome) => page.getByRole('article', { name: `Job: ${outcome}`, exact: true })
  const status = (page, outcome) => card(page, outcome).getByRole('status')
  const ask = async (agent, outcome) => {
    const dialog = alice.getByRole('dialog', { name: 'Ask agent' })
    await dialog.getByRole('combobox', { name: 'Agent' }).selectOption({ label: `${agent} (agent of Alice)` })
    await dialog.getByRole('textbox', { name: 'Requested outcome' }).fill(outcome)
    await dialog.getByRole('button', { name: 'Ask', exact: true }).click()
    await dialog.waitFor({ state: 'detached' })
  }

  await check(report, 'a result from elsewhere: partial, its links safe, other references as text', async () => {
    const c = card(alice, 'Summarise the incident')
    await status(alice, 'Summarise the incident').filter({ hasText: /^partial$/ }).waitFor()
    await c.getByText('Half of it: the timeline is written.').waitFor()
    const link = c.getByRole('list', { name: 'Artifacts' }).getByRole('link', { name: 'the report' })
    if ((await link.getAttribute('href')) !== 'https://example.com/report?id=1') throw new Error('the link is not the reference')
    if (!/noopener/.test((await link.getAttribute('rel')) ?? '')) throw new Error('the link may reach back to the page')
    await c.locator('code').filter({ hasText: /^0123456789abcdef0123456789abcdef01234567$/ }).waitFor()
    await c.locator('code').filter({ hasText: /^fix\/incident$/ }).waitFor()
    if ((await c.getByRole('link').count()) !== 1) throw new Error('a reference that is not a URL became a link')
    await c.getByRole('list', { name: 'Verification' }).getByRole('listitem').filter({ hasText: 'not run' }).filter({ hasText: 'unit tests' }).waitFor()
    await c.getByText("waiting for the night's logs").waitFor()
    await c.getByText('Bob asked Idlebot').waitFor()
  })
  await check(report, 'Ask agent in the composer opens the dialog and publishes a job card', async () => {
    await alice.locator('form.composer').getByRole('button', { name: 'Ask agent' }).click()
    await alice.getByRole('dialog', { name: 'Ask agent' }).waitFor()
    await ask('Rulesbot', 'handoff')
    await card(alice, 'handoff').waitFor()
  })
  await check(report, 'the card moves through accepted, working and completed live (both members)', async () => {
    await status(alice, 'handoff').filter({ hasText: /^completed$/ }).waitFor({ timeout: 60000 })
    await status(bob, 'handoff').filter({ hasText: /^completed$/ }).waitFor()
    for (const [who, page] of [['alice', alice], ['bob', bob]]) {
      const seen = await badges(page, 'Job: handoff')
      const order = ['accepted', 'working', 'completed'].map((s) => seen.indexOf(s))
      if (order.some((i) => i < 0) || order[0] > order[1] || order[1] > order[2]) throw new Error(`${who} saw ${seen.join(' → ')}`)
    }
  })
  await check(report, 'the result shows its outcome, artifact and verification', async () => {
    const c = card(alice, 'handoff')
    await c.getByText('wrote OUTBOX/result.txt').waitFor()
    await c.getByRole('list', { name: 'Artifacts' }).getByText('OUTBOX/result.txt', { exact: true }).waitFor()
    await c.getByRole('list', { name: 'Verification' }).getByRole('listitem').filter({ hasText: 'file written' }).filter({ hasText: 'passed' }).waitFor()
    if (await c.getByRole('button', { name: 'Stop' }).count()) throw new Error('a finished job offers Stop')
  })
  await check(report, 'a working job shows its progress; Stop (requester only) publishes 43005 and it ends cancelled', async () => {
    await alice.locator('form.composer').getByRole('button', { name: 'Ask agent' }).click()
    await ask('Rulesbot', 'sleep 120')
    await status(alice, 'sleep 120').filter({ hasText: /^working$/ }).waitFor({ timeout: 60000 })
    await card(alice, 'sleep 120').getByText(/^Working: /).waitFor()
    await card(alice, 'sleep 120').getByRole('list', { name: 'Plan' }).getByRole('checkbox', { name: 'Read the request (completed)' }).waitFor()
    await status(bob, 'sleep 120').filter({ hasText: /^working$/ }).waitFor()
    if (await card(bob, 'sleep 120').getByRole('button', { name: 'Stop' }).count()) throw new Error('Bob (a plain member) is offered Stop')
    await shot(alice, 'job-cards-desktop')
    await card(alice, 'sleep 120').getByRole('button', { name: 'Stop' }).click()
    await status(alice, 'sleep 120').filter({ hasText: /^cancelled$/ }).waitFor()
    await card(alice, 'sleep 120').getByText('Stopped by Alice').waitFor()
    await status(bob, 'sleep 120').filter({ hasText: /^cancelled$/ }).waitFor()
  })
  await check(report, 'axe: job cards, light and dark', () => auditLightAndDark(alice, 'job cards'))
  await check(report, 'screenshots: job cards at both widths', async () => {
    await alice.setViewportSize(PHONE)
    await card(alice, 'sleep 120').scrollIntoViewIfNeeded()
    await shot(alice, 'job-cards-phone')
    await alice.setViewportSize(DESKTOP)
  })

  await check(report, 'Ask agent from a message menu; hostile text in the outcome stays text', async () => {
    const msg = article(alice, config.bobMessage).first()
    await msg.click()
    await msg.hover()
    await msg.getByRole('button', { name: 'Ask agent' }).click()
    const dialog = alice.getByRole('dialog', { name: 'Ask agent' })
    await dialog.getByText(config.bobMessage).waitFor()
    await ask('Idlebot', config.hostile)
    await card(alice, config.hostile).waitFor()
    await status(alice, config.hostile).filter({ hasText: /^requested$/ }).waitFor()
    await card(alice, config.hostile).locator('.job-title').getByText(config.hostile, { exact: true }).waitFor()
    if (await card(alice, config.hostile).locator('img').count()) throw new Error('the outcome was rendered as HTML')
    if (await alice.evaluate(() => window.__pwned)) throw new Error('the outcome ran script')
  })
  // Each step is announced whatever happened before it, so the test on the other side never
  // waits for a step that will not come.
  const idle = await card(alice, config.hostile).getAttribute('data-id', { timeout: 1000 }).catch(() => null)
  if (idle) held.add(idle)
  reached('idle job', { id: idle })
  await until('failed')
  await check(report, 'a refusal of the relay shows on the card', async () => {
    await status(bob, config.hostile).filter({ hasText: /^failed$/ }).waitFor()
    await card(bob, config.hostile).getByText('unavailable').waitFor()
    await card(alice, config.hostile).getByRole('button', { name: 'Stop' }).click()
    await card(alice, config.hostile).getByRole('alert').filter({ hasText: 'invalid: job is failed' }).waitFor()
  })

  await check(report, 'an agent working on a message: Stop for its owner sends !cancel and the turn ends', async () => {
    await send(alice, '@Rulesbot sleep 120')
    const mine = article(alice, '@Rulesbot sleep 120').first()
    const theirs = article(bob, '@Rulesbot sleep 120').first()
    await mine.getByRole('button', { name: 'Stop' }).waitFor({ timeout: 60000 })
    await theirs.getByText('Rulesbot is working on this').waitFor()
    if (await theirs.getByRole('button', { name: 'Stop' }).count()) throw new Error('Bob (not the owner) is offered Stop')
    await shot(alice, 'working-message-desktop')
    await mine.getByRole('button', { name: 'Stop' }).click()
    await mine.getByRole('button', { name: 'Stop' }).waitFor({ state: 'detached', timeout: 60000 })
    await theirs.getByText('Rulesbot is working on this').waitFor({ state: 'detached' })
  })
  reached('stopped')

  const dirPanel = (page) => page.getByRole('complementary', { name: 'Directory' })
  const agentRow = (page, name) => dirPanel(page).getByRole('list', { name: 'Agents' }).getByRole('listitem', { name, exact: true })
  await check(report, 'Directory: agents with owner, persona, answers and status', async () => {
    await alice.getByRole('navigation', { name: 'Channels' }).getByRole('link', { name: 'Directory' }).click()
    const row = agentRow(alice, 'Rulesbot')
    await row.getByRole('combobox', { name: 'Persona' }).locator('option:checked').filter({ hasText: /^Code reviewer$/ }).waitFor({ state: 'attached' })
    await row.locator('dd').filter({ hasText: /^Alice$/ }).waitFor()
    await row.locator('dd.dir-status').filter({ hasText: /^(idle|working in #general.*)$/ }).waitFor()
    if ((await row.getByRole('combobox', { name: 'Answers' }).inputValue()) !== 'owner-only') throw new Error('Answers is not owner-only')
    await dirPanel(alice).getByRole('list', { name: 'People' }).getByRole('listitem', { name: 'Bob', exact: true }).waitFor()
  })
  await check(report, 'the owner changes Answers; others see it without the control', async () => {
    await bob.getByRole('navigation', { name: 'Channels' }).getByRole('link', { name: 'Directory' }).click()
    await agentRow(bob, 'Rulesbot').locator('dd').filter({ hasText: /^owner-only$/ }).waitFor()
    await agentRow(bob, 'Rulesbot').locator('dd').filter({ hasText: /^Code reviewer$/ }).waitFor()
    if (await agentRow(bob, 'Rulesbot').getByRole('combobox').count()) throw new Error('Bob is offered the owner’s controls')
    await agentRow(alice, 'Rulesbot').getByRole('combobox', { name: 'Answers' }).selectOption('members')
    await agentRow(bob, 'Rulesbot').locator('dd').filter({ hasText: /^members$/ }).waitFor()
  })
  reached('answers members')
  await until('answered')
  await check(report, 'the requester stops their own request from the message; the Directory shows it working', async () => {
    await send(bob, '@Rulesbot sleep 121')
    const theirs = article(bob, '@Rulesbot sleep 121').first()
    const owners = article(alice, '@Rulesbot sleep 121').first()
    await theirs.getByRole('button', { name: 'Stop' }).waitFor({ timeout: 60000 })
    await owners.getByRole('button', { name: 'Stop' }).waitFor()
    await agentRow(alice, 'Rulesbot').locator('dd.dir-status').filter({ hasText: /^working in #general on “sleep 121”$/ }).waitFor({ timeout: 30000 })
    await theirs.getByRole('button', { name: 'Stop' }).click()
    await theirs.getByText('Rulesbot is working on this').waitFor({ state: 'detached', timeout: 60000 })
    await agentRow(alice, 'Rulesbot').locator('dd.dir-status').filter({ hasText: /^idle$/ }).waitFor({ timeout: 30000 })
  })
  reached('requester stopped')
  await until('eng working')
  await check(report, 'working in a private channel shows only to its readers', async () => {
    await agentRow(alice, 'Rulesbot').locator('dd.dir-status').filter({ hasText: /^working in #eng on “sleep 122”$/ }).waitFor()
    await agentRow(bob, 'Rulesbot').locator('dd.dir-status').filter({ hasText: /^idle$/ }).waitFor()
    if (await dirPanel(bob).getByText('#eng').count()) throw new Error('Bob sees the private channel in the directory')
  })
  await check(report, 'axe: the Directory, light and dark', () => auditLightAndDark(alice, 'directory'))
  await check(report, 'screenshots: the Directory at both widths', async () => {
    await shot(alice, 'directory-desktop')
    await alice.setViewportSize(PHONE)
    await agentRow(alice, 'Rulesbot').scrollIntoViewIfNeeded()
    await shot(alice, 'directory-phone')
    await alice.setViewportSize(DESKTOP)
  })
  reached('eng seen')
  await until('eng stale')
  await check(report, 'a snapshot older than 600 s is not shown as working', async () => {
    await agentRow(alice, 'Rulesbot').locator('dd.dir-status').filter({ hasText: /^idle$/ }).waitFor()
  })
  await check(report, 'the owner sets the parallelism and an allowlist with one person', async () => {
    const row = agentRow(alice, 'Rulesbot')
    const n = row.getByRole('spinbutton', { name: 'Parallelism' })
    await n.fill('2')
    await n.blur()
    // Each control is disabled while the row's record is being published: the next one waits.
    await row.getByRole('combobox', { name: 'Answers' }).selectOption('allowlist')
    const bobBox = row.getByRole('group', { name: 'Allowlist' }).getByRole('checkbox', { name: 'Bob' })
    await bobBox.click() // checked once the record is published (a controlled box: not .check())
    await row.getByText('(1 person)').waitFor()
    await agentRow(bob, 'Rulesbot').locator('dd').filter({ hasText: /^allowlist \(1 person\)$/ }).waitFor()
  })
  await check(report, 'the owner picks the persona among their own; others see its name', async () => {
    const pick = agentRow(alice, 'Rulesbot').getByRole('combobox', { name: 'Persona' })
    const writer = pick.locator('option').filter({ hasText: /^Release notes writer$/ })
    await writer.waitFor({ state: 'attached' })
    if (await pick.locator('option').filter({ hasText: /^Private drafts \(not shared: the agent cannot read it\)$/ }).count() !== 1) throw new Error('not every persona of mine is offered')
    await pick.selectOption('writer')
    await agentRow(bob, 'Rulesbot').locator('dd').filter({ hasText: /^Release notes writer$/ }).waitFor()
    await pick.locator('option:checked').filter({ hasText: /^Release notes writer$/ }).waitFor({ state: 'attached' })
  })
  await check(report, 'the Persona control is a short choice with its hint on a line under it', async () => {
    const pick = agentRow(alice, 'Rulesbot').getByRole('combobox', { name: 'Persona' })
    const hint = await pick.evaluate((el) => {
      const h = document.getElementById(el.getAttribute('aria-describedby') ?? '')
      return h && { text: h.textContent, top: h.getBoundingClientRect().top, bottom: el.getBoundingClientRect().bottom }
    })
    if (!hint) throw new Error('the Persona control has no hint it is described by')
    if (!/--persona/.test(hint.text)) throw new Error(`the hint reads ${JSON.stringify(hint.text)}`)
    if (hint.top < hint.bottom) throw new Error(`the hint starts at ${hint.top} px, beside the control (its bottom at ${hint.bottom} px)`)
  })
} catch (e) {
  report.errors.push(`scenario: ${e && e.message ? e.message : e}`)
} finally {
  await close()
  finish(report)
}
