// Two people press "Join huddle" at the same moment in a channel with no huddle on (decision
// 79): each page starts one, and both end up in the one the race rule keeps (earliest 48100
// created_at, then lowest id), the other ended by its starter. tests/web/test_huddle_race.py
// checks the relay's events while both sit in it, then runs `buzz huddle start` beside them.
//
// So that the race really happens (both pressed before either announced), each page's relay
// socket passes through a gate (Playwright's routeWebSocket) that holds its 48100 until both
// pages have sent theirs, then lets them on in the order `config.order` names:
// - "winner-first": the rule's winner is stored first; the loser's look after its own 48100
//   already sees it (startHuddle ends the loser's huddle before joining any audio);
// - "loser-first": the loser is stored first and its look is answered (EOSE) before the
//   winner is let on, so the loser only learns of the winner live, from inside its own huddle
//   (the panel moves it).
import { launch, person, signIn, openChannel, scenario, check, finish, reached, until, scaled } from './lib.mjs'

const { config, report } = scenario()
const { browser, close } = await launch([
  '--use-fake-ui-for-media-stream',
  '--use-fake-device-for-media-stream',
  '--autoplay-policy=no-user-gesture-required',
])

function deferred() {
  let resolve
  const promise = new Promise((r) => (resolve = r))
  return { promise, resolve }
}

/** The gate on one person's relay socket (path "/"; the huddle audio socket is not touched). */
async function gate(context) {
  const g = { sent: deferred(), ok: deferred(), looked: deferred(), open: deferred(), event: null }
  await context.routeWebSocket((u) => u.pathname === '/', (ws) => {
    const server = ws.connectToServer()
    let released = false
    const looks = new Set()
    ws.onMessage((m) => {
      let msg = null
      try {
        msg = typeof m === 'string' ? JSON.parse(m) : null
      } catch {
        /* not JSON: pass it on */
      }
      if (msg?.[0] === 'EVENT' && msg[1]?.kind === 48100) {
        g.event = msg[1]
        g.sent.resolve()
        void g.open.promise.then(() => {
          released = true
          server.send(m)
        })
        return
      }
      // The look after its own 48100: a stored-events query of the huddle kinds (no `since`).
      if (released && msg?.[0] === 'REQ' && msg.slice(2).some((f) => f?.kinds?.includes(48100) && f.since === undefined)) looks.add(msg[1])
      server.send(m)
    })
    server.onMessage((m) => {
      try {
        const msg = typeof m === 'string' ? JSON.parse(m) : null
        if (msg?.[0] === 'OK' && msg[1] === g.event?.id) g.ok.resolve()
        if (msg?.[0] === 'EOSE' && looks.has(msg[1])) g.looked.resolve()
      } catch {
        /* not JSON */
      }
      ws.send(m)
    })
  })
  return g
}

async function openPanel(name, secret) {
  let g = null
  const { page, context } = await person(browser, report, name, undefined, async (ctx) => (g = await gate(ctx)))
  await context.grantPermissions(['microphone'])
  await signIn(page, config.url, secret)
  await openChannel(page, 'standup')
  await page.getByRole('button', { name: 'Huddle', exact: true }).click()
  const panel = page.getByRole('complementary', { name: 'Huddle' })
  await panel.getByText('No huddle is on here').waitFor()
  return { page, panel, gate: g, roster: panel.getByRole('list', { name: 'In the huddle' }) }
}

try {
  const alice = await openPanel('alice', config.alice)
  const bob = await openPanel('bob', config.bob)
  let room = ''

  await check(report, 'both press "Join huddle" together and end up in one room', async () => {
    await Promise.all([alice, bob].map((who) => who.panel.getByRole('button', { name: 'Join huddle' }).click()))
    await Promise.all([alice.gate.sent.promise, bob.gate.sent.promise])
    const key = (e) => [e.created_at, e.id]
    const [a, b] = [key(alice.gate.event), key(bob.gate.event)]
    const aliceWins = a[0] < b[0] || (a[0] === b[0] && a[1] < b[1])
    const [winner, loser] = aliceWins ? [alice, bob] : [bob, alice]
    if (config.order === 'winner-first') {
      winner.gate.open.resolve()
      await winner.gate.ok.promise
      loser.gate.open.resolve()
    } else {
      loser.gate.open.resolve()
      await loser.gate.ok.promise
      await loser.gate.looked.promise // its look came back without the winner in it
      winner.gate.open.resolve()
    }
    report.numbers.winner = aliceWins ? 'alice' : 'bob'
    try {
      await Promise.all([
        alice.roster.getByText('Alice (you)').waitFor({ timeout: scaled(60000) }),
        alice.roster.getByText('Bob', { exact: true }).waitFor({ timeout: scaled(60000) }),
        bob.roster.getByText('Bob (you)').waitFor({ timeout: scaled(60000) }),
        bob.roster.getByText('Alice', { exact: true }).waitFor({ timeout: scaled(60000) }),
      ])
    } catch (e) {
      // Say where each page is (its room, its panel's words), so an intermittent failure can be
      // read from the report instead of guessed at.
      const where = await Promise.all(
        [alice, bob].map(async (who, i) => {
          const state = await who.panel.evaluate((el) => ({
            room: el.querySelector('[data-room]')?.getAttribute('data-room') ?? null,
            live: el.querySelector('[data-room]')?.getAttribute('data-live') ?? null,
            text: (el.textContent ?? '').replace(/\s+/g, ' ').slice(0, 300),
          }))
          return `${i ? 'bob' : 'alice'} (${i === (aliceWins ? 0 : 1) ? 'winner' : 'loser'}): room ${state.room}, the live huddle it knows ${state.live}; ${state.text}`
        }),
      )
      throw new Error(`not together: ${where.join(' | ')}; winner's room ${JSON.parse(winner.gate.event.content).ephemeral_channel_id}; ${e.message.split('\n')[0]}`)
    }
    const rooms = await Promise.all([alice, bob].map((who) => who.panel.locator('[data-room]').getAttribute('data-room')))
    if (rooms[0] !== rooms[1]) throw new Error(`two rooms: ${rooms}`)
    room = rooms[0]
    const seated = await Promise.all([alice, bob].map((who) => who.roster.getByRole('listitem').count()))
    if (seated.join() !== '2,2') throw new Error(`rosters of ${seated}`)
  })
  reached('together', { room })

  await until('cli-started') // `buzz huddle start` by Carol, who got the live huddle back
  await check(report, 'after the CLI start the page still offers only the huddle both are in', async () => {
    for (const who of [alice, bob]) {
      const shown = await who.page.evaluate(() => document.querySelector('[data-room]')?.getAttribute('data-room'))
      if (shown !== room) throw new Error(`moved to ${shown}`)
    }
  })
  await check(report, 'both leave', async () => {
    for (const who of [alice, bob]) {
      await who.panel.getByRole('button', { name: 'Leave huddle' }).click()
      await who.panel.getByRole('button', { name: 'Join huddle' }).waitFor()
    }
  })
} finally {
  finish(report)
  await close()
}
