// A newcomer's rough edges (tests/web/test_polish.py): authors after cards, the inbox in words
// on one-line dates, *Sent* apart from the reply count, the Directory's heading, the phone
// composer's placeholder, search excerpts (no code language label), private conversation names
// beside their tag and in "Jump to", the Directory link marked only while open, the inbox's
// edited mentions, the dark huddle panel's checkboxes.
// Screenshots of each view at 1280×800 and 390×844.
import { launch, person, log, article, scenario, check, finish, openChannel, signIn, send, reached, until, reveal, PHONE } from './lib.mjs'

const { config, report } = scenario()
const { browser, close } = await launch()
const shot = async (page, name) => {
  await page.evaluate(() => document.activeElement?.blur())
  await page.screenshot({ path: `${config.images}/${name}.png` })
}
/** The author shown above the message (none when it is grouped under the previous one). */
const authorOf = (page, text) => article(page, text).locator('.msg-head .author')
/** Every `time` in `root` on one line (an inline box that wraps has two client rects). */
/** A grouped message's time, shown by a tap (focus), lies inside the screen and left of the text. */
async function groupedTime(page, name) {
  const text = 'And a second line'
  await reveal(page, text)
  const msg = article(page, text)
  await msg.locator('.text').click()
  const time = msg.locator('time.hover-time')
  const at = await time.evaluate((el) => {
    const r = el.getBoundingClientRect()
    const t = el.closest('article').querySelector('.text').getBoundingClientRect()
    return { left: r.left, right: r.right, textLeft: t.left, width: innerWidth, opacity: getComputedStyle(el).opacity, says: el.textContent }
  })
  if (at.opacity !== '1') throw new Error(`the time is not shown on a tap (opacity ${at.opacity})`)
  if (at.left < 0 || at.right > at.width) throw new Error(`"${at.says}" spans ${at.left}…${at.right} px of a ${at.width} px screen`)
  if (at.right > at.textLeft) throw new Error(`"${at.says}" ends at ${at.right} px, into the text at ${at.textLeft} px`)
  await page.screenshot({ path: `${config.images}/${name}.png` })
}
const oneLine = (root) => root.evaluate((el) => [...el.querySelectorAll('time')].every((t) => t.getClientRects().length === 1))

