"""Per-channel work queue of the harness (agents.md §4.7), pure: time is passed in.

- each channel has a FIFO of accepted events; at most one batch per channel is in flight;
- dispatch picks, among channels with work and no batch in flight, the one whose oldest
  pending event has waited longest, and takes up to `BATCH_MAX` (50) events as one batch;
- at most `PENDING_CAP` (500) pending events per channel; overflow evicts the oldest, which
  `push` returns so the caller removes its 👀;
- a *solo* item (a caught-up mention, issue 14 item 5) is always a batch of its own and is
  never taken by steering, so each one is answered in its own thread;
- a failed batch goes back to the head of its channel and is retried on its own, at most
  `max_attempts` (default 10) attempts, after a backoff of `backoff_base` (default 5 s)
  doubling up to 300 s; the last failure dead-letters it (`fail` returns `DeadLetter`);
- a failed job (`fail(…, hold=False)`, docs/decisions.md 372) does not hold its channel: it
  waits aside for its backoff while the channel's other work goes on, then is taken before
  younger work.

Times are float seconds from any monotonic clock.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from buzz.core.event import Event

BATCH_MAX = 50
PENDING_CAP = 500
MAX_ATTEMPTS = 10
BACKOFF_BASE_S = 5.0
BACKOFF_CAP_S = 300.0


@dataclass(eq=False)
class Item:
    """One accepted event. `reactions` maps an emoji to the id of the status reaction we
    published on it (👀 when queued, 💬 when prompted), for removal by kind 5 (§4.13)."""

    event: Event
    channel: str
    enqueued_at: float
    reactions: dict[str, str] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    solo: bool = False


@dataclass(eq=False)
class Batch:
    """Events of one channel delivered in one prompt; `attempts` counts failed attempts."""

    channel: str
    items: list[Item]
    attempts: int = 0

    @property
    def events(self) -> list[Event]:
        return [i.event for i in self.items]


@dataclass(frozen=True, slots=True)
class Retry:
    delay_s: float
    attempts: int


@dataclass(frozen=True, slots=True)
class DeadLetter:
    batch: Batch


def backoff_s(attempts: int, base: float = BACKOFF_BASE_S) -> float:
    """Delay before retry number `attempts` (1-based): base, 2·base, 4·base, … capped at 300 s."""
    return min(base * 2 ** max(attempts - 1, 0), BACKOFF_CAP_S)


@dataclass
class _Channel:
    pending: deque[Item] = field(default_factory=deque)
    retry: Batch | None = None
    not_before: float = 0.0
    in_flight: Batch | None = None
    aside: list[tuple[float, Batch]] = field(default_factory=list)  # (not before, batch), unheld

    def due(self, now: float) -> Batch | None:
        """The batch back from aside that goes before the pending head at `now`: the oldest
        whose backoff is over, unless the pending head was queued before it."""
        ready = [b for at, b in self.aside if at <= now]
        if not ready:
            return None
        batch = min(ready, key=lambda b: b.items[0].enqueued_at)
        if self.pending and self.pending[0].enqueued_at < batch.items[0].enqueued_at:
            return None
        return batch

    def oldest(self, now: float) -> float | None:
        """When the next batch to take was queued; None when nothing may go now."""
        if self.retry is not None and self.retry.items:
            return None if self.not_before > now else self.retry.items[0].enqueued_at
        due = self.due(now)
        if due is not None:
            return due.items[0].enqueued_at
        return self.pending[0].enqueued_at if self.pending else None


class WorkQueue:
    """All channels' queues. Not thread-safe; one asyncio task drives it."""

    def __init__(
        self,
        batch_max: int = BATCH_MAX,
        pending_cap: int = PENDING_CAP,
        max_attempts: int = MAX_ATTEMPTS,
        backoff_base: float = BACKOFF_BASE_S,
    ) -> None:
        self.batch_max = batch_max
        self.pending_cap = pending_cap
        self.max_attempts = max_attempts
        self.backoff_base = backoff_base
        self._channels: dict[str, _Channel] = {}
        self.on_change: Callable[[str], None] = lambda channel: None  # a channel's waiting count moved

    def _ch(self, channel: str) -> _Channel:
        return self._channels.setdefault(channel, _Channel())

    # -- intake ----------------------------------------------------------------------------
    def push(self, item: Item) -> Item | None:
        """Append `item` to its channel; returns the evicted oldest item on overflow, else None."""
        ch = self._ch(item.channel)
        ch.pending.append(item)
        self.on_change(item.channel)
        if len(ch.pending) > self.pending_cap:
            return ch.pending.popleft()
        return None

    # -- dispatch --------------------------------------------------------------------------
    def ready(self, now: float) -> list[str]:
        """Channels with work, no batch in flight and no retry pending in the future, oldest
        waiting first."""
        out = []
        for name, ch in self._channels.items():
            oldest = ch.oldest(now)
            if oldest is None or ch.in_flight is not None:
                continue
            out.append((oldest, name))
        return [name for _, name in sorted(out)]

    def take(self, channel: str, now: float | None = None) -> Batch:
        """Mark and return the next batch of `channel`: its retried batch, else a batch back
        from aside whose backoff is over (at `now`) if older than the pending head, else up to
        `batch_max` pending events. Raises ValueError when the channel is busy or empty."""
        ch = self._ch(channel)
        if ch.in_flight is not None:
            raise ValueError(f"channel {channel} already has a batch in flight")
        due = ch.due(now) if now is not None else None
        if ch.retry is not None:
            batch, ch.retry = ch.retry, None
        elif due is not None:
            batch = due
            ch.aside = [(at, b) for at, b in ch.aside if b is not due]
        elif ch.pending:
            batch = Batch(channel, self._leading(ch, self.batch_max))
        else:
            raise ValueError(f"channel {channel} has nothing pending")
        ch.in_flight = batch
        self.on_change(channel)
        return batch

    def next_batch(self, now: float, accept: Callable[[str], bool] = lambda c: True) -> Batch | None:
        """`take` on the first `ready` channel that `accept` allows, or None."""
        for channel in self.ready(now):
            if accept(channel):
                return self.take(channel, now)
        return None

    def take_pending(self, channel: str, limit: int | None = None) -> list[Item]:
        """Remove and return up to `limit` (default `batch_max`) pending events of `channel`
        without touching its in-flight batch (steering, §4.8)."""
        ch = self._ch(channel)
        if ch.pending and ch.pending[0].solo:
            return []
        taken = self._leading(ch, limit or self.batch_max)
        if taken:
            self.on_change(channel)
        return taken

    @staticmethod
    def _leading(ch: _Channel, limit: int) -> list[Item]:
        """Up to `limit` pending items from the head, stopping before a solo item; a solo item
        at the head is taken alone."""
        if ch.pending and ch.pending[0].solo:
            return [ch.pending.popleft()]
        out: list[Item] = []
        while ch.pending and len(out) < limit and not ch.pending[0].solo:
            out.append(ch.pending.popleft())
        return out

    # -- completion ------------------------------------------------------------------------
    def in_flight(self, channel: str) -> Batch | None:
        ch = self._channels.get(channel)
        return ch.in_flight if ch else None

    def finish(self, channel: str) -> None:
        """The in-flight batch of `channel` ended (success, cancellation or supersession)."""
        self._ch(channel).in_flight = None

    def fail(
        self, channel: str, now: float, hold: bool = True, max_attempts: int | None = None
    ) -> Retry | DeadLetter:
        """The in-flight batch failed (§4.7 item 4): put it back at the head for a retry after
        `backoff_s`, or dead-letter it after `max_attempts` (at most the queue's) failed
        attempts. `hold=False`: the batch waits aside, and the channel's other work goes on."""
        ch = self._ch(channel)
        batch = ch.in_flight
        if batch is None:
            raise ValueError(f"channel {channel} has no batch in flight")
        ch.in_flight = None
        batch.attempts += 1
        if batch.attempts >= min(max_attempts or self.max_attempts, self.max_attempts):
            return DeadLetter(batch)
        delay = backoff_s(batch.attempts, self.backoff_base)
        if hold:
            ch.retry = batch
            ch.not_before = now + delay
        else:
            ch.aside.append((now + delay, batch))
        self.on_change(channel)
        return Retry(delay, batch.attempts)

    def remove(self, channel: str, event_id: str) -> Item | None:
        """Take the queued (not in-flight) item of `event_id` out of `channel` (a cancelled
        job, jobs spec §6.7); None when it is not waiting there."""
        ch = self._channels.get(channel)
        if ch is None:
            return None
        for item in ch.pending:
            if item.event.id == event_id:
                ch.pending.remove(item)
                self.on_change(channel)
                return item
        for at, batch in ch.aside:
            if any(i.event.id == event_id for i in batch.items):
                ch.aside.remove((at, batch))
                self.on_change(channel)
                return batch.items[0]
        if ch.retry is not None and any(i.event.id == event_id for i in ch.retry.items):
            batch, ch.retry = ch.retry, None
            # The backoff was the retried batch's; what waits behind it may go now (a cancelled
            # retry left the channel asleep until its delay ran out, with nothing to wake it).
            ch.not_before = 0.0
            self.on_change(channel)
            return batch.items[0]
        return None

    def drain(self, channel: str) -> list[Item]:
        """Remove every queued (not in-flight) event of `channel` (removal, §4.3 item 3)."""
        ch = self._channels.get(channel)
        if ch is None:
            return []
        items = list(ch.retry.items) if ch.retry else []
        items.extend(i for _, b in ch.aside for i in b.items)
        items.extend(ch.pending)
        ch.pending.clear()
        ch.aside.clear()
        ch.retry = None
        ch.not_before = 0.0
        if items:
            self.on_change(channel)
        return items

    # -- introspection ---------------------------------------------------------------------
    def pending_count(self, channel: str) -> int:
        ch = self._channels.get(channel)
        if ch is None:
            return 0
        aside = sum(len(b.items) for _, b in ch.aside)
        return len(ch.pending) + (len(ch.retry.items) if ch.retry else 0) + aside

    def next_wakeup(self, now: float) -> float | None:
        """The earliest future `not_before` among channels waiting on a retry, or None."""
        times = [
            ch.not_before for ch in self._channels.values() if ch.retry is not None and ch.not_before > now
        ]
        times += [at for ch in self._channels.values() for at, _ in ch.aside if at > now]
        return min(times) if times else None

    def has_work(self) -> bool:
        """True when any channel has a batch in flight or anything queued."""
        return any(ch.in_flight or ch.pending or ch.retry or ch.aside for ch in self._channels.values())
