"""The relay's pings (relay.md §7.1 item 4: every 30 s; 3 unanswered in a row close the
connection): one loop timer for every connection instead of one per connection.

Issue 17 (10,000 idle connections): a timer per connection held ~0.5 KiB. Here connections sit
in `slots` sets, one per 1/`slots` of the interval; each tick pings one set, so every
connection is pinged once per interval (the first ping one interval after it joined) and the
pings of many connections are spread over the interval instead of coming in a burst.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from buzz.core.limits import PING_INTERVAL_S

log = logging.getLogger(__name__)

SLOTS = 30


class Pinged(Protocol):
    def ping_due(self) -> None:
        """Ping now, or close after too many unanswered pings."""
        ...


class PingWheel:
    """Not thread-safe; lives on the event loop. The timer runs only while a connection is in."""

    def __init__(self, interval_s: float = PING_INTERVAL_S, slots: int = SLOTS) -> None:
        self._slots: list[set[Pinged]] = [set() for _ in range(slots)]
        self._tick_s = interval_s / slots
        self._next = 0  # the slot the next tick pings
        self._count = 0
        self._timer: asyncio.TimerHandle | None = None

    def __len__(self) -> int:
        return self._count

    def add(self, conn: Pinged) -> int:
        """Join `conn`; returns its slot (for `remove`). Its first ping is one interval away:
        it joins the slot the last tick pinged."""
        slot = (self._next - 1) % len(self._slots)
        self._slots[slot].add(conn)
        self._count += 1
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self._tick_s, self._tick)
        return slot

    def remove(self, conn: Pinged, slot: int) -> None:
        members = self._slots[slot]
        if conn in members:
            members.discard(conn)
            self._count -= 1
        if not self._count and self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _tick(self) -> None:
        due = self._slots[self._next]
        self._next = (self._next + 1) % len(self._slots)
        for conn in list(due):
            try:
                conn.ping_due()
            except Exception:  # one connection's failure never stops the others' pings
                log.exception("ping failed")
        self._timer = asyncio.get_running_loop().call_later(self._tick_s, self._tick) if self._count else None
