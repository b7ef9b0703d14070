"""Upload rates and in-progress bytes (media.md §11 item 4), per replica, pure state.

At most `per_replica` uploads in progress, `per_pubkey` of one pubkey, and `per_minute` started
by one pubkey in any 60 s. `take` answers None (taken) or the seconds to wait before retrying;
`reserved(pubkey)` is the declared size of that pubkey's uploads in progress, which the quota
check adds to what is stored (two parallel uploads cannot both squeeze under the quota).
"""

from __future__ import annotations

import math
from collections import defaultdict, deque

WINDOW_S = 60.0


class UploadSlots:
    def __init__(self, per_replica: int, per_pubkey: int, per_minute: int) -> None:
        self.per_replica = per_replica
        self.per_pubkey = per_pubkey
        self.per_minute = per_minute
        self.in_progress = 0
        self._by_pubkey: dict[str, int] = defaultdict(int)
        self._bytes: dict[str, int] = defaultdict(int)
        self._started: dict[str, deque[float]] = {}

    def _recent(self, pubkey: str, now: float) -> deque[float]:
        started = self._started.get(pubkey)
        if started is None:
            return deque()
        while started and started[0] <= now - WINDOW_S:
            started.popleft()
        if not started:
            del self._started[pubkey]
        return started

    def wait_s(self, pubkey: str, now: float) -> int | None:
        """None when `pubkey` may start an upload now, else whole seconds to wait (≥ 1)."""
        if self.in_progress >= self.per_replica or self._by_pubkey.get(pubkey, 0) >= self.per_pubkey:
            return 1
        recent = self._recent(pubkey, now)
        if len(recent) >= self.per_minute:
            return max(1, math.ceil(recent[0] + WINDOW_S - now))
        return None

    def take(self, pubkey: str, size: int, now: float) -> int | None:
        """Start an upload of `size` declared bytes: None when taken, else `wait_s`."""
        wait = self.wait_s(pubkey, now)
        if wait is not None:
            return wait
        self.in_progress += 1
        self._by_pubkey[pubkey] += 1
        self._bytes[pubkey] += size
        self._started.setdefault(pubkey, deque()).append(now)
        return None

    def release(self, pubkey: str, size: int) -> None:
        self.in_progress -= 1
        self._by_pubkey[pubkey] -= 1
        self._bytes[pubkey] -= size
        if self._by_pubkey[pubkey] <= 0:
            del self._by_pubkey[pubkey]
            self._bytes.pop(pubkey, None)

    def reserved(self, pubkey: str) -> int:
        return self._bytes.get(pubkey, 0)
