// The syntax highlighter, loaded as its own chunk the first time a message has a fenced code
// block (render/lazy.ts): highlight.js core with the languages teams paste most. A block
// whose language is not here is shown as plain text; nothing is guessed (auto-detection
// is slow and often wrong on short snippets).
import hljs from 'highlight.js/lib/core'
import bash from 'highlight.js/lib/languages/bash'
import c from 'highlight.js/lib/languages/c'
import cpp from 'highlight.js/lib/languages/cpp'
import css from 'highlight.js/lib/languages/css'
import diff from 'highlight.js/lib/languages/diff'
import dockerfile from 'highlight.js/lib/languages/dockerfile'
import go from 'highlight.js/lib/languages/go'
import ini from 'highlight.js/lib/languages/ini'
import java from 'highlight.js/lib/languages/java'
import javascript from 'highlight.js/lib/languages/javascript'
import json from 'highlight.js/lib/languages/json'
import markdown from 'highlight.js/lib/languages/markdown'
import python from 'highlight.js/lib/languages/python'
import rust from 'highlight.js/lib/languages/rust'
import shell from 'highlight.js/lib/languages/shell'
import sql from 'highlight.js/lib/languages/sql'
import typescript from 'highlight.js/lib/languages/typescript'
import xml from 'highlight.js/lib/languages/xml'
import yaml from 'highlight.js/lib/languages/yaml'

const LANGUAGES = { bash, c, cpp, css, diff, dockerfile, go, ini, java, javascript, json, markdown, python, rust, shell, sql, typescript, xml, yaml }
for (const [name, lang] of Object.entries(LANGUAGES)) hljs.registerLanguage(name, lang)
hljs.registerAliases(['toml'], { languageName: 'ini' })
hljs.registerAliases(['console', 'sh-session'], { languageName: 'shell' })

/** `code` as highlight.js HTML (spans with `hljs-*` classes, text escaped), or null when the
 * language is not known. */
export function highlight(code: string, language: string): string | null {
  if (!language || !hljs.getLanguage(language)) return null
  return hljs.highlight(code, { language, ignoreIllegals: true }).value
}
