// Workflows in the browser (issue 28 items 9, 10): the channel's Workflows panel — a definition
// with an error shown inline at its line, fixed and saved, Enabled switched off and on, Run now
// and the run with its steps; then an approval workflow whose card in the timeline is approved
// and the run completes (tests/web/test_workflows.py).
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { launch, person, signIn, scenario, check, finish, openChannel, article, PHONE, DESKTOP } from './lib.mjs'

// axe-core through the DevTools protocol, as a11y.mjs does: the page's CSP stays as served.
const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8')
async function audit(page, view) {
  if (!(await page.evaluate(() => !!window.axe))) await page.evaluate(AXE)
  const result = await page.evaluate(() => window.axe.run(document, { resultTypes: ['violations'] }))
  const bad = result.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical')
  if (bad.length) throw new Error(`${view}: ${bad.map((v) => `${v.id}: ${v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join(', ')}`).join('; ')}`)
}

const { config, report } = scenario()
const shot = (page, name) => page.screenshot({ path: `${config.images}/${name}.png` })
const { browser, close } = await launch()
try {
  const p = (await person(browser, report, 'alice')).page
  await signIn(p, config.url, config.alice)
  await openChannel(p, 'general')
  const panel = p.getByRole('region', { name: 'Workflows' })
  const yaml = panel.getByRole('textbox', { name: 'Workflow YAML' })
  const row = (name) => panel.getByRole('listitem', { name })

  await check(report, 'a definition with an error shows it inline at its line (screenshot)', async () => {
    await p.getByRole('button', { name: 'Workflows', exact: true }).click()
    await panel.getByText('No workflows in this channel yet.').waitFor()
    await panel.getByRole('button', { name: 'New workflow' }).click()
    await yaml.fill(config.badYaml)
    await panel.getByRole('button', { name: 'Save workflow' }).click()
    const problem = panel.getByRole('list', { name: 'Validation' }).getByRole('listitem').first()
    await problem.filter({ hasText: 'timeout_secs' }).filter({ hasText: 'line 9' }).waitFor()
    if ((await yaml.getAttribute('aria-invalid')) !== 'true') throw new Error('the editor is not marked invalid')
    if (await row('Stand-up reminder').count()) throw new Error('an invalid definition was saved')
    await shot(p, 'workflow-editor-desktop')
  })
  await check(report, 'fixed and saved, it is listed with its schedule', async () => {
    await yaml.fill(config.goodYaml)
    await panel.getByRole('list', { name: 'Validation' }).getByRole('listitem').first().waitFor({ state: 'detached' })
    await panel.getByRole('button', { name: 'Save workflow' }).click()
    await row('Stand-up reminder').getByText('on a schedule, next').waitFor()
  })
  await check(report, 'the Enabled switch disables and enables it', async () => {
    const sw = row('Stand-up reminder').getByRole('switch', { name: 'Enabled' })
    await p.waitForFunction(() => true)
    if ((await sw.getAttribute('aria-checked')) !== 'true') throw new Error('a new workflow is not enabled')
    await sw.click()
    await row('Stand-up reminder').locator('[role=switch][aria-checked=false]').waitFor()
    await row('Stand-up reminder').getByText('disabled', { exact: true }).waitFor()
    await sw.click()
    await row('Stand-up reminder').locator('[role=switch][aria-checked=true]').waitFor()
  })
  await check(report, 'Run now: the run appears with its steps and the message is posted as the owner\'s workflow', async () => {
    await row('Stand-up reminder').getByRole('button', { name: 'Run now' }).click()
    const run = panel.getByRole('article', { name: /^Run / }).first()
    await run.locator('header .wf-status.s-completed').waitFor()
    await row('Stand-up reminder').getByText('completed', { exact: true }).waitFor()
    await run.getByRole('list', { name: 'Steps' }).getByRole('listitem').filter({ hasText: 'remind' }).filter({ hasText: 'completed' }).waitFor()
    await run.getByText('"sent": true').waitFor()
    const posted = article(p, config.standupText).first()
    await posted.getByRole('button', { name: 'Alice', exact: true }).waitFor()
    await posted.getByText('workflow', { exact: true }).waitFor()
  })
  await check(report, 'axe: the Workflows panel with a run, light and dark', async () => {
    await audit(p, 'workflows')
    await p.getByRole('switch', { name: 'Dark theme' }).click()
    try {
      await audit(p, 'workflows, dark')
    } finally {
      await p.getByRole('switch', { name: 'Dark theme' }).click()
    }
  })
  await check(report, 'screenshots: the Workflows panel at both widths', async () => {
    await shot(p, 'workflows-desktop')
    await p.setViewportSize(PHONE)
    await panel.getByRole('article', { name: /^Run / }).first().scrollIntoViewIfNeeded()
    await shot(p, 'workflows-phone')
    await p.setViewportSize(DESKTOP)
  })
  const card = p.getByRole('article', { name: 'Approval: Deploy approval' })
  await check(report, 'a request_approval workflow puts an approval card in the timeline', async () => {
    await panel.getByRole('button', { name: 'New workflow' }).click()
    await yaml.fill(config.approvalYaml)
    await panel.getByRole('button', { name: 'Save workflow' }).click()
    await panel.getByRole('status').getByText('Webhook secret (shown once)').waitFor()
    await panel.getByRole('status').getByRole('button', { name: 'Done' }).click()
    await row('Deploy approval').getByRole('button', { name: 'Run now' }).click()
    await card.getByText(config.approvalMessage).waitFor()
    await card.getByRole('button', { name: 'Approve' }).waitFor()
    await card.getByRole('button', { name: 'Deny' }).waitFor()
    await panel.getByRole('article', { name: /^Run / }).first().locator('.wf-status.s-waiting_approval', { hasText: 'waiting for approval' }).first().waitFor()
  })
  await check(report, 'axe: an approval card, light and dark', async () => {
    await audit(p, 'approval card')
    await p.getByRole('switch', { name: 'Dark theme' }).click()
    try {
      await audit(p, 'approval card, dark')
    } finally {
      await p.getByRole('switch', { name: 'Dark theme' }).click()
    }
  })
  await check(report, 'screenshots: an approval card at both widths', async () => {
    await p.getByRole('button', { name: 'Close workflows' }).click()
    await card.scrollIntoViewIfNeeded()
    await shot(p, 'workflow-approval-desktop')
    await p.setViewportSize(PHONE)
    await card.scrollIntoViewIfNeeded()
    await shot(p, 'workflow-approval-phone')
    await p.setViewportSize(DESKTOP)
  })
  const b = (await person(browser, report, 'bob')).page
  const bobCard = b.getByRole('article', { name: 'Approval: Deploy approval' })
  await check(report, 'another member sees the card without the buttons', async () => {
    await signIn(b, config.url, config.bob)
    await openChannel(b, 'general')
    await bobCard.getByText('Waiting for a decision.').waitFor()
    if (await bobCard.getByRole('button', { name: 'Approve' }).count()) throw new Error('a non-approver got Approve')
  })
  await check(report, 'Approve: the card shows the decision and the run completes', async () => {
    await card.getByRole('textbox', { name: 'Approval note' }).fill('ship it')
    await card.getByRole('button', { name: 'Approve' }).click()
    await card.getByRole('status').filter({ hasText: 'Approved by Alice' }).filter({ hasText: 'ship it' }).waitFor()
    if (await card.getByRole('button', { name: 'Approve' }).count()) throw new Error('the buttons stayed')
    await article(p, 'Deploying build 42').first().waitFor()
    await p.getByRole('button', { name: 'Workflows', exact: true }).click()
    await row('Deploy approval').getByRole('button', { name: 'Deploy approval' }).click()
    const run = panel.getByRole('article', { name: /^Run / }).first()
    await run.locator('header .wf-status.s-completed').waitFor()
    await run.getByText('"approved": true').waitFor()
  })
  await check(report, "the other member's card shows the decision live", async () => {
    await bobCard.getByRole('status').filter({ hasText: 'Approved by Alice' }).waitFor()
  })
  await check(report, 'the owner deletes a workflow', async () => {
    await row('Stand-up reminder').getByRole('button', { name: 'Delete', exact: true }).click()
    await row('Stand-up reminder').getByRole('button', { name: 'Delete workflow' }).click()
    await row('Stand-up reminder').waitFor({ state: 'detached' })
    await row('Deploy approval').waitFor()
  })
  await check(report, 'Deny: the card shows the denial and the run is cancelled', async () => {
    await row('Deploy approval').getByRole('button', { name: 'Run now' }).click()
    const second = p.getByRole('article', { name: 'Approval: Deploy approval' }).nth(1)
    await second.getByRole('button', { name: 'Deny' }).click()
    await second.getByRole('status').filter({ hasText: 'Denied by Alice' }).waitFor()
    await panel.getByRole('article', { name: /^Run / }).first().locator('header .wf-status.s-cancelled').waitFor()
  })
  await check(report, 'Run with inputs: a JSON object reaches the run as trigger values; anything else is said', async () => {
    await panel.getByRole('button', { name: 'New workflow' }).click()
    await yaml.fill(config.greeterYaml)
    await panel.getByRole('button', { name: 'Save workflow' }).click()
    await panel.getByRole('status').getByRole('button', { name: 'Done' }).click()
    await row('Greeter').getByRole('button', { name: 'Run with inputs' }).click()
    const form = row('Greeter').getByRole('form', { name: 'Inputs for Greeter' })
    await form.getByRole('textbox', { name: 'Run inputs' }).fill('["Ada"]')
    await form.getByRole('button', { name: 'Run', exact: true }).click()
    await form.getByRole('alert').filter({ hasText: 'Inputs must be a JSON object' }).waitFor()
    await form.getByRole('textbox', { name: 'Run inputs' }).fill('{"who": "Ada"}')
    await form.getByRole('button', { name: 'Run', exact: true }).click()
    await form.waitFor({ state: 'detached' })
    await article(p, 'Hello, Ada!').first().waitFor()
  })
  await check(report, "the relay's refusal of a save shows in the editor", async () => {
    const bobPanel = b.getByRole('region', { name: 'Workflows' })
    await b.getByRole('button', { name: 'Workflows', exact: true }).click()
    await bobPanel.getByRole('button', { name: 'New workflow' }).click()
    await bobPanel.getByRole('textbox', { name: 'Workflow YAML' }).fill(config.elevatedYaml)
    await bobPanel.getByRole('button', { name: 'Save workflow' }).click()
    await bobPanel.getByRole('alert').filter({ hasText: 'restricted: ' }).filter({ hasText: 'owner or admin' }).waitFor()
    if (await bobPanel.getByRole('listitem', { name: 'Notify CI' }).count()) throw new Error('the refused definition is listed')
  })
} finally {
  finish(report)
  await close()
}
