// Read state everywhere (issue 29 item 2): read markers live on the relay, so a second browser
// signed in with the same key (its own storage, nothing shared) shows the same unread counts,
// and reading on one clears the other.
import { launch, person, article, scenario, check, finish, openChannel, reached, until } from './lib.mjs'

const { config, report } = scenario()
const { browser, close } = await launch()
const signInAt = async (p, hash) => {
  await p.goto(config.url + '#' + hash)
  await p.getByRole('textbox', { name: 'Secret key' }).fill(config.secret)
  await p.getByRole('button', { name: 'Sign in' }).click()
  await p.getByRole('navigation', { name: 'Channels' }).waitFor()
}
const badge = (p) => p.getByRole('navigation', { name: 'Channels' }).getByRole('link', { name: 'general', exact: true }).locator('.badge')
try {
  const { page: a } = await person(browser, report, 'first browser')
  await signInAt(a, config.random)
  await openChannel(a, 'general')
  await article(a, 'old 9').waitFor()
  await openChannel(a, 'random')
  reached('read')
  await until('posted')
  const { page: b } = await person(browser, report, 'second browser')
  await check(report, 'a second browser shows the same unread count', async () => {
    await badge(a).filter({ hasText: '5 unread' }).waitFor()
    await signInAt(b, config.random)
    await badge(b).filter({ hasText: '5 unread' }).waitFor()
  })
  await check(report, 'reading in one browser clears the other', async () => {
    const started = Date.now()
    await openChannel(a, 'general')
    await badge(b).waitFor({ state: 'detached' })
    report.numbers.clearedMs = Date.now() - started
  })
} finally {
  finish(report)
  await close()
}
