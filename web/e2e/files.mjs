// Files in the browser (issue 26 item 3, media spec §15): *Attach file*, a drop on the channel
// and a paste add files to the composer; each upload shows a progress bar named after its file
// and *Cancel upload* (which aborts the request: nothing reaches the relay); a message carries
// several files; images show inline at the size `dim` gives before they load (blurhash behind
// them) and open full size; other files are cards that save under their name; the thread's
// composer attaches too; a member of a private channel sees its image, an outsider's valid
// authorization gets the same 404 as an unknown blob. Screenshots at both sizes.
import { readFileSync } from 'node:fs'
import { createHash } from 'node:crypto'
import { finalizeEvent } from 'nostr-tools/pure'
import { hexToBytes } from 'nostr-tools/utils'
import { launch, person, signIn, log, article, openChannel, scenario, check, finish, DESKTOP, PHONE } from './lib.mjs'

const { config, report } = scenario()
const shot = (page, name) => page.screenshot({ path: `${config.images}/${name}.png` })
const { browser, close } = await launch()
const file = (name) => ({ name, buffer: readFileSync(config.files[name].path), mimeType: config.files[name].type })

async function member(name, viewport = DESKTOP) {
  return person(browser, report, name, viewport, async (context) => {
    await context.addInitScript(() => {
      window.__csp = []
      document.addEventListener('securitypolicyviolation', (e) => window.__csp.push(`${e.violatedDirective} ${e.blockedURI}`))
    })
  })
}

/** A DataTransfer in the page holding `f` (for drop and paste events). */
const transfer = (page, f) => page.evaluateHandle(({ name, type, b64 }) => {
  const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0))
  const dt = new DataTransfer()
  dt.items.add(new File([bytes], name, { type }))
  return dt
}, { name: f.name, type: f.mimeType, b64: f.buffer.toString('base64') })

const chip = (page, name) => page.locator('section.conversation .att-chip').filter({ hasText: name })

/** Wait until every chip of the channel's composer finished uploading. */
async function uploaded(page, names) {
  for (const name of names) await chip(page, name).getByRole('button', { name: `Remove ${name}` }).waitFor({ timeout: 30000 })
}

async function sendText(page, text) {
  const box = page.getByRole('textbox', { name: 'Message', exact: true })
  await box.fill(text)
  await page.getByRole('button', { name: 'Send', exact: true }).click()
  await article(page, text).first().waitFor()
  return article(page, text).first()
}

