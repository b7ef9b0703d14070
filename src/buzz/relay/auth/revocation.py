"""Access revocation (relay.md §4.7): after a channel change, close every live subscription
that names the channel in `#h` and whose reader can no longer read it.

One rule covers the three cases of §4.7: a member removed from a private channel, an open
channel turned private (every connected non-member), and a deleted channel (everyone). It runs
after this process invalidated its membership cache, so `readable` sees the new state. The same
rule drops a huddle participant (an audio socket, huddle.md §3.6) who can no longer read the
huddle's channel: on a mesh ingress replica that also unregisters the seat at the room's owner,
so everyone else gets `left` (issue 15). On the room's owner the same rule covers the seats
other replicas hold in its rooms (`RemoteHub.seats`): the owner drops one that lost access
itself, even if the ingress replica never heard of the change. A seat in a channel that is now
archived (the starter's `huddle leave --end`, or the TTL) is ended the same way with
`room_ended` (docs/decisions.md): nobody stays in a huddle that has ended.
Independently, delivery re-checks access per event (§12.1), so a missed eviction leaks nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Protocol

from buzz.core.filters import Filter
from buzz.relay.auth.access import ChannelAccess

log = logging.getLogger(__name__)

ACCESS_REVOKED = "restricted: channel access revoked"


class _Sub(Protocol):
    sub_id: str
    filters: tuple[Filter, ...]


class _Seated(Protocol):
    pubkey: str | None

    def huddle_channel(self) -> str | None: ...

    def revoke(self) -> None: ...

    def ban(self) -> None: ...

    def end(self) -> None: ...


def huddle_seat(conn: object) -> _Seated | None:
    """`conn` when it is a huddle seat (an audio socket, or on a mesh owner a seat another
    replica holds in its room), else None."""
    return conn if callable(getattr(conn, "huddle_channel", None)) else None  # type: ignore[return-value]


def channels_read(conn: object) -> set[str]:
    """The channels `revoke_unreadable` re-checks for `conn`: every `#h` of its live
    subscriptions and, for a huddle seat, the huddle's channel."""
    out = {
        channel_id
        for sub in list(getattr(conn, "subs", {}).values())
        for flt in sub.filters
        for channel_id in flt.channels
    }
    seat = huddle_seat(conn)
    if seat is not None and (channel_id := seat.huddle_channel()) is not None:
        out.add(channel_id)
    return out


def names_channel(sub: _Sub, channel_id: str) -> bool:
    """True when some filter of `sub` lists `channel_id` in `#h` (relay.md §6.2)."""
    return any(channel_id in flt.channels for flt in sub.filters)


async def revoke_unreadable(connections: Iterable[object], access: ChannelAccess, channel_id: str) -> int:
    """Evict, with `CLOSED "restricted: channel access revoked"`, each live subscription naming
    `channel_id` whose connection's reader fails `readable(C, reader)`. Returns how many."""
    evicted = 0
    archived: list[bool] = []  # looked up once, at the first seat in the channel that stays readable
    for conn in list(connections):
        seat = huddle_seat(conn)
        if seat is not None:
            evicted += await _revoke_seat(seat, access, channel_id, archived)
            continue
        subs = getattr(conn, "subs", None)
        if not subs:
            continue
        naming = [sub.sub_id for sub in list(subs.values()) if names_channel(sub, channel_id)]
        if not naming or await access.readable(channel_id, conn.reader):  # type: ignore[attr-defined]
            continue
        for sub_id in naming:
            conn.evict(sub_id, ACCESS_REVOKED)  # type: ignore[attr-defined]
            evicted += 1
    if evicted:
        log.info("revoked %d subscription(s) naming channel %s", evicted, channel_id)
    return evicted


async def _revoke_seat(conn: _Seated, access: ChannelAccess, channel_id: str, archived: list[bool]) -> int:
    if conn.huddle_channel() != channel_id or conn.pubkey is None:
        return 0
    if await access.readable(channel_id, conn.pubkey):
        if not archived:
            archived.append(await access.archived(channel_id))
        if not archived[0]:
            return 0
        conn.end()
        log.info("huddle seat of %s on channel %s ended: the channel is archived", conn.pubkey, channel_id)
        return 1
    conn.revoke()
    log.info("huddle seat of %s on channel %s revoked", conn.pubkey, channel_id)
    return 1
