import type { Channel, Workspace } from '../workspace'
import { Panel } from './Panel'

export function HuddlePanel({ channel, onClose }: { ws: Workspace; channel: Channel; onClose: () => void }) {
  return (
    <Panel name="Huddle" onClose={onClose}>
      <p class="hint">Huddles for #{channel.name} are not in the browser yet: use `buzz huddle` from the CLI.</p>
    </Panel>
  )
}
