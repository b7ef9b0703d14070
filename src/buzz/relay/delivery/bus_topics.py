"""Which channel topics this replica wants (relay.md §12.4 item 3), with no Redis in it.

A channel topic is wanted while at least one local filter names the channel in `#h`: every
live subscription acquires each channel it names once, and releases it when it goes. The last
release does not drop the topic at once but after `debounce_s` (500 ms,
`TOPIC_UNSUBSCRIBE_DEBOUNCE_MS`), so a REQ replaced by the same REQ, or a reconnecting client,
does not make the replica unsubscribe and subscribe again. An acquire during the debounce
keeps the topic. `on_change()` runs whenever the wanted set changed (the bus then syncs its
Redis subscriptions).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Protocol

from buzz.core.channel_id import is_channel_id
from buzz.core.filters import Filter

TOPIC_UNSUBSCRIBE_DEBOUNCE_S = 0.5


class Timer(Protocol):
    def cancel(self) -> None: ...


Scheduler = Callable[[float, Callable[[], None]], Timer]


def named_channels(filters: Iterable[Filter]) -> frozenset[str]:
    """The canonical channel ids that filters able to match something name in `#h`."""
    return frozenset(c for flt in filters if not flt.is_empty_match for c in flt.channels if is_channel_id(c))


def _loop_scheduler(delay: float, callback: Callable[[], None]) -> Timer:
    return asyncio.get_running_loop().call_later(delay, callback)


class TopicRefs:
    """Reference counts per channel id; `wanted` is the set of channels to subscribe to."""

    def __init__(
        self,
        on_change: Callable[[], None],
        debounce_s: float = TOPIC_UNSUBSCRIBE_DEBOUNCE_S,
        schedule: Scheduler = _loop_scheduler,
    ) -> None:
        self._on_change = on_change
        self._debounce = debounce_s
        self._schedule = schedule
        self._counts: dict[str, int] = {}
        self._pending: dict[str, Timer] = {}  # channel -> timer of its debounced release

    @property
    def wanted(self) -> frozenset[str]:
        """Channels with a live reference or inside their release debounce."""
        return frozenset(self._counts) | frozenset(self._pending)

    def count(self, channel_id: str) -> int:
        """How many live subscriptions name `channel_id` (0 during its debounce)."""
        return self._counts.get(channel_id, 0)

    def acquire(self, channel_id: str) -> None:
        """One more local filter names `channel_id`."""
        timer = self._pending.pop(channel_id, None)
        if timer is not None:
            timer.cancel()  # still subscribed: the debounce simply ends
        first = channel_id not in self._counts and timer is None
        self._counts[channel_id] = self._counts.get(channel_id, 0) + 1
        if first:
            self._on_change()

    def release(self, channel_id: str) -> None:
        """One local filter fewer; the last one starts the debounce. An unknown id is ignored."""
        n = self._counts.get(channel_id)
        if n is None:
            return
        if n > 1:
            self._counts[channel_id] = n - 1
            return
        del self._counts[channel_id]
        self._pending[channel_id] = self._schedule(self._debounce, lambda: self._expire(channel_id))

    def _expire(self, channel_id: str) -> None:
        if self._pending.pop(channel_id, None) is not None and channel_id not in self._counts:
            self._on_change()

    def close(self) -> None:
        """Cancel pending debounces (at shutdown)."""
        for timer in self._pending.values():
            timer.cancel()
        self._pending.clear()
