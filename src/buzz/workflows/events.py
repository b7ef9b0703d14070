"""Wire shapes of the workflow kinds as pure builders and parsers (§2.3, §9.3–§9.6, §10, §13).

Builders return unsigned `EventTemplate`s (kind, tags, content, created_at); the runner signs
them with the relay key and writes them in the same transaction as the state change that
caused them (§11.1 item 2). Parsers read the client-signed 46020 / 46030 / 46031 and raise the
spec's refusal (`buzz.core.errors`) when the shape is wrong.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from buzz.core.errors import Invalid
from buzz.core.event import Event
from buzz.workflows import limits as L
from buzz.workflows.approvals import ApprovalStatus, check_note

Tags = tuple[tuple[str, ...], ...]
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\Z")
_HEX64 = re.compile(r"[0-9a-f]{64}\Z")


@dataclass(frozen=True)
class EventTemplate:
    """An event for the relay key to sign; `created_at` is the persisted time of the change."""

    kind: int
    tags: Tags
    content: str
    created_at: int


@dataclass(frozen=True)
class RunRef:
    """Who and where an engine event speaks for: the workflow, its owner, its channel, the run."""

    workflow_id: str
    owner: str
    channel_id: str
    run_id: str


def compact(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def coordinate(owner: str, workflow_id: str) -> str:
    return f"{L.KIND_WORKFLOW_DEF}:{owner}:{workflow_id}"


def engine_tags(owner: str, workflow_id: str) -> Tags:
    """The three tags of §2.3 that every engine event ends with."""
    return (("buzz:workflow", "true"), ("buzz:workflow-owner", owner), ("a", coordinate(owner, workflow_id)))


# -- lifecycle 46001–46007 (§10) ---------------------------------------------------------------
def lifecycle(
    kind: int,
    ref: RunRef,
    seq: int,
    at: int,
    extra: dict[str, Any],
    *,
    step_id: str | None = None,
    trigger_event_id: str | None = None,
) -> EventTemplate:
    """One run-lifecycle event: `h`, `d` = W, `run`, [`step`], [`e`], [`p` owner on 46006], §2.3."""
    if kind not in L.KINDS_RUN_LIFECYCLE:
        raise ValueError(f"{kind} is not a lifecycle kind")
    tags: list[tuple[str, ...]] = [("h", ref.channel_id), ("d", ref.workflow_id), ("run", ref.run_id)]
    if step_id is not None:
        tags.append(("step", step_id))
    if kind == L.KIND_RUN_TRIGGERED and trigger_event_id:
        tags.append(("e", trigger_event_id))
    if kind == L.KIND_RUN_FAILED:
        tags.append(("p", ref.owner))
    tags += engine_tags(ref.owner, ref.workflow_id)
    content = {"v": 1, "workflow_id": ref.workflow_id, "run_id": ref.run_id, "seq": seq, **extra}
    return EventTemplate(kind, tuple(tags), compact(content), at)


def step_output_member(output: Any) -> dict[str, Any]:
    """46003's `output`: the output, or null with `output_truncated` past 8192 bytes (§10 item 4)."""
    if len(compact(output).encode()) <= L.EVENT_OUTPUT_MAX_BYTES:
        return {"output": output}
    return {"output": None, "output_truncated": True}


# -- approvals 46010–46012 (§9.3, §9.6) ------------------------------------------------------------
def approval_requested(
    ref: RunRef,
    seq: int,
    at: int,
    *,
    reference: str,
    workflow_name: str,
    step_id: str,
    message: str,
    approver_spec: str,
    designated: list[str],
    expires_at: int,
) -> EventTemplate:
    tags: list[tuple[str, ...]] = [("h", ref.channel_id), ("d", reference)]
    tags += [("p", pk) for pk in designated[: L.MAX_APPROVERS]]
    tags.append(("run", ref.run_id))
    tags += engine_tags(ref.owner, ref.workflow_id)
    content = {"v": 1, "workflow_id": ref.workflow_id, "workflow_name": workflow_name, "run_id": ref.run_id,
               "step_id": step_id, "message": message, "approver_spec": approver_spec, "expires_at": expires_at,
               "seq": seq}  # fmt: skip
    return EventTemplate(L.KIND_APPROVAL_REQUESTED, tuple(tags), compact(content), at)


