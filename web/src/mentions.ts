// `@Name` resolution, the same rule as `buzz messages send` (src/buzz/cli/mentions.py,
// agents.md §2.3 item 2): at each `@` that starts a token, the longest member display name the
// text continues with (exactly, case-sensitively, ending at a non-word character) wins; a
// name shared by several members is ambiguous; no match is unresolved.
const AT = /(?<![\p{L}\p{N}_@])@(?=[\p{L}\p{N}_])/gu
const WORD = /^[\p{L}\p{N}_]/u
const TOKEN = /^[\p{L}\p{N}_]+/u

export type Resolution = { resolved: string[]; unresolved: string[]; ambiguous: string[] }

export function resolveNames(content: string, names: Map<string, string>): Resolution {
  const byName = new Map<string, Set<string>>()
  for (const [pk, name] of names) if (name) (byName.get(name) ?? byName.set(name, new Set()).get(name)!).add(pk)
  const out: Resolution = { resolved: [], unresolved: [], ambiguous: [] }
  for (const at of content.matchAll(AT)) {
    const rest = content.slice((at.index ?? 0) + 1)
    let best: string | null = null
    for (const name of byName.keys()) {
      if (rest.startsWith(name) && (rest.length === name.length || !WORD.test(rest.slice(name.length)))) {
        if (best === null || name.length > best.length) best = name
      }
    }
    if (best === null) out.unresolved.push('@' + (TOKEN.exec(rest)?.[0] ?? ''))
    else if (byName.get(best)!.size > 1) out.ambiguous.push('@' + best)
    else {
      const pk = [...byName.get(best)!][0]
      if (!out.resolved.includes(pk)) out.resolved.push(pk)
    }
  }
  return out
}

/** The `@partial` being typed just before `caret`, or null. */
export function mentionQuery(text: string, caret: number): { start: number; query: string } | null {
  const before = text.slice(0, caret)
  const m = /(?:^|[^\p{L}\p{N}_@])@([\p{L}\p{N}_ .-]{0,32})$/u.exec(before)
  if (!m) return null
  return { start: caret - m[1].length - 1, query: m[1] }
}