try {
  const { page: p } = await member('alice')
  await signIn(p, config.url, config.secret)
  await openChannel(p, 'general')

  await check(report, 'Attach file uploads several files with progress; the message carries them', async () => {
    const picker = p.waitForEvent('filechooser')
    await p.getByRole('button', { name: 'Attach file' }).first().click()
    await (await picker).setFiles([file('photo.png'), file('report.pdf')])
    await p.getByRole('progressbar', { name: 'photo.png' }).or(chip(p, 'photo.png').getByRole('button', { name: 'Remove photo.png' })).first().waitFor()
    await uploaded(p, ['photo.png', 'report.pdf'])
    const msg = await sendText(p, 'Design review: the mock-up and the notes')
    await msg.getByRole('img', { name: 'photo.png' }).waitFor()
    await msg.getByRole('link', { name: 'report.pdf', exact: true }).waitFor()
    if (await p.locator('section.conversation .att-chip').count()) throw new Error('the tray was not emptied')
    // The URL lines are the attachments': the text shows none of them.
    if ((await msg.locator('.text').textContent()).includes('/media/')) throw new Error('a URL line shows')
  })

  await check(report, 'an image shows at its dim size before it loads, blurhash behind it, no layout jump', async () => {
    const held = []
    await p.route('**/*.thumb.jpg*', (route) => { held.push(route) })
    await signIn(p, config.url, config.secret) // the key lives in the tab's memory: sign in again
    await openChannel(p, 'general')
    const img = article(p, 'Design review').getByRole('img', { name: 'photo.png' })
    await img.waitFor()
    await p.waitForFunction(() => document.querySelector('img.att-thumb')?.style.backgroundImage.startsWith('url("data:image/png'))
    const before = await img.evaluate((el) => ({ w: el.getBoundingClientRect().width, h: el.getBoundingClientRect().height, loaded: el.complete && el.naturalWidth > 0 }))
    const msgHeight = () => article(p, 'Design review').evaluate((el) => el.getBoundingClientRect().height)
    const heightBefore = await msgHeight()
    if (before.loaded) throw new Error('the thumbnail was not held')
    if (before.w !== config.thumb.width || before.h !== config.thumb.height) throw new Error(`reserved ${before.w}×${before.h}, want ${config.thumb.width}×${config.thumb.height}`)
    for (const r of held) await r.continue()
    await p.unroute('**/*.thumb.jpg*')
    await p.waitForFunction(() => { const el = document.querySelector('img.att-thumb'); return el && el.complete && el.naturalWidth > 0 })
    const after = await img.evaluate((el) => ({ w: el.getBoundingClientRect().width, h: el.getBoundingClientRect().height, nw: el.naturalWidth, bg: el.style.backgroundImage }))
    if (after.w !== before.w || after.h !== before.h) throw new Error(`moved: ${JSON.stringify([before, after])}`)
    if (after.nw !== config.thumb.width) throw new Error(`the thumbnail is ${after.nw} wide`)
    if (after.bg) throw new Error('the placeholder stayed')
    if ((await msgHeight()) !== heightBefore) throw new Error('the message grew when the image came')
  })

  await check(report, 'a click on the image opens it full size', async () => {
    await article(p, 'Design review').getByRole('img', { name: 'photo.png' }).click()
    const dialog = p.getByRole('dialog', { name: 'photo.png' })
    const full = dialog.getByRole('img', { name: 'photo.png' })
    await full.waitFor()
    await p.waitForFunction(() => document.querySelector('dialog.viewer img')?.naturalWidth > 0)
    const nw = await full.evaluate((el) => el.naturalWidth)
    if (nw !== config.photo.width) throw new Error(`full size is ${nw} wide`)
    await dialog.getByRole('button', { name: 'Close' }).click()
    await dialog.waitFor({ state: 'detached' })
  })

  await check(report, 'a file card is a link named after the file with size and type, saved under its name', async () => {
    const msg = article(p, 'Design review')
    const link = msg.getByRole('link', { name: 'report.pdf', exact: true })
    const card = msg.locator('.att-card').filter({ hasText: 'report.pdf' })
    const meta = await card.locator('.att-meta').textContent()
    if (!meta.includes('PDF') || !meta.includes(config.files['report.pdf'].sizeText)) throw new Error(`card says ${meta}`)
    const download = p.waitForEvent('download')
    await link.click()
    const d = await download
    if (d.suggestedFilename() !== 'report.pdf') throw new Error(`saved as ${d.suggestedFilename()}`)
    const path = await d.path()
    const hash = createHash('sha256').update(readFileSync(path)).digest('hex')
    if (hash !== config.files['report.pdf'].sha256) throw new Error('the saved bytes differ')
  })

  await check(report, 'a file dropped on the channel is attached', async () => {
    const dt = await transfer(p, file('notes.csv'))
    const target = log(p)
    await target.dispatchEvent('dragenter', { dataTransfer: dt })
    await target.dispatchEvent('dragover', { dataTransfer: dt })
    await target.dispatchEvent('drop', { dataTransfer: dt })
    await uploaded(p, ['notes.csv'])
    const msg = await sendText(p, 'The numbers, dropped in')
    await msg.getByRole('link', { name: 'notes.csv', exact: true }).waitFor()
  })

  await check(report, 'a pasted image is attached and shows inline', async () => {
    const dt = await transfer(p, { ...file('photo.png'), name: 'image.png', buffer: readFileSync(config.files['pasted.png'].path) })
    const box = p.getByRole('textbox', { name: 'Message', exact: true })
    await box.evaluate((el, data) => {
      el.focus()
      el.dispatchEvent(new ClipboardEvent('paste', { clipboardData: data, bubbles: true, cancelable: true }))
    }, dt)
    const pasted = p.locator('section.conversation .att-chip').filter({ hasText: /^Pasted image / })
    await pasted.getByRole('button', { name: /^Remove Pasted image / }).waitFor({ timeout: 30000 })
    const name = await pasted.locator('.att-name').textContent()
    if (!/^Pasted image \d{4}-\d\d-\d\d \d\d\.\d\d\.\d\d\.png$/.test(name)) throw new Error(`named ${name}`)
    const msg = await sendText(p, 'Pasted from the clipboard')
    await msg.getByRole('img', { name }).waitFor()
  })

  await check(report, 'an upload shows its progress and Cancel upload aborts it: nothing is sent', async () => {
    const puts = []
    let seenPut = null
    const heldPut = new Promise((resolve) => { seenPut = resolve })
    await p.route('**/upload', async (route) => {
      if (route.request().method() !== 'PUT') return route.continue()
      puts.push(route)
      seenPut()
    })
    const picker = p.waitForEvent('filechooser')
    await p.getByRole('button', { name: 'Attach file' }).first().click()
    await (await picker).setFiles([file('big.bin')])
    const bar = p.getByRole('progressbar', { name: 'big.bin' })
    await bar.waitFor()
    await heldPut
    const now = Number(await bar.getAttribute('aria-valuenow') ?? await bar.evaluate((el) => el.value))
    if (!(now >= 10)) throw new Error(`progress ${now}`)
    report.numbers.progressWhileHeld = now
    await chip(p, 'big.bin').getByRole('button', { name: 'Cancel upload' }).click()
    await chip(p, 'big.bin').waitFor({ state: 'detached' })
    if (puts.length !== 1) throw new Error(`${puts.length} PUTs`) // held, never continued: its body never left
    // End the held PUT as a dropped connection would. Left paused, it is resumed when the route
    // goes (Chromium continues paused requests when interception stops) and the relay would
    // store a body the page had cancelled: the browser's abort does not always reach a paused
    // request. A PUT the page sent again after Cancel would still pass and be caught below.
    await puts[0].abort('aborted').catch(() => {})
    await p.unroute('**/upload')
    const msg = await sendText(p, 'Never mind the big file')
    if (await msg.locator('.att').count()) throw new Error('the cancelled file was sent')
  })

  await check(report, "a refused file shows the relay's reason and holds the message back", async () => {
    const picker = p.waitForEvent('filechooser')
    await p.getByRole('button', { name: 'Attach file' }).first().click()
    await (await picker).setFiles([file('drawing.svg')])
    const refused = chip(p, 'drawing.svg')
    await refused.getByRole('alert').filter({ hasText: 'content type not allowed: image/svg+xml' }).waitFor()
    const box = p.getByRole('textbox', { name: 'Message', exact: true })
    await box.fill('Here is the drawing')
    await p.getByRole('button', { name: 'Send', exact: true }).click()
    await p.locator('section.conversation form.composer > .error').filter({ hasText: 'Remove the files that could not be uploaded first.' }).waitFor()
    if (await article(p, 'Here is the drawing').count()) throw new Error('sent with a refused file')
    await refused.getByRole('button', { name: 'Remove drawing.svg' }).click()
    await refused.waitFor({ state: 'detached' })
    await box.fill('')
  })

  await check(report, 'the thread panel attaches files too', async () => {
    const root = article(p, 'The numbers, dropped in')
    await root.hover()
    await root.getByRole('button', { name: 'Reply in thread' }).click()
    const panel = p.getByRole('complementary', { name: 'Thread' })
    await panel.getByRole('textbox', { name: 'Reply' }).waitFor()
    const picker = p.waitForEvent('filechooser')
    await panel.getByRole('button', { name: 'Attach file' }).click()
    await (await picker).setFiles([file('notes.csv')])
    await panel.getByRole('button', { name: 'Remove notes.csv' }).waitFor({ timeout: 30000 })
    await panel.getByRole('textbox', { name: 'Reply' }).fill('Same numbers, in the thread')
    await panel.getByRole('button', { name: 'Send reply' }).click()
    await panel.getByRole('article').filter({ hasText: 'Same numbers, in the thread' }).getByRole('link', { name: 'notes.csv', exact: true }).waitFor()
    await panel.getByRole('button', { name: 'Close thread' }).click()
  })

  await check(report, 'screenshots at 1280×800 and 390×844', async () => {
    await openChannel(p, 'general')
    const msg = article(p, 'Design review')
    await p.evaluate(() => document.activeElement?.blur())
    await p.mouse.move(0, 0)
    const frame = async () => {
      await article(p, 'The review is at ten').evaluate((el) => el.scrollIntoView({ block: 'start' }))
      await msg.getByRole('img', { name: 'photo.png' }).evaluate((el) => el.decode())
    }
    await frame()
    await shot(p, 'files-desktop')
    await p.setViewportSize(PHONE)
    await frame()
    await shot(p, 'files-phone')
    await p.setViewportSize(DESKTOP)
  })

  await check(report, 'a private channel: a member sees its image, an outsider gets 404 like an unknown blob', async () => {
    await openChannel(p, 'leads')
    const picker = p.waitForEvent('filechooser')
    await p.getByRole('button', { name: 'Attach file' }).first().click()
    await (await picker).setFiles([file('secret.png')])
    await uploaded(p, ['secret.png'])
    const sent = await sendText(p, 'Only for the leads')
    await sent.getByRole('img', { name: 'secret.png' }).waitFor()

    const { page: b } = await member('bob')
    await signIn(b, config.url, config.bob)
    await openChannel(b, 'leads')
    await b.waitForFunction(() => { const el = document.querySelector('img.att-thumb'); return el && el.complete && el.naturalWidth > 0 })

    const { page: c } = await member('carol')
    await signIn(c, config.url, config.carol)
    const sha = config.files['secret.png'].sha256
    const token = (secret) => {
      const at = Math.floor(Date.now() / 1000)
      const ev = finalizeEvent({ kind: 24242, created_at: at, content: 'Read files', tags: [['t', 'get'], ['expiration', String(at + 600)], ['server', new URL(config.url).host]] }, hexToBytes(secret))
      return Buffer.from(JSON.stringify(ev)).toString('base64url')
    }
    const ask = (page, hash, secret) => page.evaluate(async ([u]) => {
      const r = await fetch(u)
      return { status: r.status, reason: r.headers.get('X-Reason'), body: await r.text() }
    }, [`${new URL(config.url).origin}/media/${hash}.png?auth=${token(secret)}`])
    const outsider = await ask(c, sha, config.carol)
    const unknown = await ask(c, 'ab'.repeat(32), config.carol)
    const insider = await ask(b, sha, config.bob)
    if (insider.status !== 200) throw new Error(`the member got ${insider.status}`)
    if (outsider.status !== 404 || JSON.stringify(outsider) !== JSON.stringify(unknown)) throw new Error(`outsider ${JSON.stringify(outsider)} vs unknown ${JSON.stringify(unknown)}`)
    // Nor does the outsider's page show it: the channel's messages are not theirs to read.
    await c.goto(`${config.url}#${config.leads}`)
    await c.getByRole('navigation', { name: 'Channels' }).waitFor()
    if (await c.getByRole('img', { name: 'secret.png' }).count()) throw new Error('the outsider sees the image')
    report.numbers.outsider = outsider
    for (const page of [b, c]) {
      const seen = await page.evaluate(() => window.__csp)
      if (seen.length) throw new Error(seen.join('; '))
    }
  })

  await check(report, 'a hostile imeta draws nothing active and fetches nothing from another host', async () => {
    const elsewhere = []
    p.on('request', (r) => { if (new URL(r.url()).origin !== new URL(config.url).origin) elsewhere.push(r.url()) })
    await openChannel(p, 'random')
    const msg = article(p, 'look at these')
    await msg.getByRole('link', { name: 'diagram.svg', exact: true }).waitFor()
    // Claims to be a PNG on another host: read (by hash) from this relay, which has no such
    // blob, so it falls back to a card; the name with markup is text.
    await msg.getByRole('link', { name: '<img src=x onerror=alert(1)>.png', exact: true }).waitFor()
    await msg.getByRole('link', { name: 'page.html', exact: true }).waitFor()
    if (await msg.locator('img, svg, iframe, object, embed, script').count()) throw new Error('active or remote content drawn')
    if (await p.evaluate(() => window.__pwned === true)) throw new Error('script ran')
    if (elsewhere.length) throw new Error(`fetched ${elsewhere.join(', ')}`)
  })

  await check(report, "a photo's location is removed before it is uploaded", async () => {
    await openChannel(p, 'random')
    const picker = p.waitForEvent('filechooser')
    await p.getByRole('button', { name: 'Attach file' }).first().click()
    await (await picker).setFiles([file('trip.jpg')])
    await uploaded(p, ['trip.jpg'])
    const msg = await sendText(p, 'From the offsite')
    const img = msg.getByRole('img', { name: 'trip.jpg' })
    await img.waitFor()
    // Re-encoded upright: the EXIF orientation (6) is applied, so the box is portrait.
    const box = await img.evaluate((el) => [el.width, el.height])
    if (!(box[1] > box[0])) throw new Error(`box ${box}`)
  })

  await check(report, 'the CSP reported nothing', async () => {
    const seen = await p.evaluate(() => window.__csp)
    if (seen.length) throw new Error(seen.join('; '))
  })
} finally {
  finish(report)
  await close()
}
