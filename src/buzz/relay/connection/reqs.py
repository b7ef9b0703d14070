"""REQ, COUNT and CLOSE on a `Connection` (relay.md §7.5, §7.6): each REQ's subscription in
the live index before its stored query, the stored results then the held live matches, then
EOSE; a CLOSE ends a subscription without an answer (decision 176)."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from buzz.core import messages
from buzz.core.errors import BuzzError, ServerError
from buzz.core.limits import MAX_SUBSCRIPTIONS
from buzz.core.messages import ReqMessage
from buzz.relay.delivery.subscriptions import Subscription
from buzz.store.base import StoreError

if TYPE_CHECKING:
    from buzz.relay.connection.host import ConnectionHost

log = logging.getLogger(__name__)

NOT_AUTHENTICATED = "auth-required: not authenticated"
SENT_IDS_GRACE_S = 5.0  # how long after EOSE a stored result still suppresses its live copy


class Reqs:
    """This connection's subscriptions and the REQs still in their stored phase (state in
    `Connection`)."""

    __slots__ = ()
    relay: ConnectionHost
    _loop: asyncio.AbstractEventLoop
    pubkey: str | None
    subs: dict[str, Subscription]
    _sub_tasks: dict[str, asyncio.Task[None]]

    def _drop_sub(self, sub_id: str) -> None:
        sub = self.subs.pop(sub_id, None)
        if sub is not None:
            self.relay.index.remove(sub)
        task = self._sub_tasks.pop(sub_id, None)
        if task is not None:
            task.cancel()

    def evict(self, sub_id: str, message: str) -> None:
        """Remove a live subscription and tell the client why (relay.md §4.7)."""
        if sub_id in self.subs:
            self._drop_sub(sub_id)
            self.send(messages.closed(sub_id, message))

    async def _on_req(self, msg: ReqMessage) -> None:
        sub_id = msg.sub_id
        if self.pubkey is None:
            self.send(messages.closed(sub_id, NOT_AUTHENTICATED))
            self.relay.telemetry.req_answered("REQ", sub_id, NOT_AUTHENTICATED)
            return
        if sub_id not in self.subs and sub_id not in self._sub_tasks and len(self.subs) >= MAX_SUBSCRIPTIONS:
            self.send(messages.closed(sub_id, "error: too many subscriptions"))
            self.relay.telemetry.req_answered("REQ", sub_id, "error: too many subscriptions")
            return
        self._drop_sub(sub_id)  # a REQ with an existing id replaces it (relay.md §7.5 item 4)
        try:
            searching = await self.relay.reads.check(msg.filters, self.reader)
        except BuzzError as exc:
            self.send(messages.closed(sub_id, str(exc)))
            self.relay.telemetry.req_answered("REQ", sub_id, str(exc))
            return
        self.relay.telemetry.req_answered("REQ", sub_id, None)
        if searching:
            self._sub_tasks[sub_id] = self._loop.create_task(self._stored_phase(sub_id, msg, None))
            return
        sub = Subscription(self, sub_id, msg.filters, self.relay.config.send_buffer_bytes)
        self.subs[sub_id] = sub
        self.relay.index.add(sub)  # before the stored query: nothing committed meanwhile is missed
        self._sub_tasks[sub_id] = self._loop.create_task(self._stored_phase(sub_id, msg, sub))

    async def _stored_phase(self, sub_id: str, msg: ReqMessage, sub: Subscription | None) -> None:
        sent: set[str] = sub.sent_ids if sub is not None else set()
        if sub is not None and self.relay.bus is not None:
            # relay.md §12.4: channel topics confirmed before the query, so no gap across replicas
            await self.relay.bus.wait_subscribed(sub.filters)
        try:
            results = await self.relay.reads.stored(msg.filters, self.reader)
        except ServerError as exc:  # e.g. presence while Redis fails: fail closed (issue 9 item 6)
            if self._sub_tasks.get(sub_id) is asyncio.current_task(self._loop):
                del self._sub_tasks[sub_id]
            self._drop_sub(sub_id)
            self.send(messages.closed(sub_id, str(exc)))
            return
        except StoreError:
            log.exception("stored query failed for %s", sub_id)
            results = []
            self.send(messages.notice("error: database error (stored results incomplete)"))
        for stored in results:
            sent.add(stored.event.id)
            await self.send_wait(messages.event(sub_id, stored.event.to_json()))
        if sub is not None:
            while sub.held:  # more may be held while we wait for queue room
                for event_id, event_json in sub.take_held():
                    if event_id not in sent:
                        sent.add(event_id)
                        await self.send_wait(messages.event(sub_id, event_json))
            sub.live = True
            self._loop.call_later(SENT_IDS_GRACE_S, sent.clear)
        await self.send_wait(messages.eose(sub_id))
        if self._sub_tasks.get(sub_id) is asyncio.current_task(self._loop):
            del self._sub_tasks[sub_id]

    async def _on_count(self, msg: ReqMessage) -> None:
        if self.pubkey is None:
            self.send(messages.closed(msg.sub_id, NOT_AUTHENTICATED))
            self.relay.telemetry.req_answered("COUNT", msg.sub_id, NOT_AUTHENTICATED)
            return
        try:
            await self.relay.reads.check(msg.filters, self.reader, count=True)
            n = await self.relay.reads.count(msg.filters, self.reader)
        except BuzzError as exc:
            self.send(messages.closed(msg.sub_id, str(exc)))
            self.relay.telemetry.req_answered("COUNT", msg.sub_id, str(exc))
            return
        except StoreError:
            log.exception("count failed")
            self.send(messages.closed(msg.sub_id, "error: database error"))
            self.relay.telemetry.req_answered("COUNT", msg.sub_id, "error: database error")
            return
        self.relay.telemetry.req_answered("COUNT", msg.sub_id, None)
        self.send(messages.count(msg.sub_id, n))
