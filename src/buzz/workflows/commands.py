"""The client-signed workflow kinds as the relay's rules see them: a 30620 save (§6.2), a 46020
manual trigger (§13), a 46030/46031 decision (§9.4), and the deletion of a workflow (§6.6).

Each function runs the spec's checks in order, raising the exact refusal (`buzz.core.errors`),
and returns the `WorkflowWrite` the relay commits with the event itself (an ingest effect), so
the event and the run or approval change are one transaction. `Gate` is the relay's write gate
of a channel for a pubkey (it raises Restricted).
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace

from buzz.core.errors import Conflict, Invalid, RateLimited, Restricted
from buzz.core.event import Event
from buzz.core.stored import StoredEvent
from buzz.store.workflow_rows import ActiveRun, ApprovalSwap, DeleteWorkflow, WorkflowRow, WorkflowWrite
from buzz.workflows import events as ev
from buzz.workflows import machine as m
from buzz.workflows.approvals import ApprovalStatus, DeciderFacts, Decision, decide
from buzz.workflows.authority import ELEVATED_ROLES
from buzz.workflows.capacity import Door, Verdict
from buzz.workflows.context import manual_context, parse_manual_inputs
from buzz.workflows.engine import Engine, Prepared, secret_hash
from buzz.workflows.rows import (
    approval_of,
    approval_row,
    changed_steps,
    run_of,
    run_row,
    step_effect,
    step_row,
)
from buzz.workflows.rows import trigger_event_id as tei_of
from buzz.workflows.validate import DefinitionError, parse_definition

Gate = Callable[[str, str], Awaitable[None]]
_HEX64 = re.compile(r"[0-9a-f]{64}\Z")


@dataclass(frozen=True)
class Saved:
    write: WorkflowWrite | None  # None: the engine is off (store the event only)
    response: str


def _first(event: Event, name: str) -> str | None:
    return next((t[1] for t in event.tags if len(t) >= 2 and t[0] == name), None)


async def save_definition(engine: Engine, stored: StoredEvent) -> Saved:
    """§6.2 items 3–9 for a 30620 whose `d` and channel the relay checked (items 1–2)."""
    event, channel_id = stored.event, stored.channel_id
    assert channel_id is not None
    workflow_id = _first(event, "d") or ""
    store = engine.store
    member = await store.get_member(channel_id, event.pubkey)
    if member is None or not member.active:
        raise Restricted("not a member of this channel")
    now = int(time.time())
    enabled = engine.settings.enabled
    definition = None
    if enabled:
        try:
            definition = parse_definition(event.content, now=now, channel_id=channel_id)
        except DefinitionError as exc:
            raise Invalid(exc.reason.removeprefix("invalid: ")) from None
        if definition.elevated and member.role not in ELEVATED_ROLES:
            raise Restricted("workflows with call_webhook actions require the owner or admin role")
    existing = await store.workflow(workflow_id)
    if existing is not None and existing.status == "deleted":
        existing = None
    if (
        enabled
        and existing is not None
        and (existing.owner != event.pubkey or existing.channel_id != channel_id)
    ):
        raise Restricted("workflow belongs to a different owner or channel")
    expected = _first(event, "expected-revision")
    if expected is not None:
        if not _HEX64.match(expected):
            raise Invalid("bad expected workflow revision")
        version = await store.get(expected, include_deleted=True)
        if version is None or version.event.kind != 30620 or version.event.pubkey != event.pubkey \
                or _first(version.event, "d") != workflow_id:  # fmt: skip
            raise Conflict("workflow revision does not exist")
        if existing is None or existing.head_event_id != expected:
            raise Conflict("workflow changed since it was loaded")
    if definition is None:
        return Saved(None, "")
    secret = None
    hashed = existing.secret_hash if existing is not None else None
    if definition.trigger.on == "webhook":
        if hashed is None:
            secret = str(uuid.uuid4())
            hashed = secret_hash(secret)
    else:
        hashed = None
    row = WorkflowRow(
        id=workflow_id, channel_id=channel_id, owner=event.pubkey, name=_first(event, "name") or definition.name,
        head_event_id=event.id, definition=definition.canonical, definition_hash=definition.definition_hash,
        trigger_on=definition.trigger.on, elevated=definition.elevated, enabled=definition.enabled, status="active",
        accepted_at=now, created_at=existing.created_at if existing is not None else now, updated_at=now,
        secret_hash=hashed,
    )  # fmt: skip
    body = {"workflow_id": workflow_id}
    if secret is not None:
        body["webhook_secret"] = secret
    return Saved(WorkflowWrite(workflow=row), "response:" + ev.compact(body))


async def manual_trigger(engine: Engine, stored: StoredEvent, gate: Gate) -> tuple[str, Prepared]:
    """§13 item 2 in order; returns the workflow's channel and the new run's write."""
    event = stored.event
    if not engine.settings.enabled:
        raise Restricted("workflows are disabled on this relay")
    trigger = ev.parse_manual_trigger(event)
    wf = await engine.store.workflow(trigger.workflow_id)
    if wf is None or wf.status == "deleted":
        raise Invalid("workflow not found")
    if trigger.channel_id is not None and trigger.channel_id != wf.channel_id:
        raise Invalid("workflow belongs to a different channel")
    await gate(wf.channel_id, event.pubkey)
    if event.pubkey != wf.owner and await engine.store.get_agent_owner(wf.owner) != event.pubkey:
        raise Restricted("only the workflow owner may trigger it")
    if not await engine.effectively_enabled(wf):
        raise Invalid("workflow is disabled")
    if not await engine.authorized(wf.owner, wf.channel_id, wf.elevated):
        raise Restricted("workflow owner is not authorized in this channel")
    inputs = parse_manual_inputs(event.content)
    now = int(time.time())
    prepared = await engine.prepare_run(wf, Door.MANUAL, manual_context(wf.channel_id, now, event.pubkey, inputs),
                                        now)  # fmt: skip
    if prepared is Verdict.RATE_LIMITED:
        raise RateLimited("workflow run rate exceeded")
    if not isinstance(prepared, Prepared):
        raise RateLimited("workflow run queue is full")
    return wf.channel_id, prepared


def manual_response(prepared: Prepared, workflow_id: str) -> str:
    return "response:" + ev.compact({"run_id": prepared.run_id, "workflow_id": workflow_id})


@dataclass(frozen=True)
class Answered:
    channel_id: str
    write: WorkflowWrite
    run_id: str


async def answer_approval(engine: Engine, stored: StoredEvent, gate: Gate) -> Answered:
    """§9.4: the checks of item 2 in order, and the decision with its run change (item 3)."""
    event = stored.event
    if not engine.settings.enabled:
        raise Restricted("workflows are disabled on this relay")
    answer = ev.parse_approval_answer(event)
    store = engine.store
    if answer.by_reference:
        row = await store.workflow_approval(answer.candidate)
    else:
        row = await store.workflow_approval(request_event_id=answer.candidate)
        if row is None and _HEX64.match(answer.candidate):
            row = await store.workflow_approval(answer.candidate)
    if row is None:
        raise Invalid("approval not found")
    if answer.channel_id is not None and answer.channel_id != row.channel_id:
        raise Invalid("approval belongs to a different channel")
    try:
        await gate(row.channel_id, event.pubkey)
        can_write = True
    except Restricted:
        can_write = False
    member = await store.get_member(row.channel_id, event.pubkey)
    role = member.role if member is not None and member.active else None
    now = int(time.time())
    status = ApprovalStatus.GRANTED if answer.grant else ApprovalStatus.DENIED
    decided = decide(approval_of(row), Decision(status, now, event.pubkey, answer.note or None, event.id),
                     DeciderFacts(can_write, role))  # fmt: skip
    write = WorkflowWrite(swap=ApprovalSwap(approval_row(decided)))
    loaded = await store.workflow_run(row.run_id)
    if loaded is not None:
        run_row_, steps = loaded
        run = run_of(run_row_, steps)
        rec = run.record
        if (
            run.status is m.RunStatus.WAITING_APPROVAL
            and rec is not None
            and rec.approval_ref == row.reference
        ):
            t = m.advance(run, m.ApprovalDecided(now, decided))
            effects = {s.idx: step_effect(s) for s in steps}
            write = WorkflowWrite(
                swap=write.swap,
                runs=(run_row(t.run, tei_of(run_row_)),),
                steps=tuple(step_row(run.id, r, effects.get(r.index)) for r in changed_steps(run, t.run)),
                events=engine._signed(t.emitted, run.channel_id),
                release=True,
            )
    return Answered(row.channel_id, write, row.run_id)


def deletion(
    engine: Engine, workflow_id: str, owner: str, by: str, whatever_the_head: bool = False
) -> tuple[DeleteWorkflow, list[StoredEvent]]:
    """§6.6 item 4 as the deletion's ingest effect: the store reads the workflow's unfinished
    runs inside the deletion's transaction and `cancel` turns them into one write — the row
    deleted (its secret gone), each run cancelled with `workflow_deleted` (its running or waiting
    step `cancelled`, its 46007, and the 43005 of a job it waited on), pending approvals
    `cancelled`, every lease dropped so a driving replica stops at its next write. The list
    holds the events of the last (the committed) attempt, to fan out after the commit."""
    produced: list[StoredEvent] = []

    def cancel(wf: WorkflowRow, active: list[ActiveRun], now: int) -> WorkflowWrite:
        runs, steps, events, approvals = [], [], [], []
        for row, step_rows, approval_rows in active:
            run = run_of(row, step_rows)
            t = m.advance(run, m.Cancel(now, by=by))
            effects = {s.idx: step_effect(s) for s in step_rows}
            runs.append(run_row(t.run, tei_of(row)))
            steps += [step_row(run.id, r, effects.get(r.index)) for r in changed_steps(run, t.run)]
            emitted = [*t.emitted, *(x.event for x in t.effects if isinstance(x, m.Emit))]
            events += engine._signed(emitted, run.channel_id)
            approvals += [approval_row(replace(approval_of(a), status=ApprovalStatus.CANCELLED, decided_at=now))
                          for a in approval_rows if a.status == "pending"]  # fmt: skip
        deleted = replace(wf, status="deleted", secret_hash=None, updated_at=now)
        produced[:] = events
        return WorkflowWrite(workflow=deleted, runs=tuple(runs), steps=tuple(steps), events=tuple(events),
                             release=True, cancel_approvals=tuple(approvals))  # fmt: skip

    return DeleteWorkflow(workflow_id, owner, cancel, whatever_the_head), produced


def deleted_heads(
    targets: tuple[StoredEvent, ...], addresses: tuple[tuple[int, str, str], ...]
) -> list[tuple[str, str]]:
    """(workflow id, owner) of each workflow whose head this kind 5 may remove (§6.6 item 3):
    an `a` coordinate of a 30620, or an `e` of a 30620 version; `DeleteWorkflow` acts only when
    the head is gone once the deletion's own effects applied."""
    found = [(d, pubkey) for kind, pubkey, d in addresses if kind == 30620]
    found += [(_first(t.event, "d") or "", t.event.pubkey) for t in targets if t.event.kind == 30620]
    return [(w, o) for w, o in dict.fromkeys(found) if w]


def parse_json_object(text: str) -> dict[str, object] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
