// Huddles from the browser (issue 12, item 5), with tests/web/test_huddle.py beside it:
// 1. "Join huddle" in a channel with no huddle on starts one (its own ephemeral channel,
//    huddle.md §8.4) with the channel's agent invited; Chromium's fake microphone plays a WAV, encoded with WebCodecs into v2
//    frames; the Python voice client joins it through the parent link, records the page (and
//    recognises its words) and speaks; the page decodes it with a speaking indicator, shows
//    Bob's transcript and the agent's reply as captions and speaks the reply (speechSynthesis);
// 2. a huddle started with `buzz huddle start` is joined from the page with "Join huddle".
// The two sides wait on each other's steps (lib.mjs `reached` / `until`), never on a clock.
import { launch, person, signIn, openChannel, scenario, check, finish, reached, until, PHONE, DESKTOP } from './lib.mjs'

const { config, report } = scenario()
const shot = (page, name) => page.screenshot({ path: `${config.images}/${name}.png` })
const { browser, close } = await launch([
  '--use-fake-ui-for-media-stream',
  '--use-fake-device-for-media-stream',
  `--use-file-for-fake-audio-capture=${config.wav}`,
  '--autoplay-policy=no-user-gesture-required',
])

// Watchers installed before the page's own script: what the page asks the browser's speech
// synthesis to say, and every caption and speaking indicator it ever shows (they come and go
// as the room talks, so a check polling the screen could miss one on a busy machine).
function watchers() {
  window.__spoken = []
  if (window.speechSynthesis) {
    const speak = window.speechSynthesis.speak.bind(window.speechSynthesis)
    window.speechSynthesis.speak = (u) => {
      window.__spoken.push(u.text)
      speak(u)
    }
  }
  window.__captions = []
  window.__speaking = []
  const seen = () => {
    for (const p of document.querySelectorAll('[aria-label="Captions"] p')) {
      const text = p.textContent
      if (!window.__captions.includes(text)) window.__captions.push(text)
    }
    for (const li of document.querySelectorAll('[aria-label="In the huddle"] li')) {
      const name = li.querySelector('.name')?.textContent
      if (name && [...li.querySelectorAll('.tag')].some((t) => t.textContent === 'speaking') && !window.__speaking.includes(name)) window.__speaking.push(name)
    }
  }
  new MutationObserver(seen).observe(document, { subtree: true, childList: true, characterData: true })
}

const decodedFrom = (page, name) => page.evaluate((who) => {
  const li = [...document.querySelectorAll('[aria-label="In the huddle"] li')].find((l) => l.querySelector('.name')?.textContent === who)
  return Number(li?.getAttribute('data-decoded') ?? 0)
}, name)

