"""Per-key rate limits of the relay, in memory and per process (relay.md §12.3: a replica
counts what it serves). Used by the 44200 turn metrics (`rules/metrics.py`) and huddle joins
(`huddle/socket.py`)."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable


class SlidingWindow:
    """At most `limit` hits per `window` seconds per key, counted over the trailing window.

    In memory and per process (one relay process in the first release, relay.md §12.3).
    `clock` returns seconds (monotonic by default).
    """

    def __init__(self, limit: int, window: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit = limit
        self.window = window
        self.clock = clock
        self._hits: dict[str, deque[float]] = {}

    def allow(self, key: str) -> bool:
        """Record a hit for `key` and return True, or return False (recording nothing) when
        `key` already has `limit` hits inside the window."""
        now = self.clock()
        hits = self._hits.setdefault(key, deque())
        while hits and now - hits[0] >= self.window:
            hits.popleft()
        if len(hits) >= self.limit:
            return False
        hits.append(now)
        self._prune(now)
        return True

    def _prune(self, now: float) -> None:
        """Drop keys whose newest hit has left the window, so memory stays bounded by the
        number of agents active in the last window."""
        if len(self._hits) < 1024:
            return
        stale = [k for k, hits in self._hits.items() if not hits or now - hits[-1] >= self.window]
        for key in stale:
            del self._hits[key]
