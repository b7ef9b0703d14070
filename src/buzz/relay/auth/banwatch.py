"""Cut the open sessions of a key the operator bans while the relay runs (relay.md §7.3 item 2.3).

`buzz admin ban` writes the ban list in the store from another process; the ban gate refuses
the key's next AUTH, and this watcher closes the sessions it already holds: every `POLL_S`
seconds it reads the ban list (one small query) and closes each authenticated WebSocket
connection whose pubkey is on it, after a NOTICE with the ban text. A session admitted as an
agent is closed when its owner is banned too: the owners its AUTH named or reached (`owners`,
from `Relay.admission`: the NIP-OA owner and a NIP-AA chain) are looked up with its pubkey,
since a ban of any of them refuses its next AUTH. A huddle seat (an audio socket, or on a mesh
owner a seat another replica holds in its room) is ended the huddle way (`ban()`: huddle.md §4.2
step 2 error, close 1008; `left` to the others). The query answers the same on every replica,
so each one closes its own connections and the seats it owns (a mesh owner knows a remote
seat's pubkey only: an agent's seat held elsewhere is ended by the replica holding its socket).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable

from buzz.core import messages
from buzz.relay.auth.revocation import huddle_seat
from buzz.relay.auth.sessions import keys_of

log = logging.getLogger(__name__)

POLL_S = 5.0
BANNED = "blocked: you are banned from this community"


def ban_keys(conn: object) -> frozenset[str]:
    """The keys whose ban ends `conn`: every key it authenticated (a Nostr socket may hold
    several, NIP-42) and the owners their admissions named (none before authentication)."""
    keys = keys_of(conn)
    if not keys:
        return frozenset()
    return keys | frozenset(getattr(conn, "owners", ()))


def close_banned(connections: Iterable[object], banned: frozenset[str]) -> int:
    """Close every connection whose pubkey, or an owner its admission named, is in `banned`;
    returns how many."""
    closed = 0
    for conn in list(connections):
        if banned.isdisjoint(ban_keys(conn)):
            continue
        seat = huddle_seat(conn)
        if seat is not None:
            seat.ban()
            closed += 1
            continue
        if not hasattr(conn, "close_soon"):
            continue
        conn.send(messages.notice(BANNED))  # type: ignore[attr-defined]
        conn.close_soon(code=1008, message=b"blocked", last_words=True)  # type: ignore[attr-defined]
        closed += 1
    return closed


async def watch(
    connections: Iterable[object],
    banned_among: Callable[[Iterable[str]], Awaitable[frozenset[str]]],
    poll_s: float = POLL_S,
) -> None:
    """Run until cancelled. A failed lookup is logged at DEBUG and retried at the next poll (the
    AUTH gate still holds)."""
    while True:
        await asyncio.sleep(poll_s)
        online = frozenset().union(*(ban_keys(c) for c in list(connections)))
        if not online:
            continue
        try:
            banned = await banned_among(online)
        except Exception as exc:  # StoreError, a closed store at shutdown
            log.debug("ban list lookup failed: %s", exc)
            continue
        if banned and (n := close_banned(connections, banned)):
            log.info("closed %d connection(s) of banned key(s)", n)


async def stop(task: asyncio.Task[None] | None) -> None:
    """Cancel the watcher started with `asyncio.create_task(watch(…))`; None is a no-op."""
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
