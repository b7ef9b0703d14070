"""End-to-end encrypted DMs (NIP-17 in NIP-59 gift wraps; docs/decisions.md 280–284).

The relay stores only kind 1059 wraps, each readable by its `p` key alone; this module seals
and wraps on the way out and unwraps on the way in (`buzz.core.nip59`), so the operator never
holds a plaintext. Sending publishes one wrap per recipient and a copy to myself over the
NIP-42 WebSocket (the HTTP bridge refuses 1059: a wrap's author is a one-time key, not the
request's signer). Reading asks the bridge for my newest wraps and opens them: a wrap's time is
random (up to two days back), so the page is by wrap time and the messages are then ordered by
their own time; wraps that do not open (not NIP-17, forged, another kind inside) are counted,
never shown.

The inbox list (kind 10050) names the relays a person receives private DMs on; `publish_inbox`
names this relay by default, which is what nostr-tools' and other NIP-17 senders look up.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from buzz.client.errors import UserError
from buzz.client.models import PrivateConversation, PrivateMessage, PrivateSent
from buzz.client.session import Session, refused, websocket_failure, websocket_url
from buzz.client.values import Text, event_id_arg, pubkey_arg, text_arg
from buzz.core import nip59
from buzz.core.event import Event

log = logging.getLogger(__name__)

MAX_RECIPIENTS = 8  # as a channel DM (decision 281)
MAX_WRAPS_READ = 1000


def message_of(opened: nip59.Opened, me: str) -> PrivateMessage:
    rumor = opened.rumor
    reply_to = next((t[1] for t in rumor.tags if len(t) >= 2 and t[0] == "e"), None)
    return PrivateMessage(
        rumor.id,
        rumor.pubkey,
        rumor.created_at,
        rumor.content,
        list(nip59.conversation_of(rumor, me)),
        reply_to,
        opened.wrap.id,
    )


def open_wraps(secret: str, wraps: Iterable[Event]) -> tuple[list[nip59.Opened], int]:
    """The wraps that open into NIP-17 messages (one per rumor id), oldest first, and how many
    did not open."""
    seen: dict[str, nip59.Opened] = {}
    failed = 0
    for wrap in wraps:
        try:
            opened = nip59.unwrap(secret, wrap)
        except nip59.UnwrapError as exc:
            failed += 1
            log.debug("wrap %s does not open: %s", wrap.id[:12], exc.reason)
            continue
        seen.setdefault(opened.rumor.id, opened)
    return sorted(seen.values(), key=lambda o: _order(o, seen)), failed


def _order(opened: nip59.Opened, by_id: dict[str, nip59.Opened]) -> tuple[int, int, str]:
    """Oldest first; within one second an answer after what it answers (its depth in the reply
    chain among these messages), then the id, so every reader sees one order."""
    depth, parent, hops = 0, opened, 0
    while hops < len(by_id) and (target := next(iter(parent.rumor.tag_values("e")), None)) in by_id:
        parent, hops = by_id[target], hops + 1
        if parent.rumor.created_at == opened.rumor.created_at:
            depth += 1
    return (opened.rumor.created_at, depth, opened.rumor.id)


class PrivateDms:
    def __init__(self, session: Session) -> None:
        self._s = session
        self.unreadable = 0  # wraps of the last read that did not open

    async def send(self, pubkeys: Iterable[str], content: Text, reply_to: str | None = None) -> PrivateSent:
        """Send `content` end-to-end encrypted to 1–8 people (hex or npub): a kind 14 rumor,
        sealed and wrapped to each of them and to myself. `reply_to` is the id of the private
        message answered. Raises UserError (recipients, text, a message too long to wrap),
        the WebSocket's AuthError / NetworkError, or the relay's refusal."""
        s = self._s
        others = list(dict.fromkeys(pubkey_arg(p) for p in pubkeys))
        if not 1 <= len(others) <= MAX_RECIPIENTS:
            raise UserError(f"--pubkey must be given 1-{MAX_RECIPIENTS} times")
        text = text_arg(content, max_bytes=nip59.MAX_CONTENT_BYTES)
        extra = [["e", event_id_arg(reply_to, "--reply-to")]] if reply_to else []
        secret = s.identity.secret
        try:
            rumor = nip59.make_rumor(secret, others, text, extra)
            wraps = nip59.wrap_message(secret, rumor, [*others, s.pubkey])
        except ValueError as exc:  # a text whose JSON escapes outgrow NIP-44's 64 KiB
            raise UserError(f"cannot encrypt this message: {exc}") from None
        async with s.websocket() as client:
            for wrap in wraps:
                try:
                    result = await client.publish(wrap)
                except Exception as exc:
                    raise websocket_failure(exc) from None
                if not result.accepted:
                    raise refused(result)
        return PrivateSent(
            rumor.id, rumor.created_at, others, extra[0][1] if extra else None, [w.id for w in wraps]
        )

    async def messages(self, with_pubkeys: Iterable[str] = (), limit: int = 100) -> list[PrivateMessage]:
        """My private messages, oldest first, at most `limit` (the newest): all of them, or the
        conversation with exactly these people (hex or npub). Reads at most MAX_WRAPS_READ wraps."""
        people = sorted({pubkey_arg(p) for p in with_pubkeys} - {self._s.pubkey})
        wraps = await self._s.query(
            [{"kinds": [nip59.GIFT_WRAP_KIND], "#p": [self._s.pubkey], "limit": MAX_WRAPS_READ}]
        )
        opened, self.unreadable = open_wraps(self._s.identity.secret, wraps)
        rows = [message_of(o, self._s.pubkey) for o in opened]
        if people:
            rows = [r for r in rows if r.participants == people]
        return rows[-limit:]

    async def conversations(self) -> list[PrivateConversation]:
        """My private conversations, most recent first (one row per set of other people)."""
        rows: dict[tuple[str, ...], list[PrivateMessage]] = {}
        for msg in await self.messages(limit=MAX_WRAPS_READ):
            rows.setdefault(tuple(msg.participants), []).append(msg)
        out = [PrivateConversation(None, list(k), True, v[-1].created_at, len(v)) for k, v in rows.items()]
        return sorted(out, key=lambda c: (-c.last_at, c.participants))

    async def publish_inbox(self, relays: Iterable[str] = ()) -> Event:
        """Publish my kind 10050 naming `relays` (default: this relay's WebSocket URL), so
        NIP-17 senders know where to wrap my private DMs. Returns the event."""
        urls = list(dict.fromkeys(websocket_url(u) for u in relays)) or [websocket_url(self._s.relay_url)]
        event = self._s.sign(nip59.INBOX_RELAYS_KIND, "", [["relay", u] for u in urls])
        await self._s.publish(event)
        return event

    async def inbox(self, pubkey: str) -> list[str]:
        """The relays `pubkey` receives private DMs on (its newest 10050), [] when none."""
        found = await self._s.query([{"kinds": [nip59.INBOX_RELAYS_KIND], "authors": [pubkey_arg(pubkey)]}])
        newest = max(found, key=lambda e: (e.created_at, e.id), default=None)
        return nip59.inbox_relays(newest) if newest is not None else []
