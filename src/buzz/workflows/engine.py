"""The runner: doors that create runs, and replicas that drive them (workflows.md §7, §11, §12).

Every run change is a `machine.advance`, committed by an `EventStore.workflow_write` (rows,
lifecycle events, approval, claim) before its effect happens — a change that only moves on is
committed with the next one (`drive.Drive`, decision 327); the effect of a step is recorded
with the step's start (`actions.build`) and performed after the commit (`actions.perform`).
A replica drives a run only under its lease (a door's run is leased by its creating write); a crash leaves the lease to lapse, and the scan of
any replica takes the run and resumes it at the step after its last completed one.

Doors: `on_stored` (channel events, after commit, never delaying the OK), `prepare_run` for the
manual trigger (committed with its 46020 by the ingest effect), `webhook`, and the scheduler.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import logging
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any

from buzz.core.stored import StoredEvent, relay_signed
from buzz.store.base import EventStore, StoreError
from buzz.store.workflow_rows import Claim, LeaseLost, WorkflowRow, WorkflowWrite
from buzz.workflows import definition as d
from buzz.workflows import limits as L
from buzz.workflows import machine as m
from buzz.workflows.actions import Actions
from buzz.workflows.authority import channel_open, member_qualifies, switched_on
from buzz.workflows.capacity import REFUSALS, Door, RunRate, Verdict, admit
from buzz.workflows.context import channel_event_context, fires, is_engine_event, webhook_context
from buzz.workflows.drive import JOB_ANSWERS, Drive, Gate
from buzz.workflows.host import Host, Settings
from buzz.workflows.resolve import StepFailure
from buzz.workflows.rows import (
    definition_of,
    ended_at,
    run_of,
    run_row,
    step_effect,
    step_row,
    trigger_event_id,
)
from buzz.workflows.scheduler import Scheduler

log = logging.getLogger(__name__)

HOOK_RATE = 60  # requests per minute per hook id (§14 item 2)
_DUMMY_HASH = hashlib.sha256(b"buzz: no such webhook").hexdigest()
NOT_FOUND = (404, {"error": "workflow not found"}, {})


@dataclass(frozen=True)
class Prepared:
    """A new run ready to commit: its row and 46001 in `write` (fan out `events` after)."""

    run_id: str
    write: WorkflowWrite
    first: Drive | None = None  # its first step started in `write` (decision 328): perform it

    @property
    def leased(self) -> bool:
        """Committed already leased to this replica: it starts without a take (decision 327)."""
        return self.write.take is not None


def secret_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


class Engine:
    def __init__(
        self, store: EventStore, host: Host, secret_key: str, relay_pubkey: str, settings: Settings
    ) -> None:
        self.store: Any = store  # the SqlStore methods beyond the EventStore protocol
        self.host = host
        self.settings = settings
        self.relay_pubkey = relay_pubkey
        self.replica = uuid.uuid4().hex
        self.actions = Actions(store, host, secret_key, relay_pubkey, settings, self.replica)
        self.rate = RunRate(settings.run_rate)
        self.hook_rate = RunRate(HOOK_RATE)
        self._running: dict[str, asyncio.Task[None]] = {}
        self.napping = 0  # drives of `_running` asleep in a short delay: they take no slot
        self._deferred: dict[str, list[str]] = {}
        self._starting: Counter[str] = Counter()  # runs past the `max_concurrent` check, not yet running
        self._cap_lock = asyncio.Lock()
        self._cache: dict[str, tuple[float, list[WorkflowRow]]] = {}
        self.scheduler = Scheduler(self)
        self.gate = Gate()  # closed while the scheduler commits an instant's fires (decision 326)
        self._tasks: list[asyncio.Task[None]] = []
        self._timers: set[asyncio.TimerHandle] = set()
        self._loose: set[asyncio.Task[Any]] = set()
        # The run queue's refill (decision 376): a run left `pending` for want of a free drive
        # is taken as soon as a drive frees, not at the next scan (`tick_s`, 10 s).
        self._queued = 0  # runs refused a drive (`kick`) not yet taken by a refill
        self._taking = 0  # kicks given a drive, their take not yet returned (counted by `free`)
        self._refill: asyncio.Task[None] | None = None
        self._take_lock = asyncio.Lock()  # a scan and a refill count free drives one at a time
        self._stopping = False

    # -- lifetime ----------------------------------------------------------------------------
    async def start(self, sole: bool = False) -> None:
        """Start the loops. `sole`: no other process shares the database (SQLite), so every lease
        found now belongs to a dead process and its run is resumed at once."""
        if sole:
            await self.store.workflow_release_all()
        loop = asyncio.get_running_loop()
        for name, fn, period in (("scan", self.scan, self.settings.tick_s),
                                 ("renew", self._renew, self.settings.lease_s / 3),
                                 ("sweep", self.sweep, self.settings.sweep_s),
                                 ("prune", self.prune, self.settings.prune_s)):  # fmt: skip
            self._tasks.append(loop.create_task(self._every(name, fn, period), name=f"workflows-{name}"))
        self._tasks.append(loop.create_task(self.scheduler.run(), name="workflows-schedule"))

    async def stop(self) -> None:
        self._stopping = True  # drives ending as they are cancelled start no refill
        for timer in self._timers:
            timer.cancel()
        tasks = [
            *self._tasks,
            *self._running.values(),
            *self._loose,
            *([self._refill] if self._refill else []),
        ]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task

    async def _every(self, name: str, fn: Any, period: float) -> None:
        while True:
            try:
                await fn()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("workflow %s failed", name)
            await asyncio.sleep(period)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._loose.add(task)
        task.add_done_callback(self._loose.discard)

    # -- facts -------------------------------------------------------------------------------
    def definition(self, wf: WorkflowRow) -> d.Definition:
        return definition_of(wf.definition, wf.channel_id, wf.accepted_at)

    def warm(self, wf: WorkflowRow) -> None:
        """Parse a saved definition into the cache now, so the first event it sees does not
        pay a YAML parse for it (decision 329): a channel's message reads every workflow."""
        with contextlib.suppress(ValueError):
            self.definition(wf)

    async def authorized(self, owner: str, channel_id: str, elevated: bool) -> bool:
        """Owner authority (§6.5 item 2); a lookup error means it does not hold."""
        try:
            if not member_qualifies(await self.store.get_member(channel_id, owner), elevated):
                return False
            return not await self.store.banned_among({owner})
        except StoreError:
            return False

    async def effectively_enabled(self, wf: WorkflowRow) -> bool:
        return switched_on(wf) and channel_open(await self.store.get_channel(wf.channel_id))

    async def may_start(self, wf: WorkflowRow) -> bool:
        return await self.effectively_enabled(wf) and await self.authorized(
            wf.owner, wf.channel_id, wf.elevated
        )

    async def channel_workflows(self, channel_id: str) -> list[WorkflowRow]:
        hit = self._cache.get(channel_id)
        now = time.monotonic()
        if hit is not None and hit[0] > now:
            return hit[1]
        rows = await self.store.workflows(channel_id=channel_id, limit=1000)
        self._cache[channel_id] = (now + self.settings.cache_s, rows)
        return rows

    def invalidate(self, channel_id: str) -> None:
        self._cache.pop(channel_id, None)
        self.scheduler.changed(channel_id)

    # -- creating runs -------------------------------------------------------------------------
    def _signed(self, templates: list[Any], channel_id: str) -> tuple[StoredEvent, ...]:
        return tuple(relay_signed(self.actions.sign(t), channel_id) for t in templates)

    async def prepare_run(self, wf: WorkflowRow, door: Door, trigger: dict[str, Any], now: int,
                          trigger_event_id: str | None = None, claim_key: str | None = None,
                          pending: int | None = None, definition: d.Definition | None = None,
                          authorized: bool = False, refusals: list[WorkflowWrite] | None = None
                          ) -> Prepared | Verdict:  # fmt: skip
        """A new run's write, or the verdict refusing it (§7.1, §7.4). A refused channel-event
        or schedule run is recorded `failed` with `capacity_exceeded` (no events): committed
        here, or appended to `refusals` (the scheduler's batch commits them with its runs)."""
        definition = definition or self.definition(wf)
        if not self.rate.allow(wf.id, now):
            log.warning("workflow %s: run rate exceeded, trigger dropped", wf.id)
            return Verdict.RATE_LIMITED
        run_id = str(uuid.uuid4())
        if pending is None:  # the scheduler counts once per batch
            pending = await self.store.workflow_count_runs("pending")
        verdict = admit(pending, self.settings.queue_max)
        claim = None
        if claim_key is not None:
            claim = Claim("schedule" if door is Door.SCHEDULE else "webhook", wf.id, claim_key, run_id)
        kw = {"run_id": run_id, "workflow_id": wf.id, "owner": wf.owner, "channel_id": wf.channel_id,
              "revision": wf.head_event_id, "definition": definition, "trigger": trigger, "now": now}  # fmt: skip
        if verdict is not Verdict.ADMIT:
            if REFUSALS[(door, verdict)].record_failed:
                log.warning(
                    "workflow %s: run queue is full; run %s recorded capacity_exceeded", wf.id, run_id
                )
                refusal = WorkflowWrite(runs=(run_row(m.refused(**kw)),), claim=claim)
                if refusals is not None:
                    refusals.append(refusal)
                else:
                    await self.store.workflow_write(refusal, now)
            return verdict
        t = m.create(**kw, trigger_event_id=trigger_event_id)
        run, emitted, steps, drive, published = t.run, t.emitted, (), None, ()
        take = None  # a door's run is leased in its creating write when a drive is free
        if door is not Door.SCHEDULE and self.free() > 0:
            take = (self.replica, now + self.settings.lease_s)
            if authorized and definition.max_concurrent is None:
                first = await self._first_step(t, trigger_event_id, now)
                if first is not None:  # the run with its first step started
                    drive, started = first
                    run, emitted = started.run, [*t.emitted, *started.emitted]
                    steps = tuple(step_row(run_id, r, drive.effects.get(r.index)) for r in run.steps)
                    assert drive.first is not None
                    carried = await self.actions.carry(
                        run, drive.first, drive.effects[drive.first.step_index]
                    )
                    if carried is not None:
                        published, drive.performed = carried
        write = WorkflowWrite(runs=(run_row(run, trigger_event_id),), steps=steps, published=published,
                              events=self._signed(emitted, wf.channel_id), claim=claim, take=take)  # fmt: skip
        return Prepared(run_id, write, drive)

    async def _first_step(self, created: m.Transition, tei: str | None, now: int
                          ) -> tuple[Drive, m.Transition] | None:  # fmt: skip
        """A door's new run whose first step is an effect to perform: that step's start (its
        `running` record with the built effect and its 46002) rides in the run's creating write,
        one commit fewer before the first action (decision 328). The owner's authority was read
        by the door just before. None (the run is created alone and driven as before) for a
        first step that waits, is skipped, fails to build or opens an approval."""
        t = m.advance(created.run, m.Proceed(now, True))
        dispatch = next((x for x in t.effects if isinstance(x, m.Dispatch)), None)
        if dispatch is None or dispatch.resolved.action == "request_approval":
            return None
        try:
            effect = await self.actions.build(t.run, dispatch)
        except StepFailure:
            return None
        drive = Drive(self, t.run, tei, {dispatch.step_index: effect})
        drive.first = dispatch
        return drive, t

    async def commit_new(self, prepared: Prepared, now: int) -> bool:
        if not await self.store.workflow_write(prepared.write, now):
            return False
        await self.created(prepared)
        return True

    async def created(self, prepared: Prepared) -> None:
        """After a new run committed: fan out its 46001 (and its first message) and start it."""
        for stored in prepared.write.stored_events:
            await self.host.fanout(stored)
        if prepared.leased:  # `first` is only ever set on a leased run
            self._start(prepared.run_id, prepared.first)
        else:
            self.kick(prepared.run_id)

    # -- the channel-event door (§7.1) -------------------------------------------------------
    def on_stored(self, stored: StoredEvent) -> None:
        """Called by ingest after an event committed; returns at once."""
        kind = stored.event.kind
        if kind in d.TRIGGER_KINDS or kind in JOB_ANSWERS:
            self._spawn(self._channel_event(stored))

    async def _channel_event(self, stored: StoredEvent) -> None:
        event, channel_id = stored.event, stored.channel_id
        if event.kind in JOB_ANSWERS:
            await self._job_answer(stored)
            return
        if channel_id is None or is_engine_event(event):
            return
        on = d.TRIGGER_KINDS[event.kind]
        now = int(time.time())
        for wf in await self.channel_workflows(channel_id):
            if wf.trigger_on != on:
                continue
            try:
                definition = self.definition(wf)
            except ValueError:
                continue
            context = channel_event_context(event, channel_id)
            go, error = fires(definition.trigger, event, context)
            if error is not None:
                log.info("workflow %s: filter failed: %s", wf.id, error)
            if not go or not await self.may_start(wf):
                continue
            prepared = await self.prepare_run(wf, Door.CHANNEL_EVENT, context, now, event.id, authorized=True)
            if isinstance(prepared, Prepared):
                await self.commit_new(prepared, now)

    async def _job_answer(self, stored: StoredEvent) -> None:
        job_id = next((v for v in stored.event.tag_values("e") if len(v) == 64), None)
        job = await self.store.get(job_id) if job_id else None
        if job is None or job.event.kind != 43001 or job.event.pubkey != self.relay_pubkey:
            return
        if stored.event.kind == 43005 and stored.event.pubkey == self.relay_pubkey:
            return  # the engine's own cancel
        try:
            run_id = json.loads(job.event.content)["source"]["run_id"]
        except (ValueError, KeyError, TypeError):
            return
        self.kick(run_id, force=True)

    # -- the webhook door (§14) --------------------------------------------------------------
    async def webhook(self, workflow_id: str, secret: str | None, body: bytes, idem: str | None
                      ) -> tuple[int, dict[str, Any], dict[str, str]]:  # fmt: skip
        now = int(time.time())
        if not self.hook_rate.allow(workflow_id, now):
            return 429, {"error": "too many requests"}, {"Retry-After": "60"}
        wf = await self.store.workflow(workflow_id)
        stored_hash = wf.secret_hash if wf is not None and wf.secret_hash else _DUMMY_HASH
        matches = hmac.compare_digest(secret_hash(secret or ""), stored_hash) and secret is not None
        if wf is None or not matches or wf.trigger_on != "webhook" or not await self.may_start(wf):
            return NOT_FOUND
        if len(body) > 1_048_576:
            return 413, {"error": "request body too large"}, {}
        parsed: dict[str, Any] | None = None
        if body.strip():
            try:
                parsed = json.loads(body)
            except ValueError as exc:
                return 400, {"error": f"invalid JSON body: {exc}"}, {}
            if not isinstance(parsed, dict):
                return 400, {"error": "invalid JSON body: not a JSON object"}, {}
        if idem is not None:
            if len(idem.encode()) > 128:
                return 400, {"error": "Idempotency-Key exceeds 128 bytes"}, {}
            first = await self.store.workflow_claimed_run("webhook", wf.id, idem)
            if first is not None:
                return 202, {"run_id": first, "workflow_id": wf.id, "status": "pending"}, {}
        prepared = await self.prepare_run(wf, Door.WEBHOOK, webhook_context(wf.channel_id, now, parsed), now,
                                          claim_key=idem, authorized=True)  # fmt: skip
        if prepared is Verdict.RATE_LIMITED:
            return 429, {"error": "workflow run rate exceeded"}, {"Retry-After": "60"}
        if not isinstance(prepared, Prepared):
            return 503, {"error": "workflow run queue is full"}, {"Retry-After": "30"}
        if not await self.commit_new(prepared, now):
            first = await self.store.workflow_claimed_run("webhook", wf.id, idem or "")
            return 202, {"run_id": first, "workflow_id": wf.id, "status": "pending"}, {}
        return 202, {"run_id": prepared.run_id, "workflow_id": wf.id, "status": "pending"}, {}

    # -- driving runs (§7.5, §11.2–§11.3) ----------------------------------------------------
    def kick(self, run_id: str, force: bool = False) -> None:
        """Try to take and drive one run now (a refill or the scan finds it otherwise)."""
        if run_id in self._running:
            return
        if self.free() <= 0:
            self._queued += 1  # taken by the refill when a drive frees
            return
        self._taking += 1  # the drive is this kick's from now: an instant's thousand kicks take 100
        self._spawn(self._take_and_drive(run_id, force))

    async def _take_and_drive(self, run_id: str, force: bool) -> None:
        taken: list[str] = []
        try:
            await self.gate.wait()
            now = int(time.time())
            taken = await self.store.workflow_take_runs(
                self.replica, now, self.settings.lease_s, 1, run_id, force
            )
            if taken:
                self._start(run_id)
        finally:
            self._taking -= 1
            if not taken:  # the drive kept for it is free again
                self.freed()

    def free(self) -> int:
        """Drives this replica may still start (`max_concurrent`, napping drives not counted;
        kicks whose take is on its way counted)."""
        return self.settings.max_concurrent - len(self._running) - self._taking + self.napping

    def _start(self, run_id: str, first: Drive | None = None) -> None:
        if run_id not in self._running:
            self._running[run_id] = asyncio.get_running_loop().create_task(
                self._drive(run_id, first), name=f"run-{run_id}"
            )

    async def scan(self) -> None:
        await self.gate.wait()
        async with self._take_lock:
            free = self.free()
            if free <= 0:
                return
            now = int(time.time())
            for run_id in await self.store.workflow_take_runs(self.replica, now, self.settings.lease_s, free):
                self._start(run_id)

    def freed(self) -> None:
        """A drive ended or began a nap: when runs were refused a drive, take them now (one
        refill at a time; drives freed meanwhile are counted by its next take)."""
        if self._queued and self._refill is None and not self._stopping and self.free() > 0:
            self._refill = asyncio.get_running_loop().create_task(self._refilling(), name="workflows-refill")

    async def _refilling(self) -> None:
        """Take as many queued runs as were refused a drive (`_queued`), in queue order, while
        drives are free. Bounded by that count: a run taken and put back (a workflow at its
        `max_concurrent`) is not taken again by the refill, only by the scan."""
        try:
            while self._queued:
                await self.gate.wait()
                async with self._take_lock:
                    want, seen = min(self.free(), self._queued), self._queued
                    if want <= 0:
                        return  # the next drive to free starts another refill
                    now = int(time.time())
                    taken = await self.store.workflow_take_runs(
                        self.replica, now, self.settings.lease_s, want
                    )
                    for run_id in taken:
                        self._start(run_id)
                    # fewer than asked: the queue is empty (the scan or another replica took the
                    # rest); the runs refused meanwhile keep their count
                    self._queued = max(0, self._queued - (want if len(taken) >= want else seen))
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("workflow refill failed; the scan takes the queue")
        finally:
            self._refill = None

    async def _renew(self) -> None:
        if self._running:
            until = int(time.time()) + self.settings.lease_s
            await self.store.workflow_renew_leases(self.replica, list(self._running), until)

    def _wake_later(self, run_id: str, at: int) -> None:
        loop = asyncio.get_running_loop()
        delay = max(0.0, at - time.time()) + 0.05
        holder: list[asyncio.TimerHandle] = []

        def fire() -> None:
            self._timers.discard(holder[0])
            self.kick(run_id)

        holder.append(loop.call_later(delay, fire))
        self._timers.add(holder[0])

    async def _drive(self, run_id: str, drive: Drive | None = None) -> None:
        """Drive `run_id`: `drive`, a run committed with its first step started (no
        `max_concurrent`: nothing to count), else the run as stored, once its workflow's
        `max_concurrent` lets it start (else it is deferred)."""
        workflow_id = None
        try:
            if drive is None:
                drive = await self._loaded(run_id)
                if drive is None:
                    return
            workflow_id = drive.run.workflow_id
            try:
                await drive.go()
            finally:
                if drive.started is not None:  # ended before its first commit
                    drive.started()
        except LeaseLost:
            log.info("run %s: lease taken by another replica", run_id)
        except Exception:
            log.exception("run %s: driving failed; its lease will lapse and the run resume", run_id)
        finally:
            self._running.pop(run_id, None)
            waiting = self._deferred.get(workflow_id) if workflow_id is not None else None
            if waiting:  # a run of its workflow deferred by `max_concurrent` may start now
                self.kick(waiting.pop(0))
            self.freed()

    async def _loaded(self, run_id: str) -> Drive | None:
        """The drive of a stored run; None when it is gone or deferred by `max_concurrent`
        (released, and kicked again when one of its workflow's runs ends)."""
        loaded = await self.store.workflow_run(run_id)
        if loaded is None:
            return None
        row, steps = loaded
        run = run_of(row, steps)
        cap = run.definition.max_concurrent
        starting = cap is not None and run.status is m.RunStatus.PENDING
        if starting and not await self._may_start_one(row.workflow_id, cap):
            self._deferred.setdefault(row.workflow_id, []).append(run_id)
            await self.store.workflow_release(self.replica, run_id)
            return None
        effects = {s.idx: e for s in steps if (e := step_effect(s)) is not None}
        drive = Drive(self, run, trigger_event_id(row), effects)
        if starting:
            drive.started = lambda: self._starting.__setitem__(
                row.workflow_id, self._starting[row.workflow_id] - 1
            )
        return drive

    async def _may_start_one(self, workflow_id: str, cap: int) -> bool:
        """Decision 184: a workflow's runs beyond its `max_concurrent` wait in the queue. Runs
        started anywhere count (the store), and runs of this process not yet committed `running`."""
        async with self._cap_lock:
            if await self.store.workflow_started_runs(workflow_id) + self._starting[workflow_id] >= cap:
                return False
            self._starting[workflow_id] += 1
            return True

    # -- approvals (§9.5) --------------------------------------------------------------------
    async def sweep(self) -> None:
        """Runs waiting on an approval whose expiry passed are taken by the scan (`wake_at`);
        this finds approvals left pending by runs that ended another way and closes them."""
        now = int(time.time())
        for row in await self.store.workflow_due_approvals(now):
            self.kick(row.run_id)

    # -- retention (§11.5) --------------------------------------------------------------------
    async def prune(self) -> int:
        """Delete terminal runs that ended more than the retention ago, with their events; old
        schedule claims and webhook keys. Bounded per pass (PRUNE_PAGES pages). Returns the
        runs deleted."""
        now = int(time.time())
        retention = self.settings.retention_s
        cutoff = now - int(retention) if retention > 0 else None
        after, deleted = (0, ""), 0
        for _ in range(L.PRUNE_PAGES if cutoff is not None else 0):
            page = await self.store.workflow_prune_candidates(cutoff, after, L.PRUNE_PAGE)
            if not page:
                break
            after = (page[-1].created_at, page[-1].id)
            old = [r.id for r in page if (ended_at(r) or r.created_at) < cutoff]  # type: ignore[operator]
            if old:
                deleted += await self.store.workflow_prune(old, now - L.CLAIM_RETENTION_S,
                                                           now - L.WEBHOOK_KEY_RETENTION_S)  # fmt: skip
            if len(page) < L.PRUNE_PAGE:
                break
        if deleted == 0:  # claims and keys are pruned on every pass, with runs or without
            await self.store.workflow_prune([], now - L.CLAIM_RETENTION_S, now - L.WEBHOOK_KEY_RETENTION_S)
        else:
            log.info("workflow retention: %d terminal run(s) deleted", deleted)
        return deleted
