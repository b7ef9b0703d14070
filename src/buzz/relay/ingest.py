"""The ingest pipeline (relay.md §8), in its order: prechecks → verify (off the loop) →
ephemeral fan-out → channel derivation → channel checks → per-kind rules → store (with
effects, one transaction) → follow-ups → fan-out → OK.

Every refusal is a BuzzError whose text is the wire message; nothing is written before the
store step, so a refusal leaves the store unchanged.

`submit` runs all of it for one event. A pipelining connection runs the same steps in three
calls instead: `plan` (the rules), `write_soon` (the write queued at once, in call order) and,
once that write is done, `finish` (follow-ups, fan-out, the OK), with no task per event.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

from buzz.core import kinds
from buzz.core.errors import BuzzError, ServerError
from buzz.core.event import Event
from buzz.core.stored import StoredEvent, verify_stored
from buzz.relay import crash_hook
from buzz.relay.fanout import FanOut
from buzz.relay.metrics_prom import RelayMetrics
from buzz.relay.precheck import PrecheckContext, run_prechecks
from buzz.relay.rules.base import KindRules, Plan
from buzz.relay.session import Session
from buzz.store.base import EventStore, InsertOutcome, StoreError

log = logging.getLogger(__name__)

DUPLICATE_MESSAGE = "duplicate:"  # relay.md §3.1 item 4, §8 item 15: exactly this text


@dataclass(frozen=True, slots=True)
class Outcome:
    """The OK answer: `accepted` and the wire message (`""` on plain success)."""

    accepted: bool
    message: str = ""


ACCEPTED = Outcome(True)  # the common answer, made once (a frozen dataclass costs ~2 µs to build)
DUPLICATE = Outcome(True, DUPLICATE_MESSAGE)
# Issue 25 item 4: an event that will never be served is not "stored" (`OK true`), whatever
# the store already holds; the NIP-01 prefix tells a client why (docs/decisions.md 173).
NOT_STORED: dict[InsertOutcome, Outcome] = {
    InsertOutcome.DUPLICATE: DUPLICATE,
    InsertOutcome.SUPERSEDED: Outcome(False, "duplicate: have a newer version"),
    InsertOutcome.DELETED: Outcome(False, "blocked: deleted"),
}
FollowUp = Callable[[StoredEvent], Awaitable[None]]
# What the after-commit steps give back: the OK, or a coroutine that ends with it (a follow-up
# or a fan-out membership read has to wait).
Finished = Outcome | Coroutine[Any, Any, Outcome]


class Ingest:
    def __init__(
        self,
        store: EventStore,
        fanout: FanOut,
        rules: KindRules,
        executor: Executor,
        max_past_drift_s: int,
        verify_workers: int = 1,
        table: kinds.KindTable = kinds.BUILTIN,
    ) -> None:
        self._store = store
        self._fanout = fanout
        self._rules = rules
        self._executor = executor
        self._max_past_drift_s = max_past_drift_s
        self.metrics: RelayMetrics | None = None  # set by the relay: store latency
        self._verify_workers = max(1, verify_workers)  # threads of `executor`
        self._pending: list[tuple[Event, asyncio.Future[StoredEvent]]] = []
        self._table = table
        self._precheck_ctx = PrecheckContext(-1, max_past_drift_s, table)
        # Set by the relay: the workflow engine's door for committed events (workflows.md §7.1);
        # it returns at once, so it never delays the OK.
        self.on_stored: Callable[[StoredEvent], None] | None = None

    async def verify(self, event: Event) -> StoredEvent:
        """relay.md §2.3 in the thread pool. Raises InvalidId / InvalidSignature / ServerError.

        Events asking within one turn of the event loop are verified together: one pool task
        per worker for the whole group (and one wake-up of the loop per task), not one each.
        """
        return await self.verify_soon(event)

    def verify_soon(
        self, event: Event, loop: asyncio.AbstractEventLoop | None = None
    ) -> asyncio.Future[StoredEvent]:
        """`verify` started now, as the bare future of its result (no task around it: a
        pipelining caller awaits it later). Must be called on the event loop (`loop`, when
        the caller has it at hand)."""
        if loop is None:
            loop = asyncio.get_running_loop()
        future: asyncio.Future[StoredEvent] = loop.create_future()
        self._pending.append((event, future))
        if len(self._pending) == 1:
            loop.call_soon(self._flush_verify, loop)
        return future

    def _flush_verify(self, loop: asyncio.AbstractEventLoop) -> None:
        pending, self._pending = self._pending, []
        if not pending:
            return
        chunks = min(self._verify_workers, len(pending))
        size = -(-len(pending) // chunks)
        for start in range(0, len(pending), size):
            group = pending[start : start + size]
            try:
                done = self._executor.submit(_verify_all, [e for e, _ in group])
            except Exception as exc:  # executor shut down
                _fail_all(group, exc)
                continue
            # Settled by one callback on the loop, straight from the worker: no asyncio future
            # chained to the pool's (`run_in_executor`), which costs a second loop callback.
            done.add_done_callback(lambda d, g=group: _call_on(loop, _settle_verified, d, g))

    def precheck(self, event: Event, session: Session) -> int:
        """relay.md §8 items 2–8 (raises the first BuzzError). Returns the clock second the
        checks used: they read nothing but the event, the session and that second."""
        now = int(time.time())
        ctx = self._precheck_ctx
        if ctx.now != now:  # one context per second, not one per check (two per event)
            ctx = self._precheck_ctx = PrecheckContext(now, self._max_past_drift_s, self._table)
        run_prechecks(session, event, ctx)
        return now

    async def submit(self, event: Event, session: Session, verified: StoredEvent | None = None) -> Outcome:
        """Run the whole pipeline for one event; never raises.

        `verified` lets a caller that already ran `precheck` and `verify` skip those steps.
        """
        try:
            if verified is None:
                self.precheck(event, session)
                verified = await self.verify(event)
            return await self._accept(verified, session)
        except Exception as exc:
            return self.refusal(event.id, exc)

    def refusal(self, event_id: str, exc: Exception) -> Outcome:
        """The OK for an event whose ingest raised `exc`: a BuzzError's own text; a store or
        any other failure logged and answered without detail."""
        if isinstance(exc, BuzzError):
            return Outcome(False, str(exc))
        if isinstance(exc, StoreError):
            log.error("store failure while ingesting %s", event_id, exc_info=exc)
            return Outcome(False, "error: database error")
        log.error("unexpected failure while ingesting %s", event_id, exc_info=exc)
        return Outcome(False, "error: internal server error")

    async def plan(self, stored: StoredEvent, session: Session) -> Plan:
        """Steps 12–14 for a verified event of a stored kind (raises the BuzzError refusing it)."""
        return await self._rules.plan(stored, session)

    def write_soon(self, plan: Plan) -> asyncio.Future[InsertOutcome]:
        """Step 15 started: the write is queued before this returns, behind every write queued
        before it (so two calls commit in call order); the future is done after the commit."""
        return self._store.insert_soon(plan.stored, plan.effects)

    def finish(self, plan: Plan, written: asyncio.Future[InsertOutcome], started: float) -> Finished:
        """Steps 16–18 once `written` (from `write_soon` at `perf_counter()` `started`) is done
        and not cancelled: the OK, or a coroutine that ends with it. Never raises."""
        try:
            outcome = written.result()
        except Exception as exc:
            return self.refusal(plan.stored.event.id, exc)
        try:
            return self._committed(plan, outcome, started)
        except Exception as exc:
            return self.refusal(plan.stored.event.id, exc)

    async def _accept(self, stored: StoredEvent, session: Session) -> Outcome:
        if kinds.is_ephemeral(stored.event.kind):
            stored = await self._rules.ephemeral(stored, session)
            await self._fanout.publish(stored)
            return ACCEPTED
        plan = await self._rules.plan(stored, session)
        started = time.perf_counter()
        outcome = await self._store.insert(plan.stored, plan.effects)
        done = self._committed(plan, outcome, started)
        return done if isinstance(done, Outcome) else await done

    def _committed(self, plan: Plan, outcome: InsertOutcome, started: float) -> Finished:
        if self.metrics is not None:
            self.metrics.store_inserted(time.perf_counter() - started)
        if outcome is not InsertOutcome.STORED:
            return NOT_STORED[outcome]
        crash_hook.after_commit(plan.stored.event.kind)
        if self.on_stored is not None:
            try:
                self.on_stored(plan.stored)
            except Exception:
                log.exception("workflow door failed for %s", plan.stored.event.id)
        if plan.after_commit:
            return self._follow_ups(plan)
        return self._publish(plan)

    async def _follow_ups(self, plan: Plan) -> Outcome:
        for follow_up in plan.after_commit:
            try:
                await follow_up()
            except Exception:  # relay.md §8 item 17: logged, never returned
                log.exception("follow-up of %s failed", plan.stored.event.id)
        done = self._publish(plan)
        return done if isinstance(done, Outcome) else await done

    def _publish(self, plan: Plan) -> Finished:
        """Fan-out, then the OK; without a coroutine unless a subscriber's membership must be read."""
        try:
            rest = self._fanout.publish_now(plan.stored)
        except Exception:  # stored and committed: the OK must say so (relay.md §8 item 18)
            log.exception("fan-out of %s failed", plan.stored.event.id)
            rest = 0
        if isinstance(rest, int):
            return _accepted(plan)
        return self._publish_rest(plan, rest)

    async def _publish_rest(self, plan: Plan, rest: Awaitable[int]) -> Outcome:
        try:
            await rest
        except Exception:
            log.exception("fan-out of %s failed", plan.stored.event.id)
        return _accepted(plan)


