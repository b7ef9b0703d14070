"""Driving one leased run (workflows.md §7.5, §11.2–§11.3), and the gate that makes runs yield
to the scheduler's fires (decision 326).

**One transaction per step** (decision 327). A transition that only moves on (`Continue`: a step
completed or was skipped) is not committed alone: it is held and committed with the next
step's start, or with the run's end. So a step's completion, its 46003, the next step's
`running` record with its built effect and its 46002 are one write, and that write commits
before the next step's effect is performed: a completed step is durable before anything
follows it. A process killed while a completion is held resumes the step as `running` and
re-dispatches its recorded effect (the same event ids: a `duplicate`), as a kill between the
effect and its completion always did; the effect still happens once. A short `delay` is slept
through by the drive holding the run's lease (`nap`), not released and taken again.

**The gate.** While the scheduler claims an instant's fires, run steps wait before their next
commit (`Gate.wait`): a fire is the commit of its claim, run and 46001, and that commit must
not queue behind the writes of runs already executing. The gate stays closed only while the
instant's batches are claimed; runs continue as soon as they are committed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from buzz.core.filters import Filter
from buzz.core.stored import StoredEvent
from buzz.store.base import SYSTEM
from buzz.store.workflow_rows import ApprovalRaced, ApprovalSwap, WorkflowWrite
from buzz.workflows import events as ev
from buzz.workflows import machine as m
from buzz.workflows.approvals import Approval, approval_reference, expire, parse_approver_spec
from buzz.workflows.resolve import StepFailure
from buzz.workflows.rows import approval_of, approval_row, changed_steps, run_row, step_row

if TYPE_CHECKING:
    from buzz.workflows.engine import Engine

JOB_ANSWERS = frozenset({43004, 43005, 43006})


class Gate:
    """Open, except while the scheduler commits an instant's fires (`closed()`)."""

    def __init__(self) -> None:
        self._open = asyncio.Event()
        self._open.set()
        self._closers = 0
        self.parked = 0  # drives waiting at the gate now (tests read it)

    @property
    def is_open(self) -> bool:
        return self._open.is_set()

    @contextlib.contextmanager
    def closed(self) -> Iterator[None]:
        self._closers += 1
        self._open.clear()
        try:
            yield
        finally:
            self._closers -= 1
            if self._closers == 0:
                self._open.set()

    async def wait(self) -> None:
        if self._open.is_set():
            return
        self.parked += 1
        try:
            await self._open.wait()
        finally:
            self.parked -= 1


def nap_until(at: int, began: float) -> float:
    """When a short delay's nap ends: its wake time `at` (whole seconds, what the machine
    checks) plus the fraction of a second at which the delay `began`, and 50 ms. A delay lasts
    its duration, and the delays begun during one second do not all wake at its end together
    (decision 380: 100 runs a second of `delay: 1` woke as one burst each second)."""
    return at + began % 1 + 0.05


