"""The job state machine (jobs spec §5): who may sign each kind, which transitions are legal,
and a job's summary folded from its events.

The relay evaluates `advance` before it writes and again, atomically, in the write (the store
applies `refusals(kind)` under the job row's lock), so two racing 43002 yield one acceptance.
Clients fold the same table over the events they read (`fold`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

import orjson

from buzz.core.errors import Invalid, Refusal, Restricted
from buzz.core.event import Event
from buzz.jobs import limits as L


class State(StrEnum):
    REQUESTED = "requested"
    ACCEPTED = "accepted"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


OPEN_STATES = frozenset({State.REQUESTED, State.ACCEPTED, State.RUNNING})
TERMINAL_STATES = frozenset({State.COMPLETED, State.FAILED, State.CANCELLED})

# kind → (the states it is legal in, the state it leads to); §5.2.
TRANSITIONS: dict[int, tuple[frozenset[State], State]] = {
    L.KIND_JOB_ACCEPTED: (frozenset({State.REQUESTED}), State.ACCEPTED),
    L.KIND_JOB_PROGRESS: (frozenset({State.ACCEPTED, State.RUNNING}), State.RUNNING),
    L.KIND_JOB_RESULT: (OPEN_STATES, State.COMPLETED),
    L.KIND_JOB_FAILED: (OPEN_STATES, State.FAILED),
    L.KIND_JOB_CANCEL: (OPEN_STATES, State.CANCELLED),
}
# The refusal of a kind in a state it is not legal in, other than a terminal state (§5.2).
_SPECIAL: dict[tuple[int, State], str] = {
    (L.KIND_JOB_ACCEPTED, State.ACCEPTED): "job already accepted",
    (L.KIND_JOB_ACCEPTED, State.RUNNING): "job already accepted",
    (L.KIND_JOB_PROGRESS, State.REQUESTED): "job not accepted",
}
SEQ_REFUSAL = "job progress: seq must increase"

NOT_ASSIGNEE = Refusal(Restricted, "only the assigned agent may update this job")
NOT_CANCELLER = Refusal(Restricted, "not allowed to cancel this job")
SELF_REQUEST = "job request: an agent cannot request a job from itself"


def refusal(state: State, kind: int) -> str | None:
    """The reason (after `invalid: `) a `kind` event is refused in `state`, or None: legal."""
    legal, _ = TRANSITIONS[kind]
    if state in legal:
        return None
    if state in TERMINAL_STATES:
        return f"job is {state.value}"
    return _SPECIAL[(kind, state)]


def refusals(kind: int) -> tuple[tuple[str, str], ...]:
    """(state, reason) for every state `kind` is refused in: what the store checks under the
    job row's lock, as data, so it needs no knowledge of jobs."""
    return tuple((s.value, r) for s in State if (r := refusal(s, kind)) is not None)


def advance(state: State, kind: int) -> State:
    """The state after a `kind` event in `state`. Raises Invalid."""
    reason = refusal(state, kind)
    if reason is not None:
        raise Invalid(reason)
    return TRANSITIONS[kind][1]


@dataclass(frozen=True, slots=True)
class Job:
    """One job as every reader sees it (§5; the CLI's summary, §7)."""

    id: str
    channel_id: str
    requester: str
    assignee: str
    state: State
    created_at: int
    updated_at: int
    requested_outcome: str = ""
    prompt: str = ""
    deadline: int | None = None
    parent: str | None = None
    relay_signed: bool = False
    last_seq: int = 0
    disposition: str | None = None
    last_progress: str | None = None

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_STATES

    def summary(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "channel_id": self.channel_id,
            "requester": self.requester,
            "assignee": self.assignee,
            "state": self.state.value,
            "disposition": self.disposition,
            "requested_outcome": self.requested_outcome,
            "last_progress": self.last_progress,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }


def requester_of(request: Event, relay_pubkey: str | None) -> str:
    """§3.1: the 43001's author, or the `actor` of a relay-signed one."""
    if relay_pubkey is not None and request.pubkey == relay_pubkey:
        actor = request.first_tag("actor")
        if actor is not None:
            return actor
    return request.pubkey


def opened(request: Event, channel_id: str, relay_pubkey: str | None = None) -> Job:
    """The job a (valid) 43001 opens, in `requested`."""
    try:
        body = orjson.loads(request.content)
    except orjson.JSONDecodeError:
        body = {}
    body = body if isinstance(body, dict) else {}
    deadline = body.get("deadline")
    return Job(
        id=request.id,
        channel_id=channel_id,
        requester=requester_of(request, relay_pubkey),
        assignee=request.first_tag("p") or "",
        state=State.REQUESTED,
        created_at=request.created_at,
        updated_at=request.created_at,
        requested_outcome=str(body.get("requestedOutcome") or ""),
        prompt=str(body.get("prompt") or ""),
        deadline=deadline if isinstance(deadline, int) and not isinstance(deadline, bool) else None,
        parent=request.first_tag("parent-job"),
        relay_signed=relay_pubkey is not None and request.pubkey == relay_pubkey,
    )


def check_signer(
    job: Job,
    kind: int,
    signer: str,
    *,
    assignee_owner: str | None = None,
    channel_elevated: bool = False,
    relay_pubkey: str | None = None,
) -> None:
    """§5.1 for a lifecycle event. Raises Restricted."""
    if kind == L.KIND_JOB_CANCEL:
        allowed = (
            signer == job.requester
            or (assignee_owner is not None and signer == assignee_owner)
            or channel_elevated
            or (job.relay_signed and relay_pubkey is not None and signer == relay_pubkey)
        )
        if not allowed:
            raise NOT_CANCELLER()
    elif signer != job.assignee:
        raise NOT_ASSIGNEE()


def apply(job: Job, event: Event, body: dict[str, Any] | None = None) -> Job:
    """`job` after a lifecycle `event` already judged legal (signer, content); raises Invalid
    for an illegal transition or a non-increasing progress `seq`. `body` is its parsed content."""
    state = advance(job.state, event.kind)
    if body is None:
        try:
            body = orjson.loads(event.content)
        except orjson.JSONDecodeError:
            body = {}
        body = body if isinstance(body, dict) else {}
    changes: dict[str, Any] = {"state": state, "updated_at": max(job.updated_at, event.created_at)}
    if event.kind == L.KIND_JOB_PROGRESS:
        seq = body.get("seq")
        if not isinstance(seq, int) or seq <= job.last_seq:
            raise Invalid(SEQ_REFUSAL)
        changes["last_seq"] = seq
        if isinstance(body.get("message"), str):
            changes["last_progress"] = body["message"]
    elif event.kind == L.KIND_JOB_RESULT:
        changes["disposition"] = body.get("disposition")
    return replace(job, **changes)


_ORDER = {k: i for i, k in enumerate(sorted(L.LIFECYCLE_KINDS))}


def fold(request: Event, channel_id: str, events: Iterable[Event], relay_pubkey: str | None = None) -> Job:
    """A job's summary from its 43001 and the lifecycle events naming it (in any order): the
    same machine the relay runs, skipping what it would have refused (wrong signer for the
    updates, illegal transitions). Cancels are taken as the relay accepted them."""
    job = opened(request, channel_id, relay_pubkey)
    ordered = sorted(
        (e for e in events if e.kind in L.LIFECYCLE_KINDS), key=lambda e: (e.created_at, _ORDER[e.kind], e.id)
    )
    for event in ordered:
        if event.kind != L.KIND_JOB_CANCEL and event.pubkey != job.assignee:
            continue
        try:
            job = apply(job, event)
        except Invalid:
            continue
    return job
