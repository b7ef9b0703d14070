// Presence and status that are true (issue 29 item 7): presence follows live (kind 20001), the
// agent its harness runs shows online, working while it works and idle after, offline when the
// harness stops; a person's status text; "typing" clears when the box is emptied.
import { launch, person, scenario, check, finish, reached, until } from './lib.mjs'

const { config, report } = scenario()
const { browser, close } = await launch()
const signInAt = async (p, secret) => {
  await p.goto(config.url + '#' + config.channel)
  await p.getByRole('textbox', { name: 'Secret key' }).fill(secret)
  await p.getByRole('button', { name: 'Sign in' }).click()
  await p.getByRole('heading', { name: '# general' }).waitFor()
}
try {
  const A = (await person(browser, report, 'olivia')).page
  await signInAt(A, config.owner)
  await A.getByRole('button', { name: 'Members', exact: true }).click()
  const panel = A.getByRole('complementary', { name: 'Members' })
  const row = (name) => panel.getByRole('listitem').filter({ hasText: name })

  await check(report, 'the running agent shows online and idle', async () => {
    await row('Rulesbot').getByRole('img', { name: 'online' }).waitFor()
    await row('Rulesbot').getByText('idle', { exact: true }).waitFor()
  })

  const B = (await person(browser, report, 'bob')).page
  await check(report, 'a person who signs in shows online live', async () => {
    await row('Bob').getByRole('img', { name: 'offline' }).waitFor()
    await signInAt(B, config.bob)
    await row('Bob').getByRole('img', { name: 'online' }).waitFor()
  })

  await check(report, 'the agent shows working while it works, idle after', async () => {
    const box = A.getByRole('textbox', { name: 'Message', exact: true })
    await box.fill('@Rulesbot sleep 2')
    await box.press('Enter')
    await row('Rulesbot').getByText('working', { exact: true }).waitFor()
    // The answer is a thread reply: "1 reply" under the message.
    await A.getByRole('log', { name: 'Messages' }).getByRole('article').filter({ hasText: 'sleep 2' }).getByRole('button', { name: '1 reply' }).waitFor()
    await row('Rulesbot').getByText('idle', { exact: true }).waitFor()
  })

  await check(report, 'a status text shows to others live', async () => {
    await B.getByRole('button', { name: 'Bob', exact: true }).click()
    const dialog = B.getByRole('dialog', { name: 'Profile' })
    await dialog.getByRole('textbox', { name: 'Status' }).fill('At lunch')
    await dialog.getByRole('button', { name: 'Save profile' }).click()
    await row('Bob').getByText('At lunch').waitFor()
    await B.keyboard.press('Escape')
  })

  await check(report, 'typing shows, and clears when the box is emptied', async () => {
    const box = B.getByRole('textbox', { name: 'Message', exact: true })
    await box.pressSequentially('hel', { delay: 20 })
    await A.getByText('Bob is typing…').waitFor()
    await box.fill('')
    await A.getByText('Bob is typing…').waitFor({ state: 'detached' })
  })

  reached('checked')
  await until('harness stopped')
  await check(report, 'the agent shows offline once its harness stops', async () => {
    await row('Rulesbot').getByRole('img', { name: 'offline' }).waitFor()
  })
} finally {
  finish(report)
  await close()
}
