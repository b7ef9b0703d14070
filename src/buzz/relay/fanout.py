"""In-process live fan-out (relay.md §12.1, §12.3).

For an accepted event: find candidate subscriptions through the index, then deliver to each
whose subscriber passes `visible` at delivery time (sets predicate + channel readability with
current membership). The event is serialized once (`LiveEvent`); each subscriber's EVENT frame
is a concatenation around it, written straight to a socket that takes it at once. The loop
awaits only for a membership answer the cache does not hold.

With Redis configured (relay.md §12.4), `publish` also hands the event to the bus for the other
replicas; events arriving from the bus take `deliver`, the local half only.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Protocol

from buzz.core.stored import StoredEvent, require_verified
from buzz.relay.access import ChannelAccess
from buzz.relay.metrics_prom import RelayMetrics
from buzz.relay.subscriptions import LiveEvent, Subscription, SubscriptionIndex

log = logging.getLogger(__name__)


class Announcer(Protocol):
    """Hands an accepted event to the other replicas (`buzz.relay.bus.RedisBus`); never raises."""

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

    async def deliver(self, stored: StoredEvent) -> int:
        """The local half of `publish` (relay.md §12.1): also the path of events received from
        other replicas. Raises UnverifiedEnvelope for an unverified envelope."""
        require_verified(stored)
        event, channel_id = stored.event, stored.channel_id
        started = time.perf_counter()  # fanout_seconds: matching + every frame handed over
        subs: list[Subscription] = list(self.index.matching(event, channel_id))
        if not subs:
            return 0
        live = LiveEvent(event.id, event.to_json())
        access = self._access
        delivered = 0
        for sub in subs:
            reader = sub.conn.pubkey
            seen = access.visible_known(stored, reader)
            if seen is None:  # not in the membership cache: ask the store
                seen = await access.visible(stored, reader)
            if not seen:
                continue  # relay.md §12.1 item 1: visible at delivery time
            if sub.sent_ids and event.id in sub.sent_ids:
                continue  # already sent from the stored results of this REQ
            try:
                sub.deliver(live)
            except Exception:  # one broken subscriber never stops delivery to the others
                log.exception("delivery to subscription %r failed", sub.sub_id)
                continue
            delivered += 1
        if self.metrics is not None:
            self.metrics.fanout_seconds.observe(time.perf_counter() - started)
            self.metrics.deliveries.inc(delivered)
        return delivered

    def publish_soon(self, stored: StoredEvent) -> None:
        """Schedule `publish` without awaiting (OK may go out first, relay.md §8 item 18)."""
        task = asyncio.get_running_loop().create_task(self.publish(stored))
        task.add_done_callback(_log_failure)


def _log_failure(task: asyncio.Task[int]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("fan-out failed", exc_info=task.exception())
