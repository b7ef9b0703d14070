// One helper object per signed-in workspace (a desk of jobs, workflows, the directory, file
// access), made on first use and dropped with the workspace: the views ask for it by `ws`.
import type { Workspace } from './workspace'

export function perWorkspace<T>(make: (ws: Workspace) => T): (ws: Workspace) => T {
  const made = new WeakMap<Workspace, T>()
  return (ws) => {
    let it = made.get(ws)
    if (it === undefined) made.set(ws, (it = make(ws)))
    return it
  }
}
