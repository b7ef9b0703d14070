"""The scheduler (workflows.md §12): schedule workflows fire at their instant, not at the next
tick, and a minute's thousands of fires commit in a few transactions.

Every `tick_s` a pass reads all schedule workflows (pages of 500 by id, §12 item 1) and
remembers, per workflow, its parsed schedule (by definition hash) and its next instant. Between
passes the loop sleeps until the earliest remembered instant or the next pass, whichever comes
first, so a fire waits for no tick (decision 324). At an instant the due workflows are claimed
in batches of `FIRE_BATCH`: instants already claimed (by another replica) are dropped with one
query, owner authority is read once per (channel, owner) of the batch, and the claims and their
runs commit in one transaction per batch (`EventStore.workflow_write_many`: a claim another
replica took meanwhile skips only its own run; a fire refused by a full queue is recorded
`capacity_exceeded` in the same transaction). Each replica walks the batches in its own
shuffled order, so two replicas split a minute's work rather than preparing the same batches
and queueing behind each other's claim rows (decision 378). The runs start (46001 fanned out, run kicked) once the instant's fires are all
committed, and runs already executing wait before their next commit while the fires are
claimed (`Engine.gate`, decision 326): a fire is its 46001's commit, which never queues behind
run steps.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from typing import TYPE_CHECKING, Any

from buzz.store.base import StoreError
from buzz.store.workflow_rows import WorkflowRow, WorkflowWrite
from buzz.workflows import definition as d
from buzz.workflows.authority import channel_open, member_qualifies, switched_on
from buzz.workflows.capacity import Door, Verdict
from buzz.workflows.context import schedule_context
from buzz.workflows.schedule import Schedule, due, next_fire

if TYPE_CHECKING:
    from buzz.workflows.engine import Engine, Prepared

log = logging.getLogger(__name__)

PAGE = 500
FIRE_BATCH = 200  # claims and runs per transaction


class Scheduler:
    def __init__(self, engine: Engine) -> None:
        self.e = engine
        self._rows: dict[str, WorkflowRow] = {}  # the last pass's schedule workflows
        # id -> (the row's definition key, its schedule, its definition): a parse costs ~1.5 ms,
        # so a minute of 10,000 fires must not parse 10,000 definitions at the instant
        self._schedules: dict[str, tuple[tuple[str, str, int], Schedule, d.Definition]] = {}
        self._last: dict[str, int] = {}  # newest claimed (or skipped) instant, else acceptance time
        self._next: dict[str, int] = {}  # next instant after `_last`
        self._changed: set[str] = set()  # channels whose schedule workflows were saved or deleted
        self._wake = asyncio.Event()

    def changed(self, channel_id: str) -> None:
        """A channel's workflows changed (`Engine.invalidate`): re-read them now, not at the next
        pass, so a new schedule's first instant is not missed."""
        self._changed.add(channel_id)
        self._wake.set()

    async def run(self) -> None:
        next_pass = 0.0
        while True:
            try:
                self._wake.clear()
                if time.time() >= next_pass:
                    next_pass = time.time() + self.e.settings.tick_s
                    self._changed.clear()
                    await self.read_all()
                elif self._changed:
                    channels, self._changed = self._changed, set()
                    await self.read_channels(channels)
                await self.fire_due(int(time.time()))
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("workflow scheduler failed")
                await asyncio.sleep(1.0)  # a failure that repeats must not spin
            soonest = min(self._next.values(), default=next_pass)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), max(0.0, min(next_pass, soonest) - time.time()))

    async def read_all(self) -> None:
        """§12 item 1: every schedule workflow, by id pages."""
        rows: dict[str, WorkflowRow] = {}
        after = ""
        while True:
            page = await self.e.store.workflows(trigger_on="schedule", after_id=after, limit=PAGE)
            rows.update((wf.id, wf) for wf in page)
            if len(page) < PAGE:
                break
            after = page[-1].id
        await self._merge(rows, set(self._rows))

    async def read_channels(self, channels: set[str]) -> None:
        rows: dict[str, WorkflowRow] = {}
        for channel_id in channels:
            after = ""
            while True:
                page = await self.e.store.workflows(channel_id=channel_id, trigger_on="schedule", after_id=after,
                                                    limit=PAGE)  # fmt: skip
                rows.update((wf.id, wf) for wf in page)
                if len(page) < PAGE:
                    break
                after = page[-1].id
        await self._merge(rows, {w for w, wf in self._rows.items() if wf.channel_id in channels})

    async def _merge(self, rows: dict[str, WorkflowRow], replaced: set[str]) -> None:
        """`rows` are now the schedule workflows that were `replaced`; new ones get their last claim."""
        for gone in replaced - rows.keys():
            for table in (self._rows, self._schedules, self._last, self._next):
                table.pop(gone, None)
        self._rows.update(rows)
        fresh = [wf for wf in rows.values() if wf.id not in self._last or self._last[wf.id] < wf.accepted_at]
        for start in range(0, len(fresh), PAGE):
            chunk = fresh[start : start + PAGE]
            claimed = await self.e.store.workflow_last_claims([wf.id for wf in chunk])
            for wf in chunk:
                self._last[wf.id] = max(claimed.get(wf.id) or 0, wf.accepted_at)
                self._next.pop(wf.id, None)
        for wf in rows.values():
            schedule = self._schedule(wf)
            if schedule is None:
                self._next.pop(wf.id, None)
            elif wf.id not in self._next:
                self._set_next(wf.id, schedule)

    def _schedule(self, wf: WorkflowRow) -> Schedule | None:
        known = self._known(wf)
        if known is None:
            return None
        return known[1]

    def _known(self, wf: WorkflowRow) -> tuple[tuple[str, str, int], Schedule, d.Definition] | None:
        key = (wf.definition_hash, wf.channel_id, wf.accepted_at)
        known = self._schedules.get(wf.id)
        if known is not None and known[0] == key:
            return known
        try:
            definition = self.e.definition(wf)
        except ValueError:
            return None
        if not isinstance(definition.trigger, d.ScheduleTrigger):
            return None
        self._schedules[wf.id] = (key, definition.trigger.schedule, definition)
        self._next.pop(wf.id, None)
        return self._schedules[wf.id]

    def _set_next(self, workflow_id: str, schedule: Schedule) -> None:
        instant = next_fire(schedule, self._last[workflow_id])
        if instant is None:
            self._next.pop(workflow_id, None)
        else:
            self._next[workflow_id] = instant

    async def fire_due(self, now: int) -> None:
        """§12 item 2 for every workflow whose next instant has come."""
        fires: dict[int, list[WorkflowRow]] = {}
        for workflow_id in [w for w, at in self._next.items() if at <= now]:
            wf, known = self._rows.get(workflow_id), self._schedules.get(workflow_id)
            if wf is None or known is None:
                self._next.pop(workflow_id, None)
                continue
            plan = due(known[1], self._last[workflow_id], now)
            if plan.missed:
                log.warning("workflow %s: %d schedule instant(s) missed between %s and %s", workflow_id,
                            plan.missed, plan.missed_first, plan.missed_last)  # fmt: skip
            newest = plan.fire if plan.fire is not None else plan.missed_last
            if newest is not None:
                self._last[workflow_id] = max(self._last[workflow_id], newest)
            self._set_next(workflow_id, known[1])
            if plan.fire is not None:
                fires.setdefault(plan.fire, []).append(wf)
        created: list[Prepared] = []
        with self.e.gate.closed() if fires else contextlib.nullcontext():  # runs wait (decision 326)
            for instant, due_rows in sorted(fires.items()):
                created += await self._fire_instant(instant, due_rows)
        for made in created:  # runs start once every fire of the instant is committed, not between
            await self.e.created(made)

    async def _fire_instant(self, instant: int, due_rows: list[WorkflowRow]) -> list[Prepared]:
        due_rows.sort(key=lambda wf: wf.id)
        batches = [due_rows[i : i + FIRE_BATCH] for i in range(0, len(due_rows), FIRE_BATCH)]
        # Each replica walks the batches in an order of its own, shuffled per instant. Walking
        # them in one order from different starts, a replica that reached the other's first
        # batch skipped the committed ones and caught up with the batch being prepared, and from
        # there both prepared every remaining batch, one of them losing each claim (decision 378).
        random.Random(f"{self.e.replica}:{instant}").shuffle(batches)
        created: list[Prepared] = []
        for batch in batches:
            try:
                created += await self._fire_batch(instant, batch)
            except StoreError:
                log.exception("schedule instant %s: a batch of %d workflows failed", instant, len(batch))
        return created

    async def _fire_batch(self, instant: int, batch: list[WorkflowRow]) -> list[Prepared]:
        """The batch's claims and runs in one transaction; returns the runs created."""
        taken = await self.e.store.workflow_claimed_among([wf.id for wf in batch], instant)
        ids = [wf.id for wf in batch if wf.id not in taken]
        batch = sorted(await self.e.store.workflows_by_id(ids), key=lambda wf: wf.id)  # current rows
        if not batch:
            return []
        facts = _Facts(self.e)
        await facts.load(batch)
        prepared: list[Prepared] = []
        refusals: list[WorkflowWrite] = []  # fires refused by a full queue: their claims and failed runs
        pending = await self.e.store.workflow_count_runs("pending")
        now = int(time.time())
        for wf in batch:
            known = self._known(wf)
            if known is None or not facts.may_start(wf):
                continue
            made = await self.e.prepare_run(wf, Door.SCHEDULE, schedule_context(wf.channel_id, instant), now,
                                            claim_key=str(instant), pending=pending + len(prepared),
                                            definition=known[2], refusals=refusals)  # fmt: skip
            if not isinstance(made, Verdict):
                prepared.append(made)
        if not prepared and not refusals:
            return []
        committed = await self.e.store.workflow_write_many([p.write for p in prepared] + refusals, now)
        return [made for made, ok in zip(prepared, committed[: len(prepared)], strict=True) if ok]


class _Facts:
    """`Engine.may_start` for one batch: its channels, owners' memberships and bans read in one
    go (`workflow_start_facts`: three statements, not a channel and a member read per channel of
    the batch — 200 workflows over 100 channels read ~175 rows one round trip at a time)."""

    def __init__(self, engine: Engine) -> None:
        self.e = engine
        self._facts: tuple[Any, Any, frozenset[str]] | None = None

    async def load(self, batch: list[WorkflowRow]) -> None:
        try:
            self._facts = await self.e.store.workflow_start_facts(
                [wf.channel_id for wf in batch], [wf.owner for wf in batch]
            )
        except StoreError:
            self._facts = None  # no workflow of the batch starts (a lookup error: authority does not hold)

    def may_start(self, wf: WorkflowRow) -> bool:
        if self._facts is None:
            return False
        channels, members, banned = self._facts
        return (switched_on(wf) and channel_open(channels.get(wf.channel_id))
                and member_qualifies(members.get((wf.channel_id, wf.owner)), wf.elevated)
                and wf.owner not in banned)  # fmt: skip
