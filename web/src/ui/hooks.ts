import { useEffect, useReducer } from 'preact/hooks'
import type { Workspace } from '../workspace'

/** Re-render the calling component whenever the workspace changes. */
export function useWorkspace(ws: Workspace): void {
  const [, bump] = useReducer((n: number) => n + 1, 0)
  useEffect(() => ws.listen(() => bump(0)), [ws])
}

/** Run an action, turning a thrown error into the workspace's notice line. */
export function act(ws: Workspace, fn: () => Promise<unknown>): Promise<void> {
  return fn().then(
    () => undefined,
    (e: unknown) => ws.say(humanError(e)),
  )
}

export function humanError(e: unknown): string {
  const text = e instanceof Error ? e.message : String(e)
  return text || 'Something went wrong.'
}
