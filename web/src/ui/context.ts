// What a message's contents can ask of the page around it: show someone's profile card, go to
// a channel or a message (`#<channel>` or `#<channel>/<event>`). The shell provides it.
import { createContext } from 'preact'
import { useContext } from 'preact/hooks'

export type Ui = { openProfile(pubkey: string): void; go(hash: string): void }

export const UiContext = createContext<Ui>({ openProfile: () => undefined, go: () => undefined })
export const useUi = (): Ui => useContext(UiContext)
