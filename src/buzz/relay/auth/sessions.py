"""What access re-checks walk: this process's sockets and the huddle seats it owns for others.

Revocation (relay.md §4.7) and the ban watch (§7.3 item 2.3) close what a key may no longer
use. On one process that is its connections (Nostr sockets and audio sockets). With the huddle
mesh (huddle.md §9), a room's owner also holds seats whose sockets live on other replicas; it
re-checks them too, so a seat that lost access is dropped by the owner itself rather than only
when the ingress replica notices (docs/decisions.md). `relay.connections` stays the budget's
count (§2.2 row 2): remote seats are not connections of this process.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator


class Sessions:
    """Iterates a snapshot of `connections`, then of `extra()` (read at each iteration)."""

    __slots__ = ("_connections", "_extra")

    def __init__(self, connections: Iterable[object], extra: Callable[[], Iterable[object]]) -> None:
        self._connections = connections
        self._extra = extra

    def __iter__(self) -> Iterator[object]:
        yield from list(self._connections)
        yield from list(self._extra())


def keys_of(conn: object) -> frozenset[str]:
    """Every key a connection authenticated (a Nostr socket may hold several, NIP-42), or an
    audio seat's one key; empty before authentication."""
    keys = getattr(conn, "pubkeys", None)
    if keys is not None:
        return frozenset(keys)
    pubkey = getattr(conn, "pubkey", None)
    return frozenset() if pubkey is None else frozenset({pubkey})
