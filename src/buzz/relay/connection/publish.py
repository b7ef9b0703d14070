"""The EVENT path of a `Connection`: an EVENT's verdict and OK and, for the kinds that allow
it, pipelining — checked, verified and planned in the lane, its write queued at once, its
fan-out and OK when the write is done — with the in-flight bookkeeping that keeps a later
event from reading what an earlier one has not committed yet (docs/decisions.md 76, 100)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from buzz.core import kinds, messages
from buzz.core.errors import BuzzError
from buzz.core.event import Event
from buzz.core.messages import EventMessage
from buzz.relay.auth.session import Session
from buzz.relay.ingestion.ingest import Outcome
from buzz.relay.ingestion.rules.base import Plan
from buzz.relay.ingestion.rules.messages import reaction_target

if TYPE_CHECKING:
    from buzz.relay.connection.host import ConnectionHost

log = logging.getLogger(__name__)

MAX_PIPELINED_EVENTS = 256  # per connection, awaiting their commit
# `_inflight` while nothing is: one shared empty set (never added to: the first event in flight
# gets a set of its own) instead of an empty set per connection.
NOTHING_IN_FLIGHT: set[Any] = frozenset()  # type: ignore[assignment]
# Global-only kinds never derive a channel or read other events while being validated, so
# consecutive ones from one connection may wait for their commits together.
PIPELINABLE_KINDS = kinds.GLOBAL_ONLY_KINDS - {kinds.DELETION_KIND}
# Channel content kinds whose validation reads only channel state (changed by admin kinds,
# which are never pipelined), the events their `e` tags name (and those events' thread rows)
# and, for a reaction, the active-reaction entry it would add: pipelined too unless an event
# still in flight on the connection writes one of those (docs/decisions.md 76, 100).
INDEPENDENT_CHANNEL_KINDS = frozenset({9, 7, 40003})


class Publishing:
    """Pipelined EVENTs in flight and their answers (state in `Connection`)."""

    __slots__ = ()
    relay: ConnectionHost
    _loop: asyncio.AbstractEventLoop
    _inflight: set[asyncio.Future[Any]]  # NOTHING_IN_FLIGHT while empty
    _inflight_refs: dict[object, int]
    _inflight_room: asyncio.Future[None] | None

    async def _pipeline(
        self, msg: EventMessage, early: Any, size: int, checked: tuple[Session, int], refs: tuple[object, ...]
    ) -> None:
        """A pipelined EVENT: checked, verified and planned (the rules) here, in the lane, and
        its write queued at once, behind this connection's earlier writes (the store's FIFO),
        then the lane moves on. Verification of the frames behind it already runs: one wait per
        verified batch, not one per event. The rest (fan-out, the OK) runs when the write is
        done (`_written`), without a task unless it must wait (a follow-up, a membership read)."""
        event = msg.event
        ingest = self.relay.ingest
        try:
            # The session may have changed while queued (AUTH ahead of this EVENT): recheck,
            # unless nothing the prechecks read has (same session, same clock second).
            session = self.session
            if checked[0] is not session or checked[1] != int(time.time()):
                ingest.precheck(event, session)
            plan = await ingest.plan(await early, session)
            started = time.perf_counter()
            written = ingest.write_soon(plan)
        except Exception as exc:
            forget(early)  # a recheck that failed before `await early`: nobody else will
            early = None  # the future holds `exc`, whose traceback holds this frame: break the cycle
            outcome = ingest.refusal(event.id, exc)
            self._answer(event, outcome.accepted, outcome.message)
            self._frame_done(size)
            return
        counts = self._inflight_refs
        for r in refs:
            counts[r] = counts.get(r, 0) + 1
        if not self._inflight:  # the shared empty `NOTHING_IN_FLIGHT`: a set of its own now
            self._inflight = set()
        self._inflight.add(written)
        written.add_done_callback(lambda done: self._written(event, plan, started, size, refs, done))
        if len(self._inflight) >= MAX_PIPELINED_EVENTS:
            await self._inflight_at_most(MAX_PIPELINED_EVENTS - 1)

    def _written(
        self,
        event: Event,
        plan: Plan,
        started: float,
        size: int,
        refs: tuple[object, ...],
        done: asyncio.Future[Any],
    ) -> None:
        """A pipelined event's write is done: its fan-out and OK now, or in a task when they
        must wait; then its bookkeeping. Nothing is answered once the connection closed
        (`run` cancels what is in flight)."""
        if done.cancelled():
            self._settle(done, size, refs)
            return
        try:
            result = self.relay.ingest.finish(plan, done, started)
        except Exception:  # `finish` never raises; a bookkeeping slip must not leak the slot
            log.exception("handler failed")
            result = Outcome(False, "error: internal server error")
        if isinstance(result, Outcome):
            self._answer(event, result.accepted, result.message)
            self._settle(done, size, refs)
            return
        self._inflight.discard(done)
        task = self._loop.create_task(self._finish(event, result, size, refs))
        self._inflight.add(task)

    async def _finish(
        self, event: Event, finishing: Coroutine[Any, Any, Outcome], size: int, refs: tuple[object, ...]
    ) -> None:
        try:
            outcome = await finishing
            self._answer(event, outcome.accepted, outcome.message)
        except Exception:
            log.exception("handler failed")
            self.send(messages.ok(event.id, False, "error: internal server error"))
        finally:
            self._settle(asyncio.current_task(self._loop), size, refs)  # type: ignore[arg-type]

    def _settle(self, item: asyncio.Future[Any], size: int, refs: tuple[object, ...]) -> None:
        """The bookkeeping of a pipelined event that is answered (or dropped at close)."""
        inflight = self._inflight
        if inflight:
            inflight.discard(item)
            if not inflight:  # an idle connection keeps no empty set (issue 30: ≤ 5 KiB each)
                self._inflight = NOTHING_IN_FLIGHT
        counts = self._inflight_refs
        for r in refs:
            n = counts[r] - 1
            if n > 0:
                counts[r] = n
            else:
                del counts[r]
        waiting, self._inflight_room = self._inflight_room, None
        if waiting is not None and not waiting.done():
            waiting.set_result(None)
        self._frame_done(size)

    def _writes_inflight(self, reads: tuple[object, ...]) -> bool:
        counts = self._inflight_refs
        return bool(counts) and any(r in counts for r in reads)

    async def _settled_once(self) -> None:
        """Wait until some pipelined event in flight settles (one wake-up per batch of them)."""
        room = self._inflight_room
        if room is None or room.done():
            room = self._inflight_room = self._loop.create_future()
        await room

    async def _inflight_at_most(self, limit: int) -> None:
        """Wait until at most `limit` pipelined events are still in flight."""
        while len(self._inflight) > limit:
            await self._settled_once()

    async def _on_event(self, msg: EventMessage, early: Any) -> None:
        event = msg.event
        accepted, message = await self._event_verdict(event, early)
        self._answer(event, accepted, message)

    def _answer(self, event: Event, accepted: bool, message: str) -> None:
        self.relay.telemetry.event_answered(event.id, event.kind, event.pubkey, accepted, message)
        self.send(messages.ok(event.id, accepted, message))

    async def _event_verdict(self, event: Event, early: Any) -> tuple[bool, str]:
        if isinstance(early, BuzzError):
            return False, str(early)
        # The session may have changed while queued (AUTH ahead of this EVENT): recheck.
        try:
            self.relay.ingest.precheck(event, self.session)
            verified = await early
        except BuzzError as exc:
            forget(early)  # the recheck failed before `await early`: nobody else will
            early = None  # the future holds `exc`, whose traceback holds this frame: break the cycle
            return False, str(exc)
        outcome = await self.relay.ingest.submit(event, self.session, verified)
        return outcome.accepted, outcome.message


def writes_of(event: Event) -> tuple[object, ...]:
    """What a pipelined event's write adds that a later event's validation may read: its id
    (its row, its thread row) and, for a reaction, its active-reaction entry."""
    if event.kind == 7:
        return (event.id, _reaction_key(event))
    return (event.id,)


def reads_of(event: Event) -> tuple[object, ...]:
    """What the validation of a pipelined channel event reads besides channel state: its own
    id (a duplicate), the events its `e` tags name (rows, thread rows) and, for a reaction,
    the active-reaction entry of (author, target, content)."""
    reads: tuple[object, ...] = (event.id, *event.tag_values("e"))
    return (*reads, _reaction_key(event)) if event.kind == 7 else reads


def _reaction_key(event: Event) -> tuple[str, str, str | None, str]:
    return ("reaction", event.pubkey, reaction_target(event), event.content)


def forget(early: Any) -> None:
    """Let go of a verification future nobody will await (its frame was refused before, or its
    connection closed first): cancelled while pending, its outcome read when settled, so a
    failed signature never ends as asyncio's "Future exception was never retrieved"."""
    if not isinstance(early, asyncio.Future):
        return
    if not early.done():
        early.cancel()
    elif not early.cancelled():
        early.exception()
