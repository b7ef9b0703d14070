"""The runner's side of the store rows: `machine.Run` ↔ `RunRow` + `StepRow`s, `Approval` ↔
`ApprovalRow` (workflows.md §11.1). Everything a run needs to continue after a restart is in
these rows (§11.3 item 3): the pinned definition (canonical JSON, itself YAML 1.2), the
trigger context, each step's record and the effect it recorded at its start (§11.4).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from functools import lru_cache
from typing import Any

from buzz.store.workflow_rows import ApprovalRow, RunRow, StepRow
from buzz.workflows import definition as d
from buzz.workflows.approvals import Approval, ApprovalStatus, parse_approver_spec
from buzz.workflows.machine import Run, RunStatus, StepRecord, StepStatus
from buzz.workflows.validate import parse_definition


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


@lru_cache(maxsize=2048)  # a minute of scheduled runs: their (channel, second) keys
def definition_of(canonical: str, channel_id: str, accepted_at: int) -> d.Definition:
    """The definition a run is pinned to. Canonical JSON is YAML 1.2, so the validator reads it
    back as it was saved; `accepted_at` anchors the cron checks as at save time."""
    return parse_definition(canonical, now=accepted_at, channel_id=channel_id)


def wake_at(run: Run) -> int | None:
    """When a waiting run needs a replica again: its delay, job deadline or approval expiry."""
    rec = run.record
    if run.status in (RunStatus.WAITING, RunStatus.WAITING_APPROVAL) and rec is not None:
        return rec.wake_at
    return None


def run_row(run: Run, trigger_event_id: str | None = None) -> RunRow:
    data = {
        "owner": run.owner,
        "channel_id": run.channel_id,
        "revision": run.revision,
        "definition": run.definition.canonical,
        "trigger": run.trigger,
        "trigger_event_id": trigger_event_id,
        "started_at": run.started_at,
        "completed_at": run.completed_at,
        "error_message": run.error_message,
    }
    return RunRow(run.id, run.workflow_id, run.status.value, run.created_at, run.current_step, run.seq,
                  _dumps(data), wake_at(run), run.error_code)  # fmt: skip


def step_row(run_id: str, rec: StepRecord, effect: Any = None) -> StepRow:
    data = asdict(rec)
    data["status"] = rec.status.value
    if effect is not None:
        data["effect"] = effect
    return StepRow(run_id, rec.index, _dumps(data))


def step_effect(row: StepRow) -> Any:
    return json.loads(row.data).get("effect")


def _record(row: StepRow) -> StepRecord:
    data = json.loads(row.data)
    data.pop("effect", None)
    data["status"] = StepStatus(data["status"])
    return StepRecord(**data)


def run_of(row: RunRow, steps: list[StepRow], accepted_at: int | None = None) -> Run:
    data = json.loads(row.data)
    definition = definition_of(data["definition"], data["channel_id"], accepted_at or row.created_at)
    return Run(
        id=row.id,
        workflow_id=row.workflow_id,
        owner=data["owner"],
        channel_id=data["channel_id"],
        revision=data["revision"],
        definition=definition,
        trigger=data["trigger"],
        created_at=row.created_at,
        status=RunStatus(row.status),
        current_step=row.current_step,
        steps=tuple(_record(s) for s in steps),
        seq=row.seq,
        started_at=data.get("started_at"),
        completed_at=data.get("completed_at"),
        error_code=row.error_code,
        error_message=data.get("error_message"),
    )


def trigger_event_id(row: RunRow) -> str | None:
    return json.loads(row.data).get("trigger_event_id")


def changed_steps(before: Run, after: Run) -> list[StepRecord]:
    old = {r.index: r for r in before.steps}
    return [r for r in after.steps if old.get(r.index) != r]


def approval_row(a: Approval) -> ApprovalRow:
    data = {"step_id": a.step_id, "step_index": a.step_index, "spec": a.spec.text, "created_at": a.created_at,
            "approver": a.approver, "note": a.note, "decision_event_id": a.decision_event_id,
            "decided_at": a.decided_at}  # fmt: skip
    return ApprovalRow(a.reference, a.workflow_id, a.run_id, a.channel_id, a.status.value, a.expires_at,
                       _dumps(data), a.request_event_id)  # fmt: skip


def approval_of(row: ApprovalRow) -> Approval:
    data = json.loads(row.data)
    return Approval(
        reference=row.reference,
        workflow_id=row.workflow_id,
        run_id=row.run_id,
        step_id=data["step_id"],
        step_index=data["step_index"],
        channel_id=row.channel_id,
        spec=parse_approver_spec(data["spec"]),
        expires_at=row.expires_at,
        created_at=data["created_at"],
        request_event_id=row.request_event_id,
        status=ApprovalStatus(row.status),
        approver=data.get("approver"),
        note=data.get("note"),
        decision_event_id=data.get("decision_event_id"),
        decided_at=data.get("decided_at"),
    )


def approval_json(row: ApprovalRow) -> dict[str, Any]:
    """The REST `<approval>` (§15 item 5): the reference, never a token."""
    a = approval_of(row)
    out: dict[str, Any] = {"approval_ref": a.reference, "workflow_id": a.workflow_id, "run_id": a.run_id,
                           "step_id": a.step_id, "step_index": a.step_index, "approver_spec": a.spec.text,
                           "status": a.status.value, "request_event_id": a.request_event_id,
                           "expires_at": a.expires_at, "created_at": a.created_at}  # fmt: skip
    if a.approver is not None:
        out["approver_pubkey"] = a.approver
    if a.note is not None:
        out["note"] = a.note
    if a.decision_event_id is not None:
        out["decision_event_id"] = a.decision_event_id
    if a.decided_at is not None:
        out["decided_at"] = a.decided_at
    return out


def run_json(row: RunRow, steps: list[StepRow]) -> dict[str, Any]:
    """The REST `<run>` (§15 item 2)."""
    data = json.loads(row.data)
    run = run_of(row, steps)
    return {"id": row.id, "workflow_id": row.workflow_id, "status": row.status, "current_step": row.current_step,
            "execution_trace": [r.trace() for r in run.steps], "started_at": data.get("started_at"),
            "completed_at": data.get("completed_at"), "error_code": row.error_code,
            "error_message": data.get("error_message"), "created_at": row.created_at,
            "trigger": data["trigger"], "trigger_event_id": data.get("trigger_event_id"),
            "revision": data["revision"], "waiting": run.waiting}  # fmt: skip


def ended_at(row: RunRow) -> int | None:
    """When a terminal run ended (retention counts from there, §11.5)."""
    value = json.loads(row.data).get("completed_at")
    return int(value) if isinstance(value, int) else None