try {
  const { page: p, context } = await person(browser, report, 'alice', DESKTOP, (ctx) => ctx.addInitScript(watchers))
  await context.grantPermissions(['microphone'])
  await signIn(p, config.url, config.secret)
  await openChannel(p, 'standup')
  const panel = p.getByRole('complementary', { name: 'Huddle' })
  const roster = panel.getByRole('list', { name: 'In the huddle' })
  const bob = roster.getByRole('listitem').filter({ hasText: 'Bob' })
  let room = ''

  await check(report, 'start: its own channel with the agent invited, and I am seated', async () => {
    await p.getByRole('button', { name: 'Huddle', exact: true }).click()
    await panel.getByRole('checkbox', { name: 'Speak agent replies' }).check()
    const invite = panel.getByRole('group', { name: 'Agents to invite' })
    if (!(await invite.getByRole('checkbox', { name: 'Scribe' }).isChecked())) throw new Error('the agent is not ticked')
    await panel.getByText('No huddle is on here: joining starts one in its own channel, with the agents ticked below.').waitFor()
    await panel.getByRole('button', { name: 'Join huddle' }).click()
    await roster.getByText('Alice (you)').waitFor()
    await panel.getByText('Agents do not hear browser speech').waitFor()
    room = await panel.locator('[data-room]').getAttribute('data-room')
    const links = (await p.getByRole('navigation', { name: 'Channels' }).getByRole('link').allTextContents()).filter((t) => !t.includes('Inbox') && !t.includes('Directory'))
    if (links.length !== 1) throw new Error(`the huddle channel is in the sidebar: ${links}`)
  })
  reached('started', { room })

  await check(report, 'the Python client joins: the roster and the channel header show both', async () => {
    await bob.waitFor({ timeout: 120000 })
    await p.getByText('In the huddle: Alice, Bob').or(p.getByText('In the huddle: Bob, Alice')).waitFor()
  })

  await check(report, 'the Python client’s speech is decoded here with a speaking indicator', async () => {
    await p.waitForFunction(() => window.__speaking.includes('Bob'), null, { timeout: 120000 })
    report.numbers.decodedFromBob = await decodedFrom(p, 'Bob')
    if (!(report.numbers.decodedFromBob > 0)) throw new Error('no frame from Bob was decoded')
  })

  await check(report, 'the Python client’s speech plays: the level after the AudioWorklet is not silent', async () => {
    // The meter reads an AnalyserNode between the playout worklet and the speakers; its peak
    // since joining only grows, so waiting on it cannot miss a loud stretch.
    const meter = panel.getByRole('meter', { name: 'Playback level' })
    await meter.waitFor()
    await p.waitForFunction(() => Number(document.querySelector('meter[aria-label="Playback level"]')?.getAttribute('data-peak-dbov')) > -45, null, { timeout: 120000 })
    report.numbers.playbackPeakDbov = Number(await meter.getAttribute('data-peak-dbov'))
  })

  const said = await until('replied') // {transcript, reply}: Bob's first transcript, the agent's answer
  await check(report, 'captions: Bob’s transcript and the agent’s reply', async () => {
    await p.waitForFunction(
      ([t, r]) => window.__captions.includes(`Bob: ${t}`) && window.__captions.includes(`Scribe: ${r}`),
      [said.transcript, said.reply],
      { timeout: 120000 },
    )
    await panel.getByRole('region', { name: 'Captions' }).getByText(said.reply).waitFor()
    report.captions = await p.evaluate(() => window.__captions)
    await shot(p, 'huddle-desktop')
    await p.setViewportSize(PHONE)
    await shot(p, 'huddle-phone')
    await p.setViewportSize(DESKTOP)
  })

  await check(report, 'the agent’s reply is spoken with speechSynthesis, Bob’s words are not', async () => {
    await p.waitForFunction((r) => window.__spoken.includes(r), said.reply, { timeout: 60000 })
    report.spoken = await p.evaluate(() => window.__spoken)
    const others = report.spoken.filter((t) => t !== said.reply)
    if (others.length) throw new Error(`also spoke ${JSON.stringify(others)}`)
  })
  reached('heard')

  await check(report, 'mute and leave; the huddle ends with its last person', async () => {
    // Stay unmuted until the Python client has left: it records what this page sends until then.
    await bob.waitFor({ state: 'detached', timeout: 180000 })
    report.numbers.framesSent = Number(await panel.locator('[data-sent]').getAttribute('data-sent'))
    await panel.getByRole('button', { name: 'Mute' }).click()
    await roster.getByText('muted').waitFor()
    if ((await panel.getByRole('button', { name: 'Mute' }).getAttribute('aria-pressed')) !== 'true') throw new Error('Mute is not pressed')
    await panel.getByRole('button', { name: 'Leave huddle' }).click()
    await p.getByText(/^In the huddle:/).waitFor({ state: 'detached' })
    // The relay ends a huddle whose last participant left (48103): nothing left to join.
    await panel.getByText('No huddle is on here').waitFor({ timeout: 60000 })
    await panel.getByRole('button', { name: 'Join huddle' }).waitFor()
  })
  reached('left')

  const cli = await until('cli-started') // {room}: `buzz huddle start` by Bob, who is in it
  await check(report, 'a huddle started with the CLI is joined with "Join huddle"', async () => {
    await panel.getByText('Bob started a huddle here.').waitFor({ timeout: 60000 })
    await panel.getByRole('button', { name: 'Join huddle' }).click()
    await roster.getByText('Alice (you)').waitFor()
    await bob.waitFor({ timeout: 120000 })
    const joined = await panel.locator('[data-room]').getAttribute('data-room')
    if (joined !== cli.room) throw new Error(`joined ${joined}, not ${cli.room}`)
  })
  reached('joined-cli')
  await check(report, 'leave the CLI’s huddle', async () => {
    await panel.getByRole('button', { name: 'Leave huddle' }).click()
    await panel.getByRole('button', { name: 'Join huddle' }).waitFor()
  })
} finally {
  finish(report)
  await close()
}
