"""Per-peer jitter buffer and the 10 ms playout clock (huddle.md §10.3). Pure: time is passed in.

Times are milliseconds (float) on any monotonic clock the caller chooses. One packet is 20 ms.

JitterBuffer: packets are ordered by the sender's `seq` (u16, unwrapped to an ever-growing
number); `ts_48k` feeds the RFC 3550 inter-arrival jitter estimate J. The target delay is
`FRAME_MS + 4·J`, clamped to 40…200 ms. Playout starts once the oldest buffered packet has waited
the target delay; a missing packet at its turn is reported as `MISSING` (the decoder conceals it);
an empty buffer is an underrun and playout waits for the target delay again. Held packets are
capped at 50 (the oldest goes), and a backlog beyond target + 60 ms is skipped to cut latency.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from buzz.core.huddle_wire import (
    JITTER_MAX_DELAY_MS,
    JITTER_MAX_PACKETS,
    JITTER_MIN_DELAY_MS,
    PLAYOUT_STALL_RESET_MS,
    PLAYOUT_TICK_MS,
)

FRAME_MS = 20.0
SKIP_MARGIN_MS = 60.0  # backlog above target + this is dropped
RESYNC_FRAMES = 250  # a seq jump of more than 5 s restarts the buffer (sender restarted)


class Gap(enum.Enum):
    MISSING = "missing"  # a packet was lost or arrived too late: conceal one frame


MISSING = Gap.MISSING


@dataclass(slots=True)
class JitterStats:
    received: int = 0
    late: int = 0
    duplicate: int = 0
    overflow: int = 0
    skipped: int = 0
    missing: int = 0
    underruns: int = 0
    resyncs: int = 0


class JitterBuffer:
    """Reorder buffer for one remote peer's Opus packets (§10.3)."""

    def __init__(
        self,
        *,
        min_delay_ms: float = JITTER_MIN_DELAY_MS,
        max_delay_ms: float = JITTER_MAX_DELAY_MS,
        capacity: int = JITTER_MAX_PACKETS,
    ) -> None:
        self.min_delay_ms = min_delay_ms
        self.max_delay_ms = max_delay_ms
        self.capacity = capacity
        self.stats = JitterStats()
        self.jitter_ms = 0.0
        self._packets: dict[int, tuple[float, bytes]] = {}  # ext seq → (arrival ms, payload)
        self._next: int | None = None  # ext seq to play next; None while (re)buffering
        self._played: int | None = None  # last ext seq handed out or skipped
        self._high: int | None = None  # highest ext seq seen
        self._last: tuple[float, int] | None = None  # (arrival ms, ts_48k) of the previous packet

    def __len__(self) -> int:
        return len(self._packets)

    @property
    def target_delay_ms(self) -> float:
        return min(self.max_delay_ms, max(self.min_delay_ms, FRAME_MS + 4.0 * self.jitter_ms))

    @property
    def playing(self) -> bool:
        return self._next is not None

    def _unwrap(self, seq: int) -> int:
        if self._high is None:
            return seq
        delta = ((seq - self._high + 0x8000) & 0xFFFF) - 0x8000
        return self._high + delta

    def _reset(self) -> None:
        self._packets.clear()
        self._next = self._played = self._high = self._last = None
        self.stats.resyncs += 1

    def push(self, seq: int, ts_48k: int, payload: bytes, now_ms: float) -> bool:
        """Store one packet (`seq` u16, `ts_48k` u32) that arrived at `now_ms`; False if dropped."""
        self.stats.received += 1
        ext = self._unwrap(seq)
        if self._high is not None and abs(ext - self._high) > RESYNC_FRAMES:
            self._reset()
            ext = seq
        if self._played is not None and ext <= self._played:
            self.stats.late += 1
            return False
        if ext in self._packets:
            self.stats.duplicate += 1
            return False
        self._update_jitter(ts_48k, now_ms)
        self._packets[ext] = (now_ms, payload)
        self._high = ext if self._high is None else max(self._high, ext)
        if len(self._packets) > self.capacity:
            oldest = min(self._packets)
            del self._packets[oldest]
            self._mark_played(oldest)
            self.stats.overflow += 1
        return True

    def _update_jitter(self, ts_48k: int, now_ms: float) -> None:
        if self._last is not None:
            last_arrival, last_ts = self._last
            dts = ((ts_48k - last_ts + 0x80000000) & 0xFFFFFFFF) - 0x80000000
            d = (now_ms - last_arrival) - dts / 48.0
            self.jitter_ms += (abs(d) - self.jitter_ms) / 16.0
        self._last = (now_ms, ts_48k)

    def _mark_played(self, ext: int) -> None:
        self._played = ext if self._played is None else max(self._played, ext)
        if self._next is not None and self._next <= ext:
            self._next = ext + 1

    def pop(self, now_ms: float) -> bytes | Gap | None:
        """The next 20 ms slot: a payload, MISSING (conceal it), or None (nothing to play yet)."""
        if self._next is None:
            if not self._packets:
                return None
            oldest = min(self._packets)
            if now_ms - self._packets[oldest][0] < self.target_delay_ms:
                return None
            self._next = oldest
        assert self._high is not None
        while (self._high - self._next + 1) * FRAME_MS > self.target_delay_ms + SKIP_MARGIN_MS:
            self._packets.pop(self._next, None)
            self._mark_played(self._next)
            self.stats.skipped += 1
        if not self._packets:
            self.stats.underruns += 1
            self._next = None
            return None
        ext = self._next
        self._mark_played(ext)
        item = self._packets.pop(ext, None)
        if item is None:
            self.stats.missing += 1
            return MISSING
        return item[1]


class PlayoutClock:
    """The 10 ms playout schedule (§10.3): how many ticks are due at `now_ms`.

    After a stall of more than 300 ms it restarts the schedule at `now_ms` (one tick) instead of
    running the missed ticks.
    """

    def __init__(
        self, tick_ms: float = PLAYOUT_TICK_MS, stall_reset_ms: float = PLAYOUT_STALL_RESET_MS
    ) -> None:
        self.tick_ms = tick_ms
        self.stall_reset_ms = stall_reset_ms
        self.resets = 0
        self._next: float | None = None

    def due(self, now_ms: float) -> int:
        if self._next is None:
            self._next = now_ms
        elif now_ms - self._next > self.stall_reset_ms:
            self.resets += 1
            self._next = now_ms
        ticks = 0
        while self._next <= now_ms:
            ticks += 1
            self._next += self.tick_ms
        return ticks

    @property
    def next_tick_ms(self) -> float | None:
        return self._next
