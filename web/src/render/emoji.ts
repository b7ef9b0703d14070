// GitHub's emoji shortcodes (`:tada:` → 🎉), about 1,900 of them: the table markdown-it-emoji
// generates from gemoji. Loaded as its own chunk the first time a message has a `:word:`.
import table from 'markdown-it-emoji/lib/data/full.mjs'

const EMOJI = new Map<string, string>(Object.entries(table as Record<string, string>))

export function emoji(name: string): string | undefined {
  return EMOJI.get(name)
}
