"""In-process live fan-out (relay.md §12.1, §12.3).

For an accepted event: find candidate subscriptions through the index, then deliver to each
whose subscriber passes `visible` at delivery time (sets predicate + channel readability with
current membership). The event is serialized once and spliced into every EVENT message.
"""

from __future__ import annotations

import asyncio
import logging

from buzz.core import messages
from buzz.core.stored import StoredEvent, require_verified
from buzz.relay.access import ChannelAccess
from buzz.relay.subscriptions import Subscription, SubscriptionIndex

log = logging.getLogger(__name__)


class FanOut:
    def __init__(self, index: SubscriptionIndex, access: ChannelAccess) -> None:
        self.index = index
        self._access = access

    async def publish(self, stored: StoredEvent) -> int:
        """Deliver `stored` to every matching live subscription; returns how many got it.

        Raises UnverifiedEnvelope for an unverified envelope (relay.md §2.4 item 3).
        """
        require_verified(stored)
        event, channel_id = stored.event, stored.channel_id
        subs: list[Subscription] = list(self.index.matching(event, channel_id))
        if not subs:
            return 0
        event_json = event.to_json()
        delivered = 0
        for sub in subs:
            if not await self._access.visible(stored, sub.conn.pubkey):
                continue  # relay.md §12.1 item 1: visible at delivery time
            if event.id in sub.sent_ids:
                continue  # already sent from the stored results of this REQ
            sub.deliver(event.id, event_json, messages.event(sub.sub_id, event_json))
            delivered += 1
        return delivered

    def publish_soon(self, stored: StoredEvent) -> None:
        """Schedule `publish` without awaiting (OK may go out first, relay.md §8 item 18)."""
        task = asyncio.get_running_loop().create_task(self.publish(stored))
        task.add_done_callback(_log_failure)


def _log_failure(task: asyncio.Task[int]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("fan-out failed", exc_info=task.exception())
