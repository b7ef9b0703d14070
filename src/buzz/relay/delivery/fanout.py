"""In-process live fan-out (relay.md §12.1, §12.3).

For an accepted event: find candidate subscriptions through the index, then deliver to each
whose subscriber passes `visible` at delivery time (sets predicate + channel readability with
current membership). The event is serialized once (`LiveEvent`); each subscriber's EVENT frame
is a concatenation around it, built once per subscription id, and written straight to a socket
that takes it at once (its connection's `direct` flag, kept from the transport's pause and
resume). Identical filters are matched once per event (`SubscriptionIndex`). The loop awaits
only for a membership answer the cache does not hold.

With Redis configured (relay.md §12.4), `publish` also hands the event to the bus for the other
replicas; events arriving from the bus take `deliver`, the local half only.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine
from typing import Any, Protocol

from buzz.core.stored import StoredEvent, require_verified
from buzz.relay.auth.access import ChannelAccess
from buzz.relay.delivery.subscriptions import LiveEvent, Subscription, SubscriptionIndex
from buzz.relay.operator.metrics_prom import RelayMetrics

log = logging.getLogger(__name__)


class Announcer(Protocol):
    """Hands an accepted event to the other replicas (`buzz.relay.replicas.bus.RedisBus`); never raises."""

    def announce(self, stored: StoredEvent) -> None: ...


class FanOut:
    def __init__(self, index: SubscriptionIndex, access: ChannelAccess) -> None:
        self.index = index
        self._access = access
        self.bus: Announcer | None = None  # set by the Redis bus (relay.md §12.4), else in-process
        self.metrics: RelayMetrics | None = None  # set by the relay: deliveries, latency

    async def publish(self, stored: StoredEvent) -> int:
        """Deliver `stored` to every matching live subscription of this process (and announce it
        to the other replicas when a bus is set); returns how many local subscriptions got it.

        Raises UnverifiedEnvelope for an unverified envelope (relay.md §2.4 item 3).
        """
        require_verified(stored)
        if self.bus is not None:
            self.bus.announce(stored)  # relay.md §12.4 item 2: echo cache, then publish
        return await self.deliver(stored)

    def publish_now(self, stored: StoredEvent) -> int | Coroutine[Any, Any, int]:
        """`publish` without a coroutine while the membership cache answers for every
        subscriber: the number delivered, or a coroutine that delivers the rest (await it)."""
        require_verified(stored)
        if self.bus is not None:
            self.bus.announce(stored)
        return self._deliver_now(stored)

    async def deliver(self, stored: StoredEvent) -> int:
        """The local half of `publish` (relay.md §12.1): also the path of events received from
        other replicas. Raises UnverifiedEnvelope for an unverified envelope."""
        require_verified(stored)
        done = self._deliver_now(stored)
        return done if isinstance(done, int) else await done

    def _deliver_now(self, stored: StoredEvent) -> int | Coroutine[Any, Any, int]:
        """Deliver synchronously up to the first subscriber whose visibility only the store can
        tell; from there on the returned coroutine delivers the rest, in the same order."""
        event, channel_id = stored.event, stored.channel_id
        started = time.perf_counter()  # fanout_seconds: matching + every frame handed over
        subs = self.index.matching(event, channel_id)
        if not subs:
            return 0
        live = LiveEvent(event.id, event.to_json())
        event_id = event.id
        access = self._access
        delivered = 0
        # The common path in one tight loop: a live subscriber whose socket takes the frame
        # now gets it written to its transport here (the frame built once per subscription id,
        # the transport a flag its connection keeps); the rest go through `_send` and queue.
        for i, sub in enumerate(subs):
            seen = access.visible_known(stored, sub.conn.reader)
            if seen is None:  # not in the membership cache: the store answers, from here on
                return self._deliver_rest(stored, live, subs, i, delivered, started)
            if not seen:  # relay.md §12.1 item 1: visible at delivery time
                continue
            transport = sub.conn.direct if sub.live else None
            if transport is None:
                delivered += _send(sub, live)
                continue
            if sub.sent_ids and event_id in sub.sent_ids:
                continue  # already sent from the stored results of this REQ
            try:
                transport.write(live.frame(sub.sub_id_json))
            except Exception:  # one broken subscriber never stops delivery to the others
                log.exception("delivery to subscription %r failed", sub.sub_id)
                continue
            delivered += 1
        self._done(delivered, started)
        return delivered

    async def _deliver_rest(
        self,
        stored: StoredEvent,
        live: LiveEvent,
        subs: list[Subscription],
        start: int,
        delivered: int,
        started: float,
    ) -> int:
        access = self._access
        for sub in subs[start:]:
            reader = sub.conn.reader
            seen = access.visible_known(stored, reader)
            if seen is None:
                seen = await access.visible(stored, reader)
            if seen:  # relay.md §12.1 item 1: visible at delivery time
                delivered += _send(sub, live)
        self._done(delivered, started)
        return delivered

    def _done(self, delivered: int, started: float) -> None:
        if self.metrics is not None:
            self.metrics.fanout_seconds.observe(time.perf_counter() - started)
            self.metrics.deliveries.inc(delivered)

    def publish_soon(self, stored: StoredEvent) -> None:
        """Schedule `publish` without awaiting (OK may go out first, relay.md §8 item 18)."""
        task = asyncio.get_running_loop().create_task(self.publish(stored))
        task.add_done_callback(_log_failure)


def _send(sub: Subscription, live: LiveEvent) -> int:
    """One delivery to a subscriber that may see the event: 1 if sent (or queued), else 0."""
    if sub.sent_ids and live.id in sub.sent_ids:
        return 0  # already sent from the stored results of this REQ
    try:
        sub.deliver(live)
    except Exception:  # one broken subscriber never stops delivery to the others
        log.exception("delivery to subscription %r failed", sub.sub_id)
        return 0
    return 1


def _log_failure(task: asyncio.Task[int]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("fan-out failed", exc_info=task.exception())
