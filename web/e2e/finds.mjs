// A newcomer's findings (tests/web/test_finds.py), seen by Bob at 1280×800: the thread's reply
// box spans the panel, a workflow's post in the inbox is named by its owner, a private DM is in
// the inbox (opens the conversation, can be marked done), and a grouped message's hover time
// and action bar cover no text. Screenshots of the thread at 1280×800 and 390×844.
import { launch, person, article, scenario, check, finish, openChannel, signIn, PHONE } from './lib.mjs'

const { config, report } = scenario()
const { browser, close } = await launch()
const shot = async (page, name) => page.screenshot({ path: `${config.images}/${name}.png` })

try {
  const { page: p } = await person(browser, report, 'bob')
  await signIn(p, config.url, config.secret)
  await openChannel(p, 'general')
  const nav = p.getByRole('navigation', { name: 'Channels' })

  await check(report, 'a grouped message shows its hover time over no text, its actions over the top edge', async () => {
    const second = article(p, 'Second of two')
    await second.waitFor()
    if (!(await second.evaluate((el) => el.classList.contains('grouped')))) throw new Error('not grouped')
    await second.hover()
    const time = await second.locator('time.hover-time').boundingBox()
    const text = await second.locator('.msg-main').boundingBox()
    if (time.x + time.width > text.x) throw new Error(`the time ends at ${time.x + time.width}, the text starts at ${text.x}`)
    // the action bar sits over the top edge (it may cover the line above, never this message's own controls)
    const bar = await second.locator('.msg-actions').boundingBox()
    const own = await second.locator('.msg-main').boundingBox()
    if (bar.y >= own.y) throw new Error(`the action bar (top ${bar.y}) sits inside the message (top ${own.y})`)
    await shot(p, 'finds-hover-desktop')
  })

  await check(report, 'the thread reply box spans the panel at 1280×800', async () => {
    await article(p, 'Second of two').hover()
    await article(p, 'Second of two').getByRole('button', { name: 'Reply in thread' }).click()
    const panel = p.getByRole('complementary', { name: 'Thread' })
    await panel.locator('form.composer').getByRole('button', { name: 'Ask agent' }).waitFor()
    const box = await panel.getByRole('textbox', { name: 'Reply' }).boundingBox()
    const whole = await panel.boundingBox()
    report.numbers.reply_box_share = box.width / whole.width
    if (box.width < 0.7 * whole.width) throw new Error(`the box is ${box.width}px of ${whole.width}px`)
    await shot(p, 'finds-thread-desktop')
    await p.setViewportSize(PHONE)
    await shot(p, 'finds-thread-phone')
    await p.setViewportSize({ width: 1280, height: 800 })
    await panel.getByRole('button', { name: 'Close thread' }).click()
  })

  const inbox = p.getByRole('region', { name: 'Inbox' })
  await check(report, "the inbox names a workflow's post by its owner", async () => {
    await nav.getByRole('link', { name: 'Inbox', exact: true }).click()
    const item = inbox.getByRole('article', { name: 'Mentioned you: Alice (workflow) in #general' })
    await item.getByText('the deploy is done').waitFor()
    await shot(p, 'finds-inbox-desktop')
  })

  await check(report, 'a private DM is in the inbox, opens its conversation and can be marked done', async () => {
    const name = 'Direct message: Alice in Alice (end-to-end encrypted)'
    const item = inbox.getByRole('article', { name })
    await item.getByText('A sealed hello').waitFor()
    await item.getByRole('button', { name: 'Open' }).click()
    await p.getByRole('region', { name: 'Alice (end-to-end encrypted)' }).getByText('A sealed hello').waitFor()
    await item.getByRole('button', { name: 'Mark done' }).click()
    await item.waitFor({ state: 'detached' })
  })
} finally {
  finish(report)
  await close()
}
