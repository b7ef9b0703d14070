// Search filters (issue 29 item 8): from:, in:, has:file, before:/after: beside the words,
// said back in words; a filter naming nobody is said instead of searched; a hit opens in place.
import { launch, person, log, scenario, check, finish, openChannel, signIn } from './lib.mjs'

const { config, report } = scenario()
const { browser, close } = await launch()
try {
  const { page: p } = await person(browser, report, 'alice')
  await signIn(p, config.url, config.secret)
  await openChannel(p, 'general')
  await log(p).getByRole('article').filter({ hasText: 'lunch anyone?' }).waitFor()
  const box = p.getByRole('searchbox', { name: 'Search' })
  const results = p.getByRole('complementary', { name: 'Search results' })
  const hits = results.getByRole('article')
  const search = async (text) => {
    await box.fill(text)
    await box.press('Enter')
    await results.waitFor()
  }
  // The hits, once the list settles on exactly `want` (texts in any order).
  const expectHits = async (want) => {
    const contains = (texts) => want.every((w) => texts.some((t) => t.includes(w))) && texts.length === want.length
    let texts = []
    const deadline = Date.now() + 15000
    while (Date.now() < deadline) {
      texts = await hits.allTextContents()
      if (contains(texts)) return
      await p.waitForTimeout(100)
    }
    throw new Error(`hits are ${JSON.stringify(texts)}, not ${JSON.stringify(want)}`)
  }

  await check(report, "from: keeps one person's messages and says so", async () => {
    await search('deploy from:bob')
    await results.getByText('from Bob').waitFor()
    await results.getByRole('checkbox', { name: 'Only this channel' }).uncheck()
    await expectHits(['deploy retro from january', 'deploy plan for friday', 'the deploy log'])
  })

  await check(report, "in: keeps one channel's messages", async () => {
    await search('deploy in:#random')
    await results.getByText('in #random').waitFor()
    await expectHits(['deploy notes by alice'])
  })

  await check(report, 'has:file alone lists the messages with a file', async () => {
    await search('has:file')
    await results.getByText('with a file').waitFor()
    await expectHits(['the deploy log'])
  })

  await check(report, 'before: and after: split at a day', async () => {
    await search(`deploy before:${config.before}`)
    await expectHits(['deploy retro from january'])
    await search(`deploy from:me after:${config.after}`)
    await expectHits(['deploy notes by alice'])
  })

  await check(report, 'a filter that names nobody is said, not searched', async () => {
    await search('deploy from:nobody')
    await results.getByRole('alert').filter({ hasText: 'No person named “nobody”' }).waitFor()
    if (await hits.count()) throw new Error('hits shown for a filter that names nobody')
  })

  await check(report, 'a hit opens in its channel', async () => {
    await openChannel(p, 'random')
    await search('plan in:general')
    await expectHits(['deploy plan for friday'])
    await hits.filter({ hasText: 'deploy plan for friday' }).getByRole('button', { name: 'Open' }).click()
    await p.getByRole('heading', { name: '# general' }).waitFor()
    await log(p).getByRole('article').filter({ hasText: 'deploy plan for friday' }).waitFor()
  })
} finally {
  finish(report)
  await close()
}
