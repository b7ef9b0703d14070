// Group DMs (issue 29 item 8): "New message" with several people and an agent opens the one
// DM of that set (41010, 1–8 participants); the same set again reuses it.
import { launch, person, log, scenario, check, finish, openChannel, signIn, send } from './lib.mjs'

const { config, report } = scenario()
const { browser, close } = await launch()
try {
  const { page: p } = await person(browser, report, 'alice')
  await signIn(p, config.url, config.secret)
  await openChannel(p, 'general')
  await log(p).getByRole('article').filter({ hasText: 'here' }).nth(3).waitFor()
  const nav = p.getByRole('navigation', { name: 'Channels' })
  const dialog = p.getByRole('dialog', { name: 'New message' })

  await check(report, 'New message lists people and agents, marked', async () => {
    await nav.getByRole('button', { name: 'New message' }).click()
    for (const name of ['Bob', 'Carol', 'Oscar']) await dialog.getByRole('checkbox', { name, exact: true }).waitFor()
    await dialog.getByRole('checkbox', { name: 'Rulesbot agent' }).waitFor()
    if (await dialog.getByRole('checkbox', { name: 'Alice', exact: true }).count()) throw new Error('I am listed')
  })

  await check(report, 'choosing two people and an agent opens one conversation named after them', async () => {
    await dialog.getByRole('searchbox', { name: 'Find people' }).fill('o')
    await dialog.getByRole('checkbox', { name: 'Bob', exact: true }).check()
    await dialog.getByRole('searchbox', { name: 'Find people' }).fill('')
    await dialog.getByRole('checkbox', { name: 'Carol', exact: true }).check()
    await dialog.getByRole('checkbox', { name: 'Rulesbot agent' }).check()
    await dialog.getByRole('button', { name: 'Open conversation' }).click()
    await dialog.waitFor({ state: 'detached' })
    await p.getByRole('heading', { name: /Bob, Carol, Rulesbot/ }).waitFor()
    await send(p, 'hello all three')
    await nav.getByRole('link', { name: 'Bob, Carol, Rulesbot' }).waitFor()
  })

  await check(report, 'the same set again reuses the conversation', async () => {
    await openChannel(p, 'general')
    await nav.getByRole('button', { name: 'New message' }).click()
    for (const name of ['Rulesbot agent', 'Carol', 'Bob']) await dialog.getByRole('checkbox', { name, exact: name !== 'Rulesbot agent' }).check()
    await dialog.getByRole('button', { name: 'Open conversation' }).click()
    await log(p).getByRole('article').filter({ hasText: 'hello all three' }).waitFor()
    if ((await nav.getByRole('link', { name: /Bob, Carol/ }).count()) !== 1) throw new Error('a second conversation was opened')
  })
} finally {
  finish(report)
  await close()
}
