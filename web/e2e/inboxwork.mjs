// Work in the inbox (issue 29 items 3, 4): a workflow approval for me and the result of a job
// I asked for wait there in words; the approval opens its channel at the card; deciding it
// takes it out; a new approval while the tab is hidden raises a notification.
import { launch, person, scenario, check, finish, signIn, reached, until } from './lib.mjs'

const { config, report } = scenario()
const { browser, close } = await launch()
try {
  const { page: p } = await person(browser, report, 'alice')
  await signIn(p, config.url, config.secret)
  const nav = p.getByRole('navigation', { name: 'Channels' })
  const inbox = p.getByRole('region', { name: 'Inbox' })
  const waiting = (n) => p.waitForFunction((n) => document.getElementById('inbox-count')?.textContent === `${n} waiting`, n)

  await check(report, 'an approval for me and my job\'s result wait in the inbox, in words', async () => {
    await waiting(2)
    await nav.getByRole('link', { name: 'Inbox', exact: true }).click()
    await inbox.getByRole('article', { name: 'Waiting for your approval: Approval: Deploy in #general' }).getByText('Ship 1.2?').waitFor()
    const job = inbox.getByRole('article', { name: /^Your job ended: Job finished without an artifact in #general/ })
    await job.getByText('Three releases and a retro.').waitFor()
    await job.getByText('by Rulesbot').waitFor()
  })

  await check(report, 'an approval opens its channel at the card', async () => {
    await inbox.getByRole('article', { name: /^Waiting for your approval/ }).getByRole('button', { name: 'Open' }).click()
    await p.getByRole('heading', { name: '# general' }).waitFor()
    await p.getByRole('article', { name: 'Approval: Deploy' }).getByRole('button', { name: 'Approve' }).waitFor()
  })

  await check(report, 'deciding the approval takes it out of the inbox', async () => {
    await p.getByRole('article', { name: 'Approval: Deploy' }).getByRole('button', { name: 'Approve' }).click()
    await p.getByRole('article', { name: 'Approval: Deploy' }).getByRole('status').filter({ hasText: 'Approved by Alice' }).waitFor()
    await waiting(1)
  })

  await check(report, 'an approval that arrives while the tab is hidden is notified', async () => {
    await p.evaluate(() => {
      window.__notes = []
      window.Notification = class { static permission = 'granted'; constructor(title, o) { window.__notes.push(`${title} | ${o.body}`) } }
      Object.defineProperty(document, 'hidden', { configurable: true, get: () => true })
    })
    reached('hidden')
    await until('second approval')
    await waiting(2)
    const notes = await p.evaluate(() => window.__notes)
    if (JSON.stringify(notes) !== JSON.stringify(['Approval: Deploy | Ship 1.3?'])) throw new Error(`notifications: ${JSON.stringify(notes)}`)
  })
  reached('hidden') // again when the check failed before it: the test then reads the failure, not a hang
} finally {
  finish(report)
  await close()
}
