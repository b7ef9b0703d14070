// Agents and engram memory (issue 12, item 4): the owner sees the agent's channels, last
// turns and memory (decrypted here), unlocks editing with the agent's key, edits core,
// adds an entry and deletes one; `buzz mem` reads the result (tests/web/test_memory.py).
import { launch, person, signIn, scenario, check, finish, PHONE, DESKTOP } from './lib.mjs'

const { config, report } = scenario()
const shot = (page, name) => page.screenshot({ path: `${config.images}/${name}.png` })
const { browser, close } = await launch()
try {
  const p = (await person(browser, report, 'owner')).page
  await signIn(p, config.url, config.owner)
  const panel = p.getByRole('complementary', { name: 'My agents' })
  const memory = panel.getByRole('list', { name: 'Memory entries' })
  const text = panel.getByRole('textbox', { name: 'Memory text' })
  await check(report, 'my agent, its channels, turns and memory written by buzz mem', async () => {
    await p.getByRole('button', { name: 'My agents' }).click()
    await panel.getByRole('button', { name: 'Rulesbot' }).click()
    await panel.getByText('general', { exact: true }).waitFor()
    await panel.getByRole('cell', { name: 'test-model' }).waitFor()
    for (const slug of ['core', 'mem/old', 'mem/project/plan']) await memory.getByRole('button', { name: slug, exact: true }).waitFor()
    await memory.getByRole('button', { name: 'mem/project/plan', exact: true }).click()
    const value = await text.inputValue()
    if (value !== config.planText) throw new Error(`read ${JSON.stringify(value)}`)
  })
  await check(report, 'editing needs the agent key, not another one', async () => {
    await panel.getByLabel('Agent secret key').fill(config.otherSecret)
    await panel.getByRole('button', { name: 'Unlock editing' }).click()
    await panel.getByRole('alert').filter({ hasText: 'another identity' }).waitFor()
    await panel.getByLabel('Agent secret key').fill(config.agentSecret)
    await panel.getByRole('button', { name: 'Unlock editing' }).click()
    await panel.getByRole('textbox', { name: 'New memory slug' }).waitFor()
  })
  await check(report, 'core is edited in the browser', async () => {
    await memory.getByRole('button', { name: 'core', exact: true }).click()
    await text.fill(config.coreText)
    await panel.getByRole('button', { name: 'Save memory' }).click()
    await p.waitForFunction(() => !document.querySelector('[role=alert]'))
    if ((await text.inputValue()) !== config.coreText) throw new Error('the editor lost the text')
  })
  await check(report, 'a new entry is added', async () => {
    await panel.getByRole('textbox', { name: 'New memory slug' }).fill('browser/note')
    await panel.getByRole('button', { name: 'Add memory' }).click()
    await panel.getByRole('heading', { name: 'mem/browser/note' }).waitFor()
    await text.fill(config.noteText)
    await panel.getByRole('button', { name: 'Save memory' }).click()
    await memory.getByRole('button', { name: 'mem/browser/note', exact: true }).waitFor()
  })
  await check(report, 'an entry is deleted', async () => {
    await memory.getByRole('button', { name: 'mem/old', exact: true }).click()
    await panel.getByRole('button', { name: 'Delete memory' }).click()
    await memory.getByRole('button', { name: 'mem/old', exact: true }).waitFor({ state: 'detached' })
  })
  await check(report, 'screenshots: agent memory at both widths', async () => {
    await memory.getByRole('button', { name: 'core', exact: true }).click()
    await shot(p, 'agent-memory-desktop')
    await p.setViewportSize(PHONE)
    await shot(p, 'agent-memory-phone')
    await p.setViewportSize(DESKTOP)
  })
} finally {
  finish(report)
  await close()
}