def approval_decided(
    ref: RunRef,
    seq: int,
    at: int,
    *,
    reference: str,
    request_event_id: str,
    step_id: str,
    decision: ApprovalStatus,
    approver: str | None,
    note: str | None,
    decision_event_id: str | None,
) -> EventTemplate:
    kind = L.KIND_APPROVAL_GRANTED if decision is ApprovalStatus.GRANTED else L.KIND_APPROVAL_DENIED
    tags: list[tuple[str, ...]] = [
        ("h", ref.channel_id),
        ("d", reference),
        ("e", request_event_id),
        ("run", ref.run_id),
    ]
    if approver is not None and decision is not ApprovalStatus.EXPIRED:
        tags.append(("p", approver))
    tags += engine_tags(ref.owner, ref.workflow_id)
    content = {"v": 1, "workflow_id": ref.workflow_id, "run_id": ref.run_id, "step_id": step_id,
               "decision": decision.value, "approver": approver, "note": note,
               "decision_event_id": decision_event_id, "decided_at": at, "seq": seq}  # fmt: skip
    return EventTemplate(kind, tuple(tags), compact(content), at)


# -- jobs made by ask_agent (§8.8; spec/jobs.md §3) -------------------------------------------------
def job_request(
    ref: RunRef, at: int, *, agent: str, prompt: str, deadline: int, step_id: str
) -> EventTemplate:
    """The relay-signed 43001 of an `ask_agent` step; its id is the job id."""
    cut = prompt.encode("utf-8")[: L.REQUESTED_OUTCOME_MAX_BYTES].decode("utf-8", "ignore")
    content = {"schemaVersion": 1, "requestedOutcome": cut, "prompt": prompt, "deadline": deadline,
               "source": {"type": "workflow", "workflow_id": ref.workflow_id, "run_id": ref.run_id,
                          "step_id": step_id}}  # fmt: skip
    tags = (
        ("h", ref.channel_id),
        ("p", agent),
        ("actor", ref.owner),
        *engine_tags(ref.owner, ref.workflow_id),
    )
    return EventTemplate(43001, tags, compact(content), at)


def job_cancel(ref: RunRef, at: int, *, job_id: str, agent: str, reason: str) -> EventTemplate:
    """The relay-signed 43005 for a job the engine stops waiting on (timeout, cancelled run)."""
    tags = (
        ("h", ref.channel_id),
        ("e", job_id, "", "reply"),
        ("p", agent),
        *engine_tags(ref.owner, ref.workflow_id),
    )
    return EventTemplate(43005, tags, compact({"schemaVersion": 1, "reason": reason}), at)


# -- parsers of client-signed kinds --------------------------------------------------------------
def _first(event: Event, name: str) -> str | None:
    return next((t[1] for t in event.tags if len(t) >= 2 and t[0] == name), None)


@dataclass(frozen=True)
class ManualTrigger:
    """A 46020 (§13 item 1): the workflow it names, its optional `h`, its raw content."""

    workflow_id: str
    channel_id: str | None
    content: str


def parse_manual_trigger(event: Event) -> ManualTrigger:
    """Raises Invalid when the event names no workflow."""
    workflow = _first(event, "d")
    if workflow is None:
        workflow = next((t[1] for t in event.tags if len(t) >= 2 and t[0] == "e" and _UUID.match(t[1])), None)
    if workflow is None or not _UUID.match(workflow):
        raise Invalid("workflow not found")
    if len(event.content.encode("utf-8", "surrogatepass")) > L.MANUAL_INPUT_MAX_BYTES:
        raise Invalid(f"trigger inputs exceed {L.MANUAL_INPUT_MAX_BYTES} bytes")
    return ManualTrigger(workflow, _first(event, "h"), event.content)


@dataclass(frozen=True)
class ApprovalAnswer:
    """A 46030/46031 (§9.4 item 1). `by_reference` names the approval by its reference (`d`);
    otherwise `candidate` is the first `e`: a 46010 id first, then a reference."""

    grant: bool
    candidate: str
    by_reference: bool
    channel_id: str | None
    note: str


def parse_approval_answer(event: Event) -> ApprovalAnswer:
    """Raises Invalid for a missing reference or an oversized note."""
    if event.kind not in (L.KIND_APPROVAL_GRANT, L.KIND_APPROVAL_DENY):
        raise ValueError(f"kind {event.kind} is not an approval answer")
    check_note(event.content)
    d_value = _first(event, "d")
    if d_value is not None:
        return ApprovalAnswer(
            event.kind == L.KIND_APPROVAL_GRANT, d_value, True, _first(event, "h"), event.content
        )
    e_value = _first(event, "e")
    if e_value is None:
        raise Invalid("approval not found")
    return ApprovalAnswer(
        event.kind == L.KIND_APPROVAL_GRANT, e_value, False, _first(event, "h"), event.content
    )


def is_event_id(value: str) -> bool:
    return bool(_HEX64.match(value))
