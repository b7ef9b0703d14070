// Unsent text, kept per person, per channel and per thread in localStorage: it survives a
// reload and never follows the reader into another channel or thread (issue 29 item 5).
import { useEffect, useState } from 'preact/hooks'
import { MAX_CONTENT_BYTES } from './model'

const PREFIX = 'buzz.draft.'

export function draftKey(me: string, channel: string, thread?: string | null): string {
  return `${PREFIX}${me}.${channel}${thread ? '/' + thread : ''}`
}

export function loadDraft(key: string): string {
  try {
    return localStorage.getItem(key) ?? ''
  } catch {
    return ''
  }
}

export function saveDraft(key: string, text: string): void {
  try {
    // Bounded as a message is: a longer text cannot be sent anyway.
    if (text && text.length <= MAX_CONTENT_BYTES) localStorage.setItem(key, text)
    else localStorage.removeItem(key)
  } catch {
    /* storage full or disabled: the draft lives as long as the page */
  }
}

/** The box's text, loaded from and saved to the draft at `key`; a new key starts from its own. */
export function useDraft(key: string): [string, (text: string) => void] {
  const [state, setState] = useState({ key, text: loadDraft(key) })
  const current = state.key === key ? state.text : loadDraft(key)
  useEffect(() => {
    if (state.key !== key) setState({ key, text: loadDraft(key) })
  }, [key])
  const set = (text: string) => {
    saveDraft(key, text)
    setState({ key, text })
  }
  return [current, set]
}
