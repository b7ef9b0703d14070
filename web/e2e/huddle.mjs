// A huddle from the browser (issue 12, item 5): Chromium's fake microphone plays a WAV; the
// page joins, encodes Opus with WebCodecs and sends v2 frames; the Python voice client in the
// same room records it (tests/web/test_huddle.py) and speaks back, and the page decodes it.
import { launch, person, signIn, openChannel, scenario, check, finish, PHONE, DESKTOP } from './lib.mjs'

const { config, report } = scenario()
const shot = (page, name) => page.screenshot({ path: `${config.images}/${name}.png` })
const { browser, close } = await launch([
  '--use-fake-ui-for-media-stream',
  '--use-fake-device-for-media-stream',
  `--use-file-for-fake-audio-capture=${config.wav}`,
  '--autoplay-policy=no-user-gesture-required',
])
try {
  const { page: p, context } = await person(browser, report, 'alice')
  await context.grantPermissions(['microphone'])
  await signIn(p, config.url, config.secret)
  await openChannel(p, 'standup')
  const panel = p.getByRole('complementary', { name: 'Huddle' })
  const roster = panel.getByRole('list', { name: 'In the huddle' })
  await check(report, 'join: the roster and the channel header show me, then the Python client', async () => {
    await p.getByRole('button', { name: 'Huddle', exact: true }).click()
    await panel.getByRole('button', { name: 'Join huddle' }).click()
    await roster.getByText('Alice (you)').waitFor()
    await panel.getByText('Agents do not hear browser speech').waitFor()
    await roster.getByRole('listitem').filter({ hasText: 'Bob' }).waitFor({ timeout: 30000 })
    await p.getByText('In the huddle: Alice, Bob').or(p.getByText('In the huddle: Bob, Alice')).waitFor()
    report.numbers.sentWhenBobCame = Number(await panel.locator('[data-sent]').getAttribute('data-sent'))
    report.numbers.bobCameAt = Date.now()
  })
  await check(report, 'the Python client’s speech is decoded here with a speaking indicator', async () => {
    const bob = roster.getByRole('listitem').filter({ hasText: 'Bob' })
    await p.waitForFunction(() => Number(document.querySelector('[data-decoded]')?.getAttribute('data-decoded') ?? 0) > 25, null, { timeout: 30000 })
    await bob.getByText('speaking').waitFor({ timeout: 20000 })
    await shot(p, 'huddle-desktop')
    await p.setViewportSize(PHONE)
    await shot(p, 'huddle-phone')
    await p.setViewportSize(DESKTOP)
  })
  await check(report, 'mute and leave', async () => {
    // Stay unmuted until the Python client has left: it records what this page sends until then.
    await roster.getByRole('listitem').filter({ hasText: 'Bob' }).waitFor({ state: 'detached', timeout: 60000 })
    report.numbers.sentWhileBobWasHere = Number(await panel.locator('[data-sent]').getAttribute('data-sent')) - report.numbers.sentWhenBobCame
    report.numbers.bobStayedMs = Date.now() - report.numbers.bobCameAt
    await panel.getByRole('button', { name: 'Mute' }).click()
    await roster.getByText('muted').waitFor()
    if ((await panel.getByRole('button', { name: 'Mute' }).getAttribute('aria-pressed')) !== 'true') throw new Error('Mute is not pressed')
    report.numbers.framesSent = Number(await panel.locator('[data-sent]').getAttribute('data-sent'))
    await panel.getByRole('button', { name: 'Leave huddle' }).click()
    await panel.getByRole('button', { name: 'Join huddle' }).waitFor()
    await p.getByText(/^In the huddle:/).waitFor({ state: 'detached' })
  })
} finally {
  finish(report)
  await close()
}