def _accepted(plan: Plan) -> Outcome:
    return Outcome(True, plan.response) if plan.response else ACCEPTED


def _verify_all(events: list[Event]) -> list[StoredEvent | BaseException]:
    """Worker side of `Ingest.verify`: each event's envelope, or the exception it raised."""
    out: list[StoredEvent | BaseException] = []
    for event in events:
        try:
            out.append(verify_stored(event))
        except Exception as exc:
            out.append(exc.with_traceback(None))  # its traceback's frame holds `out`: a cycle
    return out


def _call_on(loop: asyncio.AbstractEventLoop, fn: Callable[..., None], *args: Any) -> None:
    """`fn(*args)` on `loop`, from a pool thread; nothing when the loop has closed (shutdown)."""
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(fn, *args)


def _settle_verified(
    done: concurrent.futures.Future[list[StoredEvent | BaseException]],
    group: list[tuple[Event, asyncio.Future[StoredEvent]]],
) -> None:
    if done.cancelled() or done.exception() is not None:
        _fail_all(group, done.exception() if not done.cancelled() else RuntimeError("cancelled"))
        return
    for (event, future), result in zip(group, done.result(), strict=True):
        if future.done():
            continue
        if isinstance(result, StoredEvent):
            future.set_result(result)
        elif isinstance(result, BuzzError):
            future.set_exception(result)
        else:
            log.error("verification of %s failed", event.id, exc_info=result)
            future.set_exception(ServerError("internal verification error"))


def _fail_all(group: list[tuple[Event, asyncio.Future[StoredEvent]]], exc: BaseException | None) -> None:
    log.error("verification executor failed", exc_info=exc)
    for _, future in group:
        if not future.done():
            future.set_exception(ServerError("internal verification error"))
