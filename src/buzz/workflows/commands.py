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
from dataclasses import dataclass

from buzz.core.errors import Conflict, Invalid, RateLimited, Restricted
from buzz.core.event import Event
from buzz.core.stored import StoredEvent
from buzz.store.workflow_rows import ApprovalSwap, WorkflowRow, WorkflowWrite
from buzz.workflows import events as ev
from buzz.workflows import machine as m
from buzz.workflows.approvals import ApprovalStatus, DeciderFacts, Decision, decide
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
ELEVATED = frozenset({"owner", "admin"})


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
        if definition.elevated and member.role not in ELEVATED:
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


async def delete_workflow(engine: Engine, workflow_id: str, by: str) -> None:
    """§6.6 item 4 after a deletion of the live head: the row is deleted, every non-terminal run
    cancelled with `workflow_deleted`, its pending approval cancelled, its job cancelled."""
    store = engine.store
    wf = await store.workflow(workflow_id)
    if wf is None or wf.status == "deleted":
        return
    now = int(time.time())
    deleted = WorkflowRow(**{**{f: getattr(wf, f) for f in wf.__slots__}, "status": "deleted", "secret_hash": None,
                             "updated_at": now})  # fmt: skip
    await store.workflow_write(WorkflowWrite(workflow=deleted), now)
    engine.invalidate(wf.channel_id)
    for run_id in await store.workflow_active_runs(workflow_id):
        loaded = await store.workflow_run(run_id)
        if loaded is None:
            continue
        row, steps = loaded
        run = run_of(row, steps)
        t = m.advance(run, m.Cancel(now, by=by))
        swap = None
        rec = run.record
        if run.status is m.RunStatus.WAITING_APPROVAL and rec is not None and rec.approval_ref:
            approval = await store.workflow_approval(rec.approval_ref)
            if approval is not None and approval.status == "pending":
                cancelled = approval_of(approval)
                from dataclasses import replace

                swap = ApprovalSwap(
                    approval_row(replace(cancelled, status=ApprovalStatus.CANCELLED, decided_at=now))
                )
        effects = {s.idx: step_effect(s) for s in steps}
        signed = engine._signed(t.emitted, run.channel_id)
        write = WorkflowWrite(runs=(run_row(t.run, tei_of(row)),), swap=swap, events=signed, release=True,
                              steps=tuple(step_row(run.id, r, effects.get(r.index)) for r in changed_steps(run, t.run)))  # fmt: skip
        try:
            await store.workflow_write(write, now)
        except Exception:  # a decision or another replica got there first: the run ends its own way
            continue
        for event in signed:
            await engine.host.fanout(event)


async def on_deletion(engine: Engine, stored: StoredEvent) -> None:
    """A committed kind 5 that removed a workflow's live head deletes the workflow (§6.6 item 3)."""
    event = stored.event
    for value in event.tag_values("a"):
        parts = value.split(":", 2)
        if len(parts) == 3 and parts[0] == "30620":
            wf = await engine.store.workflow(parts[2])
            if wf is not None and wf.owner == parts[1] and await engine.store.get(wf.head_event_id) is None:
                await delete_workflow(engine, wf.id, event.pubkey)
    for target_id in event.tag_values("e"):
        target = await engine.store.get(target_id, include_deleted=True) if _HEX64.match(target_id) else None
        if target is not None and target.event.kind == 30620:
            wf = await engine.store.workflow(_first(target.event, "d") or "")
            if wf is not None and wf.head_event_id == target_id:
                await delete_workflow(engine, wf.id, event.pubkey)


def parse_json_object(text: str) -> dict[str, object] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
