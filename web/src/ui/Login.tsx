// Sign-in: create a key, paste one (nsec or hex, or a NIP-49 ncryptsec with its passphrase),
// use a NIP-07 extension, or unlock the ncryptsec this browser stores. A pasted or new key
// lives in this tab's memory only.
import { useEffect, useState } from 'preact/hooks'
import { warmUp } from '../render/lazy'
import { MemorySigner, extensionSigner, forgetStored, isEncrypted, newSecret, parseSecret, storedKey, unlock } from '../identity'
import type { Signer } from '../types'
import { humanError } from './hooks'

export function Login({ onSignedIn }: { onSignedIn: (s: Signer, fresh: boolean) => void }) {
  const [secret, setSecret] = useState('')
  const [pass, setPass] = useState('')
  const [keyPass, setKeyPass] = useState('')
  const [error, setError] = useState('')
  const [busy, setBusy] = useState(false)
  const [stored, setStored] = useState(storedKey())
  useEffect(warmUp, [])

  const encrypted = isEncrypted(secret)
  const decrypt = (ncryptsec: string, passphrase: string) => {
    setBusy(true)
    setError('')
    // scrypt blocks for about a second: let the "Unlocking…" state paint first.
    setTimeout(() => {
      try {
        onSignedIn(new MemorySigner(unlock(ncryptsec, passphrase)), false)
      } catch (err) {
        setError(humanError(err))
        setBusy(false)
      }
    }, 30)
  }
  const signIn = (e: Event) => {
    e.preventDefault()
    if (encrypted) {
      if (!keyPass) setError('Type the passphrase this key was encrypted with.')
      else decrypt(secret, keyPass)
      return
    }
    try {
      onSignedIn(new MemorySigner(parseSecret(secret)), false)
    } catch (err) {
      setError(humanError(err))
    }
  }
  const doUnlock = (e: Event) => {
    e.preventDefault()
    if (stored) decrypt(stored, pass)
  }
  const useExtension = async () => {
    try {
      onSignedIn(await extensionSigner(), false)
    } catch (err) {
      setError(humanError(err))
    }
  }

  return (
    <main class="login">
      <h1>buzz</h1>
      <p class="lede">A workspace for people and agents, on this relay.</p>
      {stored && (
        <form class="card" onSubmit={doUnlock}>
          <h2>Welcome back</h2>
          <p>This browser keeps your key encrypted with your passphrase.</p>
          <label>
            Passphrase
            <input type="password" autocomplete="current-password" value={pass} onInput={(e) => setPass(e.currentTarget.value)} />
          </label>
          <div class="row">
            <button type="submit" disabled={busy}>{busy ? 'Unlocking…' : 'Unlock'}</button>
            <button type="button" class="quiet" onClick={() => { forgetStored(); setStored(null) }}>Forget stored key</button>
          </div>
        </form>
      )}
      <div class="card">
        <h2>New here</h2>
        <p>Make a new key. It stays in this tab until you choose to keep it.</p>
        <button type="button" onClick={() => onSignedIn(new MemorySigner(newSecret()), true)}>Create identity</button>
      </div>
      <form class="card" onSubmit={signIn}>
        <h2>I have a key</h2>
        <label>
          Secret key
          <input
            type="text"
            class="secret"
            autocomplete="off"
            spellcheck={false}
            placeholder="nsec1…, ncryptsec1… or 64 hex characters"
            value={secret}
            onInput={(e) => { setSecret(e.currentTarget.value); setError('') }}
          />
        </label>
        {encrypted && (
          <label>
            Key passphrase
            <input type="password" autocomplete="current-password" value={keyPass} onInput={(e) => setKeyPass(e.currentTarget.value)} />
          </label>
        )}
        {encrypted ? (
          <button type="submit" disabled={busy}>{busy ? 'Unlocking…' : 'Unlock'}</button>
        ) : (
          <button type="submit">Sign in</button>
        )}
        {typeof window.nostr !== 'undefined' && (
          <button type="button" class="quiet" onClick={() => void useExtension()}>Use browser extension</button>
        )}
      </form>
      {error && <p role="alert" class="error">{error}</p>}
      <p class="fine">Your key never leaves this browser: the relay only sees signed events.</p>
    </main>
  )
}
