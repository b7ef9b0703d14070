// Which messages raise a browser notification (issue 29 item 4): per channel a level — all
// messages, mentions (of me, and every DM message), or none — and a mute, stored with the read
// state (unread.ts) so every device follows them. Channels default to mentions, DMs to all.
import type { Msg } from './model'
import type { Workspace } from './workspace'

export function shouldNotify(ws: Workspace, m: Msg): boolean {
  if (m.ev.pubkey === ws.me.pubkey || ws.reads.muted.has(m.channel)) return false
  const level = ws.reads.level(m.channel)
  if (level === 'none') return false
  return level === 'all' || ws.reads.isForMe(m)
}

/** Ask for the browser's permission (it must follow a click). */
export async function allowNotifications(): Promise<NotificationPermission | 'unsupported'> {
  if (typeof Notification === 'undefined') return 'unsupported'
  return Notification.permission === 'default' ? Notification.requestPermission() : Notification.permission
}
