// The page: sign-in, then the workspace shell (sidebar, conversation, one side panel).
import { useEffect, useMemo, useState } from 'preact/hooks'
import type { Signer } from '../types'
import { Workspace } from '../workspace'
import { Login } from './Login'
import { Shell } from './Shell'

export function App() {
  const [signer, setSigner] = useState<Signer | null>(null)
  const [fresh, setFresh] = useState(false)
  if (!signer) return <Login onSignedIn={(s, f) => { setSigner(s); setFresh(f) }} />
  return <Signed signer={signer} fresh={fresh} />
}

function Signed({ signer, fresh }: { signer: Signer; fresh: boolean }) {
  const ws = useMemo(() => new Workspace(signer), [signer])
  useEffect(() => {
    void ws.start()
    return () => ws.relay.stop()
  }, [ws])
  return <Shell ws={ws} fresh={fresh} />
}