let sentId = ''
try {
  const { page: p } = await person(browser, report, 'alice')
  await signIn(p, config.url, config.secret)
  await openChannel(p, 'general')
  const nav = p.getByRole('navigation', { name: 'Channels' })

  await check(report, 'a message right after a job card or an approval card shows its author', async () => {
    await p.getByRole('article', { name: 'Approval: Deploy' }).waitFor()
    for (const text of ['Right after the job card', 'Right after the approval card']) {
      await article(p, text).waitFor()
      const name = await authorOf(p, text).textContent({ timeout: 2000 }).catch(() => null)
      if (name !== 'Alice') throw new Error(`${text}: author shown ${JSON.stringify(name)}`)
    }
    // …and a message after a message of the same author still groups
    if (await authorOf(p, 'And a second line').count()) throw new Error('grouping is gone altogether')
  })
  await shot(p, 'polish-timeline-desktop')
  await check(report, 'a grouped message\'s time shows whole beside it', () => groupedTime(p, 'polish-grouped-time-desktop'))

  await check(report, 'Sent and the reply count are apart', async () => {
    await send(p, 'Please review the plan')
    const mine = article(p, 'Please review the plan')
    await mine.getByText('Sent', { exact: true }).waitFor()
    sentId = await mine.getAttribute('data-id')
    reached('sent', { id: sentId })
    await until('replied')
    await mine.getByRole('button', { name: '1 reply' }).waitFor()
    const text = await mine.innerText()
    if (/Sent\S/.test(text)) throw new Error(`reads ${JSON.stringify(text)}`)
    const a = await mine.getByText('Sent', { exact: true }).boundingBox()
    const b = await mine.getByRole('button', { name: '1 reply' }).boundingBox()
    const sameLine = Math.abs(a.y + a.height / 2 - (b.y + b.height / 2)) < a.height / 2
    if (sameLine && Math.abs(b.x - (a.x + a.width)) < 4) throw new Error('touching on one line')
  })
  reached('sent', { id: sentId })

  await check(report, 'the inbox names a job\'s state and what was asked, dates on one line', async () => {
    await nav.getByRole('link', { name: 'Inbox', exact: true }).click()
    const inbox = p.getByRole('region', { name: 'Inbox' })
    const job = inbox.getByRole('article', { name: /^Your job ended: Job finished without an artifact in #general/ })
    await job.getByText('Summarise the week').waitFor()
    await job.getByText('Three releases and a retro.').waitFor()
    if (!(await oneLine(inbox))) throw new Error('a date wraps at 1280×800')
    await shot(p, 'polish-inbox-desktop')
    await p.setViewportSize(PHONE)
    if (!(await oneLine(inbox))) throw new Error('a date wraps at 390×844')
    await shot(p, 'polish-inbox-phone')
    await p.setViewportSize({ width: 1280, height: 800 })
    await inbox.getByRole('button', { name: 'Close inbox' }).click()
  })

  await check(report, 'the Directory link opens a view headed Directory', async () => {
    await nav.getByRole('link', { name: 'Directory', exact: true }).click()
    await p.getByRole('heading', { name: 'Directory', exact: true }).waitFor()
    await shot(p, 'polish-directory-desktop')
  })

  await check(report, 'the Directory link is marked while its panel is open, not once Search replaced it', async () => {
    const link = nav.getByRole('link', { name: 'Directory', exact: true })
    if ((await link.getAttribute('aria-current')) !== 'page') throw new Error('not marked while its panel is open')
    const box = p.getByRole('searchbox').first()
    await box.fill('zebrafish')
    await box.press('Enter')
    await p.getByRole('complementary', { name: 'Search results' }).waitFor()
    if ((await link.getAttribute('aria-current')) !== null) throw new Error('still marked under the search results')
    const looks = await link.evaluate((el) => {
      const other = document.createElement('a')
      other.className = 'side-link'
      el.parentElement.append(other)
      const plain = getComputedStyle(other).backgroundColor
      other.remove()
      return { now: getComputedStyle(el).backgroundColor, plain }
    })
    if (looks.now !== looks.plain) throw new Error(`still filled: ${looks.now} (a plain link: ${looks.plain})`)
  })

  await check(report, 'a search hit is a text excerpt, not a half-rendered table', async () => {
    const box = p.getByRole('searchbox').first()
    await box.fill('zebrafish')
    await box.press('Enter')
    const hit = p.getByRole('complementary', { name: 'Search results' }).locator('.hits li').first()
    await hit.getByText(/zebrafish rollout/).waitFor()
    if (await hit.locator('table').count()) throw new Error('the hit renders the table')
    const text = await hit.locator('.excerpt').innerText()
    if (!text.includes('build · Alice zebrafish rollout · Bob')) throw new Error(`the excerpt reads ${JSON.stringify(text)}`)
    await shot(p, 'polish-search-desktop')
  })

  await check(report, 'a search hit from a code block leaves out its language label', async () => {
    const box = p.getByRole('searchbox').first()
    await box.fill('kingfisher')
    await box.press('Enter')
    const hit = p.getByRole('complementary', { name: 'Search results' }).locator('.hits li').filter({ hasText: 'kingfisher' }).first()
    await hit.waitFor()
    const text = await hit.locator('.excerpt').innerText()
    if (/python/i.test(text) || !/def kingfisher/.test(text)) throw new Error(`the excerpt reads ${JSON.stringify(text)}`)
    await p.getByRole('button', { name: 'Close search results' }).click()
  })

  await check(report, 'a private conversation\'s name is not cut by its e2ee tag', async () => {
    const row = nav.getByRole('link', { name: 'Rulesbot (end-to-end encrypted)', exact: true })
    await row.waitFor()
    const cut = await row.locator('.chan-name').evaluate((el) => el.scrollWidth > el.clientWidth)
    if (cut) throw new Error('the name is truncated')
  })

  await check(report, '"Jump to" lists a private conversation as an encrypted direct message', async () => {
    await p.keyboard.press('Control+k')
    const dialog = p.getByRole('dialog', { name: 'Jump to' })
    await dialog.getByRole('combobox', { name: 'Jump to' }).fill('Rulesbot')
    await dialog.getByRole('option', { name: 'Rulesbot encrypted direct message', exact: true }).click()
    await dialog.waitFor({ state: 'detached' })
    const row = nav.getByRole('link', { name: 'Rulesbot (end-to-end encrypted)', exact: true })
    await row.and(p.locator('[aria-current="page"]')).waitFor()
    await openChannel(p, 'general')
  })

  await check(report, 'the inbox shows a mention as edited', async () => {
    await nav.getByRole('link', { name: 'Inbox', exact: true }).click()
    const inbox = p.getByRole('region', { name: 'Inbox' })
    const item = inbox.getByRole('article', { name: /^Mentioned you: Bob in #general/ })
    await item.getByText('the kestrel figures by Friday please').waitFor()
    if (await item.getByText('kestrel numbers').count()) throw new Error('the inbox shows the text before the edit')
    await inbox.getByRole('button', { name: 'Close inbox' }).click()
  })

  await check(report, 'in the dark theme the huddle panel\'s checkboxes take the theme\'s colours', async () => {
    await p.getByRole('switch', { name: 'Dark theme' }).click()
    await p.getByRole('button', { name: 'Huddle', exact: true }).click()
    const panel = p.getByRole('complementary', { name: 'Huddle' })
    const speak = panel.locator('label').filter({ has: p.getByRole('checkbox', { name: 'Speak agent replies' }) })
    const invite = panel.getByRole('group', { name: 'Agents to invite' }).locator('label').filter({ hasText: 'Rulesbot' })
    for (const label of [speak, invite]) {
      const c = await label.evaluate((el) => {
        const probe = document.createElement('span')
        probe.style.color = 'var(--muted)'
        el.append(probe)
        const muted = getComputedStyle(probe).color
        probe.remove()
        const s = getComputedStyle(el)
        return { bg: s.backgroundColor, fg: s.color, themed: [getComputedStyle(el.closest('.panel')).color, muted], says: el.textContent }
      })
      if (c.bg !== 'rgba(0, 0, 0, 0)') throw new Error(`"${c.says}" is drawn on ${c.bg}`)
      if (!c.themed.includes(c.fg)) throw new Error(`"${c.says}" is in ${c.fg}, not the theme's text (${c.themed.join(' or ')})`)
    }
    await shot(p, 'polish-huddle-dark-desktop')
    await p.setViewportSize(PHONE)
    await shot(p, 'polish-huddle-dark-phone')
    await p.setViewportSize({ width: 1280, height: 800 })
    await panel.getByRole('button', { name: /^Close/ }).click()
    await p.getByRole('switch', { name: 'Dark theme' }).click()
  })

  const { page: m } = await person(browser, report, 'alice on a phone', PHONE)
  await m.goto(config.url + '#' + config.general)
  await m.getByRole('textbox', { name: 'Secret key' }).fill(config.secret)
  await m.getByRole('button', { name: 'Sign in' }).click()
  await check(report, 'on a phone the composer and search placeholders are not cut', async () => {
    await m.getByRole('heading', { name: '# general' }).waitFor()
    await m.getByRole('button', { name: 'Ask agent' }).first().waitFor()
    const room = (el) => {
      const s = getComputedStyle(el)
      const ctx = document.createElement('canvas').getContext('2d')
      ctx.font = `${s.fontWeight} ${s.fontSize} ${s.fontFamily}`
      return { need: ctx.measureText(el.placeholder).width, room: el.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight) }
    }
    const fits = await m.getByRole('textbox', { name: 'Message', exact: true }).evaluate(room)
    if (fits.need > fits.room) throw new Error(`placeholder needs ${fits.need}px, has ${fits.room}px`)
    // …nor the top bar's search box ("Search messa" once)
    const search = await m.getByRole('searchbox', { name: 'Search' }).evaluate(room)
    if (search.need > search.room) throw new Error(`the search placeholder needs ${search.need}px, has ${search.room}px`)
    await shot(m, 'polish-timeline-phone')
  })
  await check(report, 'on a phone a grouped message\'s time shows whole beside it', () => groupedTime(m, 'polish-grouped-time-phone'))
  await check(report, 'on a phone a search hit is a text excerpt too', async () => {
    const box = m.getByRole('searchbox').first()
    await box.fill('zebrafish')
    await box.press('Enter')
    const hit = m.getByRole('complementary', { name: 'Search results' }).locator('.hits li').first()
    await hit.getByText(/zebrafish rollout/).waitFor()
    if (await hit.locator('table').count()) throw new Error('the hit renders the table')
    await shot(m, 'polish-search-phone')
    await m.getByRole('button', { name: 'Close search results' }).click()
  })
  await m.getByRole('button', { name: 'Menu' }).click()
  await shot(m, 'polish-sidebar-phone')
} finally {
  finish(report)
  await close()
}
