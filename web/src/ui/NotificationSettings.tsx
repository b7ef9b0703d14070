// My notification level and mute for one channel (notify.ts), in its settings, for every member.
import { useState } from 'preact/hooks'
import { allowNotifications } from '../notify'
import type { Level } from '../unread'
import type { Channel, Workspace } from '../workspace'

export function NotificationSettings({ ws, channel }: { ws: Workspace; channel: Channel }) {
  const level = ws.reads.level(channel.id)
  const muted = ws.reads.muted.has(channel.id)
  const [permission, setPermission] = useState(typeof Notification === 'undefined' ? 'unsupported' : Notification.permission)
  return (
    <fieldset class="notifications">
      <legend>Your notifications</legend>
      <label>
        Notifications
        <select value={level} onChange={(e) => ws.reads.setLevel(channel.id, e.currentTarget.value as Level, muted)}>
          <option value="all">All messages</option>
          <option value="mentions">Mentions and direct messages</option>
          <option value="none">Nothing</option>
        </select>
      </label>
      <label class="check">
        <input type="checkbox" checked={muted} onChange={(e) => ws.reads.setLevel(channel.id, level, e.currentTarget.checked)} />
        Mute channel
      </label>
      {permission === 'default' && (
        <button type="button" class="quiet" onClick={() => void allowNotifications().then(setPermission)}>Allow browser notifications</button>
      )}
      {permission === 'denied' && <p class="hint">This browser blocks notifications from this page.</p>}
    </fieldset>
  )
}
