// Two people in the browser, the CLI and the example rules agent in one channel (issue 12,
// items 2, 3, 6): live messages, a thread, a reaction, an edit, deletions, typing, unread
// counts, a mention that wakes the agent (its reply appears live), search, a private channel
// a third person cannot open; screenshots of channel, thread and members at both sizes.
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { launch, person, signIn, send, openChannel, article, arrives, log, scenario, check, finish, frames, DESKTOP, PHONE } from './lib.mjs'

const run = promisify(execFile)
const { config, report } = scenario()
const url = config.url
// Nothing focused in the picture: a focused message shows its toolbar.
const shot = async (page, name) => {
  await page.evaluate(() => document.activeElement?.blur())
  await page.screenshot({ path: `${config.images}/${name}.png` })
}
const { browser, close } = await launch()

async function describedBy(link) {
  return link.evaluate((el) => {
    const id = el.getAttribute('aria-describedby')
    return id ? document.getElementById(id)?.textContent ?? '' : ''
  })
}

try {
  const A = (await person(browser, report, 'olivia')).page
  const B = (await person(browser, report, 'bob')).page
  await signIn(A, url, config.owner)
  await signIn(B, url, config.bob)

  await check(report, 'channels: the owner sees general, Bob browses and joins it', async () => {
    await A.getByRole('navigation', { name: 'Channels' }).getByRole('link', { name: 'general', exact: true }).waitFor()
    await B.getByRole('button', { name: 'Browse channels' }).click()
    await B.getByRole('complementary', { name: 'Browse channels' }).getByRole('button', { name: 'Join general' }).click()
    await openChannel(B, 'general')
  })

  await check(report, 'an open channel from New channel is in Browse channels for the other person', async () => {
    await B.getByRole('button', { name: 'New channel' }).click()
    const dialog = B.getByRole('dialog', { name: 'New channel' })
    await dialog.getByRole('textbox', { name: 'Channel name' }).fill('random')
    await dialog.getByRole('combobox', { name: 'Visibility' }).selectOption('open')
    await dialog.getByRole('button', { name: 'Create' }).click()
    await B.getByRole('heading', { name: '# random' }).waitFor()
    await A.getByRole('button', { name: 'Browse channels' }).click()
    await A.getByRole('complementary', { name: 'Browse channels' }).getByRole('button', { name: 'Join random' }).waitFor()
    await A.getByRole('button', { name: 'Close browse channels' }).click()
    await openChannel(B, 'general')
  })

  await check(report, 'messages appear live for the other person', async () => {
    await openChannel(A, 'general')
    await send(A, 'Hello from Olivia')
    await article(B, 'Hello from Olivia').waitFor()
    await send(B, 'Hi Olivia, Bob here')
    await article(A, 'Hi Olivia, Bob here').waitFor()
  })

  await check(report, 'typing shows for the other person', async () => {
    await B.getByRole('textbox', { name: 'Message', exact: true }).pressSequentially('typing…', { delay: 20 })
    await A.getByText('Bob is typing…').waitFor()
    await B.getByRole('textbox', { name: 'Message', exact: true }).fill('')
  })

  await check(report, 'a thread reply shows in the thread panel for both', async () => {
    await article(B, 'Hello from Olivia').getByRole('button', { name: 'Reply in thread' }).click()
    const thread = B.getByRole('complementary', { name: 'Thread' })
    await thread.getByRole('textbox', { name: 'Reply' }).fill('Thread reply from Bob')
    await thread.getByRole('button', { name: 'Send reply' }).click()
    await thread.getByRole('article').filter({ hasText: 'Thread reply from Bob' }).waitFor()
    await article(A, 'Hello from Olivia').getByRole('button', { name: '1 reply' }).click()
    await A.getByRole('complementary', { name: 'Thread' }).getByRole('article').filter({ hasText: 'Thread reply from Bob' }).waitFor()
    if (await article(A, 'Thread reply from Bob').count()) throw new Error('the reply also shows on the timeline')
    await A.getByRole('button', { name: 'Close thread' }).click()
  })

  await check(report, 'a reaction shows for the other person', async () => {
    const msg = article(A, 'Hi Olivia, Bob here')
    await msg.getByRole('button', { name: 'Add reaction' }).click()
    await msg.getByRole('button', { name: 'React 👍' }).click()
    await article(B, 'Hi Olivia, Bob here').getByRole('button', { name: '👍 1' }).waitFor()
  })

  await check(report, 'an edit replaces the text for the other person', async () => {
    // The article shows a textbox instead of its text while editing: hold it by its id.
    const id = await article(A, 'Hello from Olivia').getAttribute('data-id')
    const msg = log(A).locator(`article[data-id="${id}"]`)
    await msg.getByRole('button', { name: 'Edit' }).click()
    await msg.getByRole('textbox', { name: 'Edit message' }).fill('Hello from Olivia, edited')
    await msg.getByRole('button', { name: 'Save' }).click()
    await article(B, 'Hello from Olivia, edited').getByText('(edited)').waitFor()
  })

  await check(report, 'a message sent with the CLI appears live', async () => {
    await run(config.buzz, ['messages', 'send', '--channel', config.channel, '--content', 'Sent from the buzz CLI'], {
      env: { ...process.env, BUZZ_RELAY_URL: config.wsUrl, BUZZ_PRIVATE_KEY: config.bob },
    })
    await article(A, 'Sent from the buzz CLI').waitFor()
    await article(B, 'Sent from the buzz CLI').waitFor()
  })

  await check(report, 'an @mention picked from the list wakes the agent and its reply appears live', async () => {
    const box = A.getByRole('textbox', { name: 'Message', exact: true })
    await box.fill('@Rul')
    await A.getByRole('listbox', { name: 'Mention a member' }).getByRole('option', { name: '@Rulesbot' }).waitFor()
    await box.press('Enter')
    await box.press('End')
    await box.pressSequentially('ping')
    await A.getByRole('button', { name: 'Send', exact: true }).click()
    const msg = article(A, '@Rulesbot ping')
    await msg.waitFor()
    await msg.getByRole('button', { name: '1 reply' }).waitFor({ timeout: 60000 })
    await msg.getByRole('button', { name: '1 reply' }).click()
    const thread = A.getByRole('complementary', { name: 'Thread' })
    await thread.getByRole('article').filter({ hasText: 'pong' }).waitFor()
    report.mentionText = await msg.locator('.text').textContent()
  })

  await check(report, 'screenshots: thread at desktop width', async () => {
    await A.mouse.move(0, 0)
    await shot(A, 'thread-desktop')
    await A.getByRole('button', { name: 'Close thread' }).click()
  })

  await check(report, 'search finds a message everywhere and in the channel', async () => {
    const box = A.getByRole('searchbox', { name: 'Search' })
    await box.fill('Hello Olivia')
    await box.press('Enter')
    const results = A.getByRole('complementary', { name: 'Search results' })
    await results.getByRole('article').filter({ hasText: 'Hello from Olivia' }).first().waitFor()
    await results.getByRole('checkbox', { name: 'Only this channel' }).uncheck()
    await results.getByRole('article').filter({ hasText: 'Hello from Olivia' }).first().waitFor()
    await box.fill('nothingmatchesthisword')
    await box.press('Enter')
    await results.getByText('No messages match').waitFor()
    await A.getByRole('button', { name: 'Close search results' }).click()
  })

  await check(report, 'the owner deletes their own message and moderates Bob\'s', async () => {
    await send(A, 'oops, wrong channel')
    await article(B, 'oops, wrong channel').waitFor()
    await article(A, 'oops, wrong channel').getByRole('button', { name: 'Delete' }).click()
    await article(A, 'oops, wrong channel').getByRole('button', { name: 'Confirm delete' }).click()
    await article(B, 'oops, wrong channel').waitFor({ state: 'detached' })
    await send(B, 'spam spam spam')
    await article(A, 'spam spam spam').getByRole('button', { name: 'Delete' }).click()
    await article(A, 'spam spam spam').getByRole('button', { name: 'Confirm moderator delete' }).click()
    await article(B, 'spam spam spam').waitFor({ state: 'detached' })
  })

  await check(report, 'screenshots: channel at desktop width', async () => {
    await A.mouse.move(0, 0)
    await shot(A, 'channel-desktop')
  })

  await check(report, 'members: roles, presence, the agent and its owner; screenshot', async () => {
    await A.getByRole('button', { name: 'Members', exact: true }).click()
    const panel = A.getByRole('complementary', { name: 'Members' })
    const agent = panel.getByRole('listitem').filter({ hasText: 'Rulesbot' })
    await agent.getByText('agent', { exact: true }).waitFor()
    await agent.getByText('owned by Olivia').waitFor()
    await panel.getByRole('listitem').filter({ hasText: 'Bob' }).getByRole('img', { name: 'online' }).waitFor()
    await shot(A, 'members-desktop')
    await A.getByRole('button', { name: 'Close members' }).click()
  })

  let secretId = ''
  await check(report, 'a private channel: created, a member added, Bob sees it live', async () => {
    await A.getByRole('button', { name: 'New channel' }).click()
    const dialog = A.getByRole('dialog', { name: 'New channel' })
    await dialog.getByRole('textbox', { name: 'Channel name' }).fill('secret-plans')
    await dialog.getByRole('combobox', { name: 'Visibility' }).selectOption('private')
    await dialog.getByRole('button', { name: 'Create' }).click()
    await A.getByRole('heading', { name: '# secret-plans' }).waitFor()
    secretId = (await A.evaluate(() => location.hash)).slice(1)
    await send(A, 'The plan is on the wiki')
    await A.getByRole('button', { name: 'Members', exact: true }).click()
    const panel = A.getByRole('complementary', { name: 'Members' })
    await panel.getByRole('textbox', { name: 'Add member' }).fill(config.bobNpub)
    await panel.getByRole('button', { name: 'Add' }).click()
    await panel.getByRole('listitem').filter({ hasText: 'Bob' }).waitFor()
    await openChannel(B, 'secret-plans')
    await article(B, 'The plan is on the wiki').waitFor()
    report.secretChannel = secretId
  })

  await check(report, 'unread counts are the link description, not its name', async () => {
    await openChannel(A, 'general')
    await send(A, 'Bob, look at general')
    const link = B.getByRole('navigation', { name: 'Channels' }).getByRole('link', { name: 'general', exact: true })
    await link.locator('.badge').waitFor()
    const description = await describedBy(link)
    if (description !== '1 unread') throw new Error(`description is ${JSON.stringify(description)}`)
    await openChannel(B, 'general')
    if (await link.locator('.badge').count()) throw new Error('still unread after opening')
  })

  await check(report, 'changing only the #<channel id> of an open tab switches channel', async () => {
    await A.getByRole('heading', { name: '# general' }).waitFor()
    await A.evaluate((id) => { location.hash = `#${id}` }, secretId)
    await A.getByRole('heading', { name: '# secret-plans' }).waitFor()
    await A.evaluate((id) => { location.hash = `#${id}` }, config.channel)
    await A.getByRole('heading', { name: '# general' }).waitFor()
  })

  const C = (await person(browser, report, 'carol')).page
  await check(report, 'a third person cannot see or open the private channel', async () => {
    await signIn(C, `${url}#${secretId}`, config.carol)
    await C.getByRole('heading', { name: 'Channel not available' }).waitFor()
    await C.getByRole('alert').filter({ hasText: 'restricted: not a channel member' }).waitFor()
    await C.getByRole('button', { name: 'Browse channels' }).click()
    await C.getByRole('complementary', { name: 'Browse channels' }).getByRole('button', { name: 'Join general' }).waitFor()
    if (await C.getByText('secret-plans').count()) throw new Error('carol sees the private channel')
    if (await C.getByText('The plan is on the wiki').count()) throw new Error('carol reads the private message')
  })

  await check(report, 'at phone width, "1 reply" held down for a moment stays under the pointer and opens the thread', async () => {
    // A press focuses its message, whose actions then show below it; a channel longer than
    // the view, followed at its bottom, followed them up and moved the button from under the
    // pointer: the release missed it and the click went to the message (decision 367). A
    // person's press lasts frames, so this one does too; short enough that the channel overflows.
    await A.setViewportSize({ width: PHONE.width, height: 640 })
    try {
      const button = article(A, '@Rulesbot ping').getByRole('button', { name: '1 reply' })
      await log(A).evaluate((el) => { el.scrollTop = el.scrollHeight })
      await frames(A)
      const at = await button.boundingBox()
      await A.mouse.move(at.x + at.width / 2, at.y + at.height / 2)
      await A.mouse.down()
      await article(A, '@Rulesbot ping').getByRole('button', { name: 'Reply in thread' }).waitFor() // its actions show
      await frames(A)
      await A.mouse.up()
      await A.getByRole('complementary', { name: 'Thread' }).getByRole('article').filter({ hasText: 'pong' }).waitFor()
      await A.getByRole('button', { name: 'Close thread' }).click()
    } finally {
      await A.setViewportSize(DESKTOP)
    }
  })

  await check(report, 'screenshots: phone width with the menu, thread and members', async () => {
    await A.setViewportSize(PHONE)
    try {
      await A.mouse.move(0, 0)
      await shot(A, 'channel-phone')
      await A.getByRole('button', { name: 'Menu' }).click()
      await A.getByRole('navigation', { name: 'Channels' }).getByRole('link', { name: 'secret-plans', exact: true }).waitFor()
      await shot(A, 'menu-phone')
      await A.getByRole('navigation', { name: 'Channels' }).getByRole('link', { name: 'general', exact: true }).click()
      await article(A, '@Rulesbot ping').getByRole('button', { name: '1 reply' }).click()
      await A.getByRole('complementary', { name: 'Thread' }).getByRole('article').filter({ hasText: 'pong' }).waitFor()
      await shot(A, 'thread-phone')
      await A.getByRole('button', { name: 'Close thread' }).click()
      await A.getByRole('button', { name: 'Members', exact: true }).click()
      await A.getByRole('complementary', { name: 'Members' }).getByRole('listitem').filter({ hasText: 'Rulesbot' }).waitFor()
      await shot(A, 'members-phone')
    } catch (e) {
      await shot(A, 'phone-check-failed') // what the phone showed, for the failure's reader
      throw e
    } finally {
      await A.setViewportSize(DESKTOP) // a failure here leaves the later checks at desktop width
    }
  })

  await check(report, 'rename, remove a member (Bob sees both live), archive', async () => {
    await openChannel(A, 'secret-plans')
    await A.getByRole('button', { name: 'Channel settings' }).click()
    let dialog = A.getByRole('dialog', { name: 'Channel settings' })
    await dialog.getByRole('textbox', { name: 'Channel name' }).fill('launch-plans')
    await dialog.getByRole('textbox', { name: 'About' }).fill('Everything about the launch')
    await dialog.getByRole('button', { name: 'Save' }).click()
    await A.getByRole('heading', { name: '# launch-plans' }).waitFor()
    await A.getByText('Everything about the launch').waitFor()
    const bobNav = B.getByRole('navigation', { name: 'Channels' })
    await bobNav.getByRole('link', { name: 'launch-plans', exact: true }).waitFor()
    await A.getByRole('button', { name: 'Members', exact: true }).click()
    const panel = A.getByRole('complementary', { name: 'Members' })
    await panel.getByRole('button', { name: 'Remove Bob' }).click()
    await panel.getByRole('listitem').filter({ hasText: 'Bob' }).waitFor({ state: 'detached' })
    await bobNav.getByRole('link', { name: 'launch-plans', exact: true }).waitFor({ state: 'detached' })
    await A.getByRole('button', { name: 'Close members' }).click()
    await A.getByRole('button', { name: 'Channel settings' }).click()
    dialog = A.getByRole('dialog', { name: 'Channel settings' })
    await dialog.getByRole('button', { name: 'Archive channel' }).click()
    await A.getByText('This channel is archived').waitFor()
  })

  await check(report, 'a direct message from the members panel reaches Bob live', async () => {
    await openChannel(A, 'general')
    await A.getByRole('button', { name: 'Members', exact: true }).click()
    await A.getByRole('complementary', { name: 'Members' }).getByRole('button', { name: 'Message Bob' }).click()
    await A.getByRole('heading', { name: 'Bob', exact: true }).waitFor()
    await send(A, 'psst, Bob: a direct message')
    const link = B.getByRole('navigation', { name: 'Channels' }).getByRole('link', { name: 'Olivia', exact: true })
    await link.click()
    await article(B, 'psst, Bob: a direct message').waitFor()
  })

  await check(report, 'a mention notifies Bob while his tab is in the background', async () => {
    await openChannel(B, 'general')
    // Stand-ins for the page being hidden and notifications being allowed: what is checked is
    // that the page raises one for a mention of Bob, and only then.
    await B.evaluate(() => {
      window.__notes = []
      window.Notification = class { static permission = 'granted'; constructor(title, o) { window.__notes.push([title, o.body]) } }
      Object.defineProperty(document, 'hidden', { configurable: true, get: () => true })
    })
    await openChannel(A, 'general')
    await send(A, 'no mention in this one')
    const box = A.getByRole('textbox', { name: 'Message', exact: true })
    await box.fill('@Bo')
    // Enter picks Bob once he is offered (before, it sends "@Bo" as it is)
    await A.getByRole('listbox', { name: 'Mention a member' }).getByRole('option', { name: '@Bob' }).waitFor()
    await box.press('Enter')
    await box.press('End')
    await box.pressSequentially('are you there?')
    await A.getByRole('button', { name: 'Send', exact: true }).click()
    await arrives(B, '@Bob are you there?')
    const notes = await B.evaluate(() => window.__notes)
    if (JSON.stringify(notes) !== JSON.stringify([['Olivia in general', '@Bob are you there?']])) throw new Error(`notifications: ${JSON.stringify(notes)}`)
  })

  await check(report, 'a plain member cannot add or remove members', async () => {
    await B.getByRole('button', { name: 'Members', exact: true }).click()
    const panel = B.getByRole('complementary', { name: 'Members' })
    await panel.getByRole('listitem').filter({ hasText: 'Olivia' }).first().waitFor()
    if (await panel.getByRole('textbox', { name: 'Add member' }).count()) throw new Error('Bob can add members')
    if (await panel.getByRole('button', { name: /^Remove / }).count()) throw new Error('Bob can remove members')
  })

  await check(report, 'the owner promotes Bob to admin and demotes him; both members panels follow live', async () => {
    const bobPanel = B.getByRole('complementary', { name: 'Members' })
    const bobSelf = bobPanel.getByRole('listitem').filter({ hasText: 'Bob (you)' })
    await A.getByRole('button', { name: 'Members', exact: true }).click()
    const panel = A.getByRole('complementary', { name: 'Members' })
    const role = panel.getByRole('combobox', { name: 'Role of Bob' })
    await role.selectOption('admin')
    await bobSelf.getByText('admin', { exact: true }).waitFor()
    // Now elevated, Bob gets the owner/admin controls: the add box and the others' role menus.
    await bobPanel.getByRole('textbox', { name: 'Add member' }).waitFor()
    await bobPanel.getByRole('combobox', { name: 'Role of Rulesbot' }).waitFor()
    await panel.getByRole('listitem').filter({ hasText: 'Bob' }).locator('select').evaluate((el) => {
      if (el.value !== 'admin') throw new Error(`owner sees ${el.value}`)
    })
    await role.selectOption('member')
    await bobSelf.getByText('member', { exact: true }).waitFor()
    await bobPanel.getByRole('textbox', { name: 'Add member' }).waitFor({ state: 'detached' })
    if (await bobPanel.getByRole('combobox').count()) throw new Error('Bob still has role menus')
  })
} finally {
  finish(report)
  await close()
}
