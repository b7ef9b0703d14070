// Comfort (issue 29 items 8 and 11): the "Dark theme" switch (and the system's choice when
// none was made), Ctrl/Cmd+K "Jump to" a channel, a person or a DM (named so), Esc closes a
// side panel, ↑ in the empty box edits my last message; in the edit box Enter saves and Esc
// cancels, as in the composer.
import { launch, person, article, scenario, check, finish, send, openChannel, PHONE, signIn as signInAt } from './lib.mjs'

const { config, report } = scenario()
const { browser, close } = await launch()
const signIn = async (p) => {
  await p.goto(config.url + '#' + config.general)
  await p.getByRole('textbox', { name: 'Secret key' }).fill(config.secret)
  await p.getByRole('button', { name: 'Sign in' }).click()
  await p.getByRole('heading', { name: '# general' }).waitFor()
}
const shot = async (page, name) => {
  await page.evaluate(() => document.activeElement?.blur())
  await page.screenshot({ path: `${config.images}/${name}.png` })
}
const theme = (p) => p.evaluate(() => document.documentElement.dataset.theme)
try {
  const { page: p } = await person(browser, report, 'alice')
  await signIn(p)

  await check(report, 'the Dark theme switch turns the page dark and stays so after a reload', async () => {
    const sw = p.getByRole('switch', { name: 'Dark theme' })
    if ((await sw.getAttribute('aria-checked')) !== 'false' || (await theme(p)) !== 'light') throw new Error('not light at first')
    // The state is seen, not only announced: the knob sits elsewhere when on.
    const knob = () => sw.locator('.knob').evaluate((el) => el.getBoundingClientRect().left - el.parentElement.getBoundingClientRect().left)
    const off = await knob()
    await sw.click()
    if ((await sw.getAttribute('aria-checked')) !== 'true' || (await theme(p)) !== 'dark') throw new Error('the switch did nothing')
    await p.waitForFunction(() => !document.getAnimations().length)
    if (!((await knob()) > off + 4)) throw new Error('the switch looks the same on and off')
    const bg = await p.evaluate(() => getComputedStyle(document.querySelector('.main') ?? document.body).backgroundColor)
    await article(p, 'Deploy notes').waitFor()
    await p.getByRole('log', { name: 'Messages' }).getByRole('button', { name: 'Bob', exact: true }).first().waitFor()
    await shot(p, 'dark-desktop')
    await p.reload()
    await signIn(p)
    if ((await theme(p)) !== 'dark') throw new Error('forgotten after a reload')
    report.numbers.darkBackground = bg
    await p.getByRole('switch', { name: 'Dark theme' }).click()
  })

  await check(report, "a message's actions are pointer targets of 24 px at least (WCAG 2.5.8)", async () => {
    const msg = article(p, 'Deploy notes')
    await msg.hover()
    const heights = await msg.locator('.msg-actions button.icon').evaluateAll((els) => els.map((el) => el.getBoundingClientRect().height))
    if (!heights.length || heights.some((h) => h < 24)) throw new Error(`heights ${heights}`)
  })

  await check(report, 'with no choice made, the theme follows the system', async () => {
    const { page: q, context } = await person(browser, report, 'system dark', undefined, undefined, { colorScheme: 'dark' })
    await q.goto(config.url)
    if ((await theme(q)) !== 'dark') throw new Error('a dark system shows a light page')
    await context.close()
    const { page: m } = await person(browser, report, 'phone, dark', PHONE, undefined, { colorScheme: 'dark' })
    await signIn(m)
    await article(m, 'Deploy notes').waitFor()
    await m.getByRole('log', { name: 'Messages' }).getByRole('button', { name: 'Bob', exact: true }).first().waitFor()
    await shot(m, 'dark-phone')
  })

  await check(report, 'Ctrl+K opens "Jump to": a channel, then a person', async () => {
    await p.keyboard.press('Control+k')
    const dialog = p.getByRole('dialog', { name: 'Jump to' })
    await dialog.getByRole('combobox', { name: 'Jump to' }).fill('rand')
    await p.keyboard.press('Enter')
    await p.getByRole('heading', { name: '# random' }).waitFor()
    await dialog.waitFor({ state: 'detached' })
    await p.keyboard.press('Control+k')
    await dialog.getByRole('combobox', { name: 'Jump to' }).fill('@Bob')
    await p.keyboard.press('Enter')
    await p.getByRole('heading', { name: 'Bob', exact: true }).waitFor()
    await dialog.waitFor({ state: 'detached' })
    await p.keyboard.press('Control+k')
    // Esc is pressed once the dialog shows (a key sent before the page rendered it would reach
    // the window, whose Esc closes a side panel, and the dialog would then open after it).
    await dialog.getByRole('combobox', { name: 'Jump to' }).waitFor()
    await p.keyboard.press('Escape')
    await dialog.waitFor({ state: 'detached' })
  })

  await check(report, '"Jump to" names a DM a direct message, not a channel', async () => {
    await p.keyboard.press('Control+k')
    const dialog = p.getByRole('dialog', { name: 'Jump to' })
    await dialog.getByRole('combobox', { name: 'Jump to' }).fill('Bob')
    const list = dialog.getByRole('listbox')
    await list.getByRole('option', { name: 'Bob direct message', exact: true }).waitFor()
    const said = await list.getByRole('option').allInnerTexts()
    if (said.some((t) => /channel/.test(t) && /Bob/.test(t))) throw new Error(`listed as ${JSON.stringify(said)}`)
    await p.keyboard.press('Escape')
    await dialog.waitFor({ state: 'detached' })
  })

  await check(report, 'Esc closes the side panel', async () => {
    await p.getByRole('button', { name: 'Members', exact: true }).click()
    const panel = p.getByRole('complementary', { name: 'Members' })
    await panel.waitFor()
    await p.keyboard.press('Escape')
    await panel.waitFor({ state: 'detached' })
  })

  await check(report, '↑ in the empty box edits my last message', async () => {
    await send(p, 'a mesage with a typo')
    const box = p.getByRole('textbox', { name: 'Message', exact: true })
    await box.focus()
    await box.press('ArrowUp')
    const edit = p.getByRole('textbox', { name: 'Edit message' })
    await edit.waitFor()
    if ((await edit.inputValue()) !== 'a mesage with a typo') throw new Error('not my last message')
    await edit.fill('a message without a typo')
    await p.getByRole('button', { name: 'Save', exact: true }).click()
    await article(p, 'a message without a typo').getByText('(edited)').waitFor()
  })

  await check(report, 'in the edit box Enter saves, Shift+Enter breaks the line, Esc cancels', async () => {
    const box = p.getByRole('textbox', { name: 'Message', exact: true })
    const edit = p.getByRole('textbox', { name: 'Edit message' })
    await box.focus()
    await box.press('ArrowUp')
    await edit.fill('first line')
    await edit.press('Shift+Enter')
    await edit.pressSequentially('second line')
    if ((await edit.inputValue()) !== 'first line\nsecond line') throw new Error(`Shift+Enter: ${JSON.stringify(await edit.inputValue())}`)
    await edit.press('Enter')
    await edit.waitFor({ state: 'detached' })
    await article(p, 'second line').getByText('(edited)').waitFor()
    // Esc cancels the edit only: the side panel open beside it stays.
    await p.getByRole('button', { name: 'Members', exact: true }).click()
    const panel = p.getByRole('complementary', { name: 'Members' })
    await panel.waitFor()
    await box.focus()
    await box.press('ArrowUp')
    await edit.fill('not to be kept')
    await edit.press('Escape')
    await edit.waitFor({ state: 'detached' })
    // Focus goes back to the box the edit was opened from, not to the page.
    if (!(await box.evaluate((el) => el === document.activeElement))) {
      throw new Error(`after Esc, focus is on ${await p.evaluate(() => document.activeElement?.outerHTML.slice(0, 80))}`)
    }
    if (!(await panel.isVisible())) throw new Error('Esc in the edit box also closed the Members panel')
    if (await article(p, 'not to be kept').count()) throw new Error('Esc saved the edit')
    // …and the cancelled edit is gone for good: ↑ opens it afresh with the saved text.
    await box.focus()
    await box.press('ArrowUp')
    if ((await edit.inputValue()) !== 'first line\nsecond line') throw new Error(`reopened with ${JSON.stringify(await edit.inputValue())}`)
    await edit.press('Escape')
    await edit.waitFor({ state: 'detached' })
    await p.keyboard.press('Escape')
    await panel.waitFor({ state: 'detached' })
  })

  await check(report, 'a sign-in opens the channel last open in this browser, else a channel before a DM', async () => {
    await openChannel(p, 'random')
    await signInAt(p, config.url, config.secret) // no link in the address: where was I?
    await p.getByRole('heading', { name: '# random' }).waitFor()
    // A new browser: the first channel by name, not the DM with Bob that sorts before it.
    const { page: q, context } = await person(browser, report, 'alice elsewhere')
    await signInAt(q, config.url, config.secret)
    await q.getByRole('heading', { name: '# general' }).waitFor()
    await context.close()
  })
} finally {
  finish(report)
  await close()
}