class Drive:
    """One replica driving one leased run until it waits, ends, or the process dies."""

    def __init__(
        self, engine: Engine, run: m.Run, trigger_event_id: str | None, effects: dict[int, Any]
    ) -> None:
        self.e = engine
        self.run = run  # the newest state (held transitions included)
        self.base = run  # the state as committed
        self.held: list[ev.EventTemplate] = []  # events of held transitions, committed with the next
        self.held_published: list[tuple[StoredEvent, tuple[Any, ...]]] = []  # a held step's message
        self.tei = trigger_event_id
        self.effects = effects
        self.started: Any = None  # called once after the first commit (the run is `running`)
        self.first: m.Dispatch | None = None  # a first step committed with the run: perform it (decision 328)
        self.performed: m.Input | None = None  # ... unless its effect was stored with the run (decision 383)

    async def authorized(self) -> bool:
        return await self.e.authorized(self.run.owner, self.run.channel_id, self.run.definition.elevated)

    def hold(self, t: m.Transition) -> None:
        """A transition that only moves on: committed with the next one (decision 327)."""
        self.held += t.emitted
        self.run = t.run

    async def commit(self, t: m.Transition, *, release: bool = False, approval: Any = None,
                     swap: ApprovalSwap | None = None, events: tuple[StoredEvent, ...] = (),
                     published: tuple[tuple[StoredEvent, tuple[Any, ...]], ...] = ()) -> None:  # fmt: skip
        await self.e.gate.wait()
        before = self.base
        signed = self.e._signed(self.held, before.channel_id) + (
            events or self.e._signed(t.emitted, before.channel_id)
        )
        steps = tuple(step_row(before.id, r, self.effects.get(r.index)) for r in changed_steps(before, t.run))
        published = (*self.held_published, *published)
        write = WorkflowWrite(runs=(run_row(t.run, self.tei),), steps=steps, events=signed, approval=approval,
                              swap=swap, lease=self.e.replica, release=release, published=published)  # fmt: skip
        await self.e.store.workflow_write(write, int(time.time()))
        self.run = self.base = t.run
        self.held, self.held_published = [], []
        if self.started is not None:
            started, self.started = self.started, None
            started()
        for stored in write.stored_events:
            await self.e.host.fanout(stored)

    async def first_input(self) -> m.Input | None:
        run, now = self.run, int(time.time())
        rec = run.record
        if run.status is m.RunStatus.WAITING_APPROVAL:
            await self.expire(now)
            return None
        if run.status is m.RunStatus.WAITING:
            if rec is not None and rec.job_id:
                answer = await self.job_answer(rec.job_id, rec.agent or "", now)
                if answer is not None:
                    return answer
            return m.Wake(now)
        return m.Proceed(now, await self.authorized())

    async def job_answer(self, job_id: str, agent: str, now: int) -> m.Input | None:
        flt = Filter(kinds=frozenset(JOB_ANSWERS), tags={"e": frozenset({job_id})})
        for stored in sorted(await self.e.store.query([flt], SYSTEM), key=lambda s: s.event.created_at):
            ev = stored.event
            if ev.kind == 43005 and ev.pubkey == self.e.relay_pubkey:
                continue
            if ev.kind == 43005:
                return m.JobFinished(now, cancelled=True)
            try:
                body = json.loads(ev.content)
            except ValueError:
                body = {}
            if ev.kind == 43006:
                return m.JobFinished(now, failure=f"{body.get('code', 'failed')}: {body.get('message', '')}")
            return m.JobFinished(now, output={"text": body.get("outcome", ""), "disposition": body.get("disposition"),
                                              "artifacts": body.get("artifacts", []), "job_id": job_id,
                                              "agent": agent, "result_event_id": ev.id})  # fmt: skip
        return None

    async def expire(self, now: int) -> None:
        rec = self.run.record
        if rec is None or rec.approval_ref is None:
            return
        row = await self.e.store.workflow_approval(rec.approval_ref)
        expired = expire(approval_of(row), now) if row is not None else None
        if expired is None:
            await self.e.store.workflow_release(self.e.replica, self.run.id)
            return
        t = m.advance(self.run, m.ApprovalDecided(now, expired))
        try:
            await self.commit(t, release=True, swap=ApprovalSwap(approval_row(expired)))
        except ApprovalRaced:
            await self.e.store.workflow_release(self.e.replica, self.run.id)

    async def go(self) -> None:
        if self.run.status in m.TERMINAL:
            await self.e.store.workflow_release(self.e.replica, self.run.id)
            return
        if self.first is not None:
            dispatch, self.first = self.first, None
            inp: m.Input | None = self.performed or await self.perform(
                dispatch, self.effects[dispatch.step_index]
            )
        else:
            inp = await self.first_input()
        while inp is not None:
            t = m.advance(self.run, inp)
            dispatch = next((x for x in t.effects if isinstance(x, m.Dispatch)), None)
            if dispatch is None:
                if any(isinstance(x, m.Continue) for x in t.effects):
                    self.hold(t)  # committed with the next step's start or the run's end
                    inp = m.Proceed(int(time.time()), await self.authorized())
                    continue
                at = next((x.at for x in t.effects if isinstance(x, m.WakeAt)), None)
                nap = at is not None and self._short_delay(t.run, at)
                began = time.time()
                await self.commit(t, release=not nap)
                if nap:
                    inp = await self.nap(nap_until(at, began))  # type: ignore[arg-type]
                    continue
                if at is not None:
                    self.e._wake_later(self.run.id, at)
                inp = None
                continue
            inp = await self.dispatch(t, dispatch)

    def _short_delay(self, run: m.Run, at: int) -> bool:
        """A `delay` ending within a third of the lease: the drive sleeps through it holding the
        lease (renewed as for any drive), instead of releasing the run and taking it again at
        its wake time — a write and a reload fewer per delay (decision 327)."""
        rec = run.record
        return (run.status is m.RunStatus.WAITING and rec is not None and rec.action == "delay"
                and at - time.time() <= self.e.settings.lease_s / 3)  # fmt: skip

    async def nap(self, until: float) -> m.Input:
        self.e.napping += 1
        self.e.freed()  # a napping drive takes no slot: a queued run may start in it
        try:
            await asyncio.sleep(max(0.0, until - time.time()))
        finally:
            self.e.napping -= 1
        return m.Wake(int(time.time()))

    async def dispatch(self, t: m.Transition, dispatch: m.Dispatch) -> m.Input | None:
        now = int(time.time())
        if dispatch.resolved.action == "request_approval":
            return await self.open_approval(t, dispatch, now)
        effect = self.effects.get(dispatch.step_index) if dispatch.resume else None
        if effect is None:
            try:
                effect = await self.e.actions.build(t.run, dispatch)
            except StepFailure as exc:
                await self.commit(t)
                return m.StepFailed(now, exc.code, exc.message)
            self.effects[dispatch.step_index] = effect
            # a message is stored with its step's start, in one transaction (decision 383); the
            # last step's also with the run's end, which follows from its known outcome
            carried = await self.e.actions.carry(t.run, dispatch, effect)
            if carried is not None:
                published, performed = carried
                if dispatch.step_index == len(t.run.definition.steps) - 1:
                    self.hold(t)
                    self.held_published += published
                else:
                    await self.commit(t, published=published)
                return performed
        await self.commit(t)
        return await self.perform(dispatch, effect)

    async def perform(self, dispatch: m.Dispatch, effect: Any) -> m.Input:
        try:
            timeout = max(0.1, dispatch.deadline - time.time())
            return await asyncio.wait_for(self.e.actions.perform(self.run, dispatch, effect), timeout)
        except TimeoutError:
            return m.StepFailed(int(time.time()), "step_timeout", f"step {dispatch.step_id} timed out")

    async def open_approval(self, t: m.Transition, dispatch: m.Dispatch, now: int) -> None:
        f = dispatch.resolved.fields
        run = t.run
        spec = parse_approver_spec(f["approver_spec"])
        members = await self.e.store.active_members(run.channel_id)
        designated = spec.designated({mb.pubkey: mb.role for mb in members})
        approval = Approval(approval_reference(str(uuid.uuid4())), run.workflow_id, run.id, dispatch.step_id,
                            dispatch.step_index, run.channel_id, spec, dispatch.effect_at + int(f["timeout"]), now)  # fmt: skip
        t2 = m.advance(run, m.ApprovalOpened(now, approval, tuple(designated)))
        events = self.e._signed([*t.emitted, *t2.emitted], run.channel_id)
        request_id = events[-1].event.id
        approval = replace(approval, request_event_id=request_id)
        await self.commit(m.Transition(t2.run, (*t.effects, *t2.effects)), release=True,
                          approval=approval_row(approval), events=events)  # fmt: skip
        self.e._wake_later(run.id, approval.expires_at)
        return None
