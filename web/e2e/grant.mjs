// A refused asker and the owner's one-click grant (issue 27 item 3): Bob mentions Alice's agent,
// which answers only her; he sees one notice naming Alice and how to ask for access. Alice sees
// "Let Bob ask Rulesbot" on that notice (Bob does not), clicks it, and once the running harness
// has the new record (tests/web/test_agent_grant.py waits on its log), Bob's next mention is
// answered.
import { launch, person, signIn, scenario, check, finish, openChannel, article, send, reached, until, PHONE, DESKTOP } from './lib.mjs'

const { config, report } = scenario()
const shot = (page, name) => page.screenshot({ path: `${config.images}/${name}.png` })
const { browser, close } = await launch()
try {
  const alice = (await person(browser, report, 'alice')).page
  const bob = (await person(browser, report, 'bob')).page
  await signIn(alice, config.url, config.alice)
  await signIn(bob, config.url, config.bob)
  await openChannel(alice, 'general')
  await openChannel(bob, 'general')
  const thread = (page) => page.getByRole('complementary', { name: 'Thread' })
  const notice = (page) => thread(page).getByRole('article').filter({ hasText: 'Ask my owner Alice for access' })
  const grant = (page) => notice(page).getByRole('button', { name: 'Let Bob ask Rulesbot' })

  await check(report, 'the refused asker sees one notice naming the owner and how to ask', async () => {
    await send(bob, '@Rulesbot echo let me in')
    const mine = article(bob, '@Rulesbot echo let me in').first()
    await mine.getByRole('button', { name: '1 reply' }).click({ timeout: 60000 })
    await notice(bob).filter({ hasText: '--respond-to allowlist --allow npub1' }).waitFor()
    if (await grant(bob).count()) throw new Error('Bob (not the owner) is offered the grant')
    await send(bob, '@Rulesbot echo please') // within the hour: no second notice (checked on the relay)
  })
  const card = (page) => page.getByRole('article', { name: 'Job: tidy the docs', exact: true })
  await check(report, 'a declined job names the owner and offers the owner the same grant', async () => {
    await bob.locator('form.composer').first().getByRole('button', { name: 'Ask agent' }).click()
    const dialog = bob.getByRole('dialog', { name: 'Ask agent' })
    await dialog.getByRole('combobox', { name: 'Agent' }).selectOption({ label: 'Rulesbot (agent of Alice)' })
    await dialog.getByRole('textbox', { name: 'Requested outcome' }).fill('tidy the docs')
    await dialog.getByRole('button', { name: 'Ask', exact: true }).click()
    await card(bob).getByRole('status').filter({ hasText: /^failed$/ }).waitFor({ timeout: 60000 })
    await card(bob).getByText('ask its owner Alice to let you in').waitFor()
    await card(alice).getByRole('button', { name: 'Let Bob ask Rulesbot' }).waitFor()
    if (await card(bob).getByRole('button', { name: 'Let Bob ask Rulesbot' }).count()) throw new Error('Bob is offered the grant on the card')
  })
  await check(report, 'the owner sees "Let Bob ask Rulesbot" on the notice', async () => {
    await article(alice, '@Rulesbot echo let me in').first().getByRole('button', { name: '1 reply' }).click({ timeout: 30000 })
    await grant(alice).waitFor()
    await shot(alice, 'grant-desktop')
    await alice.setViewportSize(PHONE)
    await grant(alice).scrollIntoViewIfNeeded()
    await shot(alice, 'grant-phone')
    await alice.setViewportSize(DESKTOP)
  })
  await check(report, 'one click lets Bob in', async () => {
    await grant(alice).click()
    await notice(alice).getByRole('status').filter({ hasText: /^Bob may ask Rulesbot now\.$/ }).waitFor()
    await card(alice).getByRole('status').filter({ hasText: /^Bob may ask Rulesbot now\.$/ }).waitFor()
  })
  reached('granted')
  await until('applied')
  await check(report, "the running harness answers Bob's next mention", async () => {
    await send(bob, '@Rulesbot echo thanks')
    await article(bob, '@Rulesbot echo thanks').first().getByRole('button', { name: '1 reply' }).click({ timeout: 60000 })
    await thread(bob).getByRole('article').filter({ hasText: /^(?!.*@Rulesbot).*thanks/ }).waitFor()
  })
} catch (e) {
  report.errors.push(`scenario: ${e && e.message ? e.message : e}`)
} finally {
  await close()
  finish(report)
}
