// Light or dark (issue 29 item 8): follows the system until the person picks one with the
// "Dark theme" switch; the choice is kept in this browser. `data-theme` on <html> selects the
// palette (theme-dark.css).
import { useEffect, useState } from 'preact/hooks'
import './theme-dark.css'

const KEY = 'buzz.theme'
const system = () => typeof matchMedia === 'function' && matchMedia('(prefers-color-scheme: dark)').matches

function chosen(): 'dark' | 'light' | null {
  const v = localStorage.getItem(KEY)
  return v === 'dark' || v === 'light' ? v : null
}

export const isDark = (): boolean => (chosen() ?? (system() ? 'dark' : 'light')) === 'dark'

export function applyTheme(): void {
  document.documentElement.dataset.theme = isDark() ? 'dark' : 'light'
}

/** [dark?, set]: the switch's state; follows system changes while nothing was chosen. */
export function useTheme(): [boolean, (dark: boolean) => void] {
  const [dark, setDark] = useState(isDark())
  useEffect(() => {
    if (typeof matchMedia !== 'function') return
    const mq = matchMedia('(prefers-color-scheme: dark)')
    const follow = () => {
      applyTheme()
      setDark(isDark())
    }
    mq.addEventListener('change', follow)
    return () => mq.removeEventListener('change', follow)
  }, [])
  const set = (d: boolean) => {
    localStorage.setItem(KEY, d ? 'dark' : 'light')
    applyTheme()
    setDark(d)
  }
  return [dark, set]
}

applyTheme()
