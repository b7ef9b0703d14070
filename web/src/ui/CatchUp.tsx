// Catching up in a channel (issue 29 item 1): the "New messages" divider before the first
// unread message, "Jump to first unread" while that divider is above the view, and "Jump to
// latest" while scrolled up, with how many messages arrived meanwhile.
export function NewDivider() {
  return (
    <div class="new-divider" role="separator" aria-label="New messages">
      <span aria-hidden="true">New messages</span>
    </div>
  )
}

type Props = { above: boolean; scrolledUp: boolean; fresh: number; onFirstUnread: () => void; onLatest: () => void }

export function JumpBar({ above, scrolledUp, fresh, onFirstUnread, onLatest }: Props) {
  return (
    <>
      {above && (
        <button type="button" class="jump first-unread" onClick={onFirstUnread}>Jump to first unread</button>
      )}
      {scrolledUp && (
        <button type="button" class="jump latest" aria-label="Jump to latest" aria-describedby={fresh ? 'fresh-count' : undefined} onClick={onLatest}>
          {fresh > 0 ? <span id="fresh-count">{fresh} new {fresh === 1 ? 'message' : 'messages'}</span> : 'Jump to latest'} ↓
        </button>
      )}
    </>
  )
}
