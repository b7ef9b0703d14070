"""The run state machine, sans I/O: `advance(run, input) → Transition(run, effects)` (§7, §9, §11).

The runner owns every clock read, lookup, signature, transaction and socket; this module owns
every decision. For each input it returns the new run and the effects, and the runner's
contract is:

1. **Commit first.** Write `transition.run` (its status, step records, `seq`) and every
   `Emit` of the transition in ONE transaction (the events into the outbox, §11.1 item 2),
   together with the step's built effect when the transition holds a `Dispatch`.
2. **Then act.** Perform the `Dispatch` (send the recorded events, call the webhook with the
   recorded request), publish the outbox, arm `WakeAt` timers, and on `Continue` feed
   `Proceed` again.
3. **Feed back the result**: `StepSucceeded`, `StepFailed`, `StepWaits` (ask_agent's job),
   `ApprovalOpened` (request_approval: fed before committing, so the step start, the
   approval row and the 46010 commit together), then `Wake`, `JobFinished`,
   `ApprovalDecided`, `Cancel` as they happen.

What is durable after each step: the step record (`running` with attempt, `effect_at` and the
effect) is committed **before** the effect is performed, and `completed` with its output
after. A process killed anywhere resumes with `Proceed`: a run whose current step is
`running` re-dispatches that step with `attempt + 1` and the **same** recorded effect (the
same event ids, so a repeat insert is a `duplicate`; the same `Idempotency-Key`), so it
continues "from the step after the last completed one" and acts at most once per effect.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from buzz.workflows import definition as d
from buzz.workflows import events as ev
from buzz.workflows import limits as L
from buzz.workflows.approvals import Approval, ApprovalStatus
from buzz.workflows.conditions import ConditionError, evaluate
from buzz.workflows.context import condition_variables, template_scope
from buzz.workflows.resolve import Resolved, StepFailure, resolve


class RunStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    WAITING = "waiting"
    WAITING_APPROVAL = "waiting_approval"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


class StepStatus(StrEnum):
    RUNNING = "running"
    WAITING = "waiting"
    COMPLETED = "completed"
    SKIPPED = "skipped"
    FAILED = "failed"
    CANCELLED = "cancelled"


S = RunStatus
TERMINAL = frozenset({S.COMPLETED, S.FAILED, S.CANCELLED})
# The legal moves of a run (§7.3); `advance` refuses anything else before changing a thing.
RUN_TRANSITIONS: dict[RunStatus, frozenset[RunStatus]] = {
    S.PENDING: frozenset({S.RUNNING, S.FAILED, S.CANCELLED}),
    S.RUNNING: frozenset({S.RUNNING, S.WAITING, S.WAITING_APPROVAL, S.COMPLETED, S.FAILED, S.CANCELLED}),
    S.WAITING: frozenset({S.RUNNING, S.FAILED, S.CANCELLED}),
    S.WAITING_APPROVAL: frozenset({S.RUNNING, S.FAILED, S.CANCELLED}),
    S.COMPLETED: frozenset(),
    S.FAILED: frozenset(),
    S.CANCELLED: frozenset(),
}
HOLDS_PERMIT = frozenset({S.RUNNING})  # §7.4 item 2


class IllegalTransition(Exception):
    """The input does not apply to the run in its state (a runner bug or a stale input)."""


@dataclass(frozen=True)
class StepRecord:
    """One row of `workflow_steps` (§11.1) and one entry of the execution trace (§7.7)."""

    index: int
    step_id: str
    action: str
    status: StepStatus
    attempt: int = 1
    started_at: int | None = None
    effect_at: int | None = None
    resolved: dict[str, Any] | None = None
    completed_at: int | None = None
    output: dict[str, Any] | None = None
    error_code: str | None = None
    error_message: str | None = None
    wake_at: int | None = None  # delay: wake time; ask_agent: the job's deadline
    job_id: str | None = None
    agent: str | None = None
    approval_ref: str | None = None

    def trace(self) -> dict[str, Any]:
        entry = {"step_id": self.step_id, "index": self.index, "action": self.action, "status": self.status.value,
                 "attempts": self.attempt, "started_at": self.started_at, "completed_at": self.completed_at}  # fmt: skip
        if self.output is not None:
            entry["output"] = self.output
        if self.error_code is not None:
            entry.update(error_code=self.error_code, error_message=self.error_message)
        return entry


@dataclass(frozen=True)
class Run:
    """One row of `workflow_runs` with its step records; `seq` is the last sequence number used."""

    id: str
    workflow_id: str
    owner: str
    channel_id: str
    revision: str
    definition: d.Definition
    trigger: dict[str, Any]  # the stored trigger context (§7.2)
    created_at: int
    status: RunStatus = RunStatus.PENDING
    current_step: int = 0
    steps: tuple[StepRecord, ...] = ()
    seq: int = 0
    started_at: int | None = None
    completed_at: int | None = None
    error_code: str | None = None
    error_message: str | None = None

    @property
    def ref(self) -> ev.RunRef:
        return ev.RunRef(self.workflow_id, self.owner, self.channel_id, self.id)

    @property
    def record(self) -> StepRecord | None:
        """The record of the current step, if it was started."""
        return next((r for r in self.steps if r.index == self.current_step), None)

    @property
    def outputs(self) -> dict[str, dict[str, Any]]:
        return {
            r.step_id: r.output
            for r in self.steps
            if r.status is StepStatus.COMPLETED and r.output is not None
        }

    @property
    def waiting(self) -> dict[str, Any] | None:
        """The REST `waiting` member (§15 item 2)."""
        rec = self.record
        if self.status is S.WAITING_APPROVAL:
            return {"for": "approval", "until": rec.wake_at if rec else None}
        if self.status is S.WAITING and rec is not None:
            return {"for": "delay" if rec.action == "delay" else "job", "until": rec.wake_at}
        return None


# -- inputs ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Proceed:
    """Run the current step (or start, resume, or finish the run). `owner_authorized` is §6.5."""

    now: int
    owner_authorized: bool


@dataclass(frozen=True)
class StepSucceeded:
    now: int
    output: dict[str, Any]
    tries: int | None = None  # call_webhook's HTTP attempts in this dispatch (retries included)


@dataclass(frozen=True)
class StepFailed:
    now: int
    code: str
    message: str
    tries: int | None = None


@dataclass(frozen=True)
class StepWaits:
    """ask_agent's 43001 was inserted: wait for the job until `deadline`."""

    now: int
    job_id: str
    agent: str
    deadline: int


@dataclass(frozen=True)
class ApprovalOpened:
    """request_approval's row was made; the runner knows who the designated approvers are."""

    now: int
    approval: Approval
    designated: tuple[str, ...]


@dataclass(frozen=True)
class Wake:
    """A delay's `wake_at` or a job's deadline may have passed."""

    now: int


@dataclass(frozen=True)
class JobFinished:
    """A 43004 (`output` set), a 43006 (`failure`) or someone else's 43005 (`cancelled`)."""

    now: int
    output: dict[str, Any] | None = None
    failure: str | None = None
    cancelled: bool = False


@dataclass(frozen=True)
class ApprovalDecided:
    """The approval left `pending` (granted, denied, expired); `approval` is the decided row."""

    now: int
    approval: Approval


@dataclass(frozen=True)
class Cancel:
    """The workflow was deleted (§6.6)."""

    now: int
    reason: str = "workflow_deleted"
    by: str | None = None


Input = (
    Proceed
    | StepSucceeded
    | StepFailed
    | StepWaits
    | ApprovalOpened
    | Wake
    | JobFinished
    | ApprovalDecided
    | Cancel
)


# -- effects -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Emit:
    """Sign and store this event in the same transaction as the new run (outbox)."""

    event: ev.EventTemplate


@dataclass(frozen=True)
class Dispatch:
    """Build the step's effect from `resolved`, commit it with the run, then perform it."""

    step_index: int
    step_id: str
    attempt: int
    effect_at: int
    resolved: Resolved
    deadline: int  # effect_at + timeout_secs: past it the runner feeds StepFailed(step_timeout)
    resume: bool  # True: re-dispatch the recorded effect of an earlier attempt


@dataclass(frozen=True)
class WakeAt:
    at: int


@dataclass(frozen=True)
class Continue:
    """Feed `Proceed` again: the run is `running` and has a next step (or must finish)."""


Effect = Emit | Dispatch | WakeAt | Continue


@dataclass(frozen=True)
class Transition:
    run: Run
    effects: tuple[Effect, ...] = field(default_factory=tuple)

    @property
    def emitted(self) -> list[ev.EventTemplate]:
        return [e.event for e in self.effects if isinstance(e, Emit)]


# -- helpers -----------------------------------------------------------------------------------
def _cut(message: str) -> str:
    raw = message.encode("utf-8", "surrogatepass")
    return (
        message
        if len(raw) <= L.ERROR_MESSAGE_MAX_BYTES
        else raw[: L.ERROR_MESSAGE_MAX_BYTES].decode("utf-8", "ignore")
    )


class _Out:
    """Collects a transition's effects and numbers its events."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.effects: list[Effect] = []

    def move(self, status: RunStatus, **changes: Any) -> None:
        if status not in RUN_TRANSITIONS[self.run.status]:
            raise IllegalTransition(f"run {self.run.status.value} cannot become {status.value}")
        self.run = replace(self.run, status=status, **changes)

    def emit(self, kind: int, at: int, extra: dict[str, Any], **tags: Any) -> None:
        seq = self.run.seq + 1
        self.run = replace(self.run, seq=seq)
        self.effects.append(Emit(ev.lifecycle(kind, self.run.ref, seq, at, extra, **tags)))

    def emit_template(self, build: Any) -> None:
        seq = self.run.seq + 1
        self.run = replace(self.run, seq=seq)
        self.effects.append(Emit(build(seq)))

    def put(self, rec: StepRecord) -> None:
        others = tuple(r for r in self.run.steps if r.index != rec.index)
        self.run = replace(self.run, steps=tuple(sorted((*others, rec), key=lambda r: r.index)))

    def done(self) -> Transition:
        return Transition(self.run, tuple(self.effects))


def _step_extra(rec: StepRecord) -> dict[str, Any]:
    return {"step_id": rec.step_id, "step_index": rec.index, "action": rec.action}


def _fail(out: _Out, now: int, code: str, message: str, rec: StepRecord | None) -> Transition:
    message = _cut(message)
    if rec is not None:
        rec = replace(rec, status=StepStatus.FAILED, completed_at=now, error_code=code, error_message=message)
        out.put(rec)
        extra = {**_step_extra(rec), "error_code": code, "error_message": message}
        out.emit(L.KIND_STEP_FAILED, now, extra, step_id=rec.step_id)
    out.move(S.FAILED, completed_at=now, error_code=code, error_message=message)
    failed_step = rec.step_id if rec else None
    out.emit(L.KIND_RUN_FAILED, now, {"error_code": code, "error_message": message, "failed_step": failed_step,
                                      "completed_at": now})  # fmt: skip
    return out.done()


def _complete_step(out: _Out, now: int, rec: StepRecord, output: dict[str, Any]) -> Transition:
    size = len(ev.compact(output).encode())
    if size > L.STEP_OUTPUT_MAX_BYTES:
        code = "webhook_failed" if rec.action == "call_webhook" else "action_failed"
        return _fail(out, now, code, f"step output exceeds {L.STEP_OUTPUT_MAX_BYTES} bytes", rec)
    rec = replace(rec, status=StepStatus.COMPLETED, completed_at=now, output=output)
    out.put(rec)
    extra = {**_step_extra(rec), "status": "completed", **ev.step_output_member(output)}
    out.emit(L.KIND_STEP_COMPLETED, now, extra, step_id=rec.step_id)
    out.move(S.RUNNING, current_step=rec.index + 1)
    out.effects.append(Continue())
    return out.done()


def _finish(out: _Out, now: int) -> Transition:
    recs = out.run.steps
    out.move(S.COMPLETED, completed_at=now)
    out.emit(L.KIND_RUN_COMPLETED, now, {
        "started_at": out.run.started_at, "completed_at": now,
        "steps_completed": sum(r.status is StepStatus.COMPLETED for r in recs),
        "steps_skipped": sum(r.status is StepStatus.SKIPPED for r in recs)})  # fmt: skip
    return out.done()


# -- the transitions ---------------------------------------------------------------------------
def create(
    *, run_id: str, workflow_id: str, owner: str, channel_id: str, revision: str, definition: d.Definition,
    trigger: dict[str, Any], now: int, trigger_event_id: str | None = None,
) -> Transition:  # fmt: skip
    """A new `pending` run and its 46001, committed together at the door (§7.1)."""
    run = Run(run_id, workflow_id, owner, channel_id, revision, definition, trigger, now)
    out = _Out(run)
    author = trigger.get("author") or None
    out.emit(L.KIND_RUN_TRIGGERED, now, {"trigger": {"on": definition.trigger.on, "event_id": trigger_event_id,
                                                      "author": author}, "revision": revision},
             trigger_event_id=trigger_event_id)  # fmt: skip
    return out.done()


def refused(
    *, run_id: str, workflow_id: str, owner: str, channel_id: str, revision: str, definition: d.Definition,
    trigger: dict[str, Any], now: int,
) -> Run:  # fmt: skip
    """A channel-event or schedule run refused by a full queue: `failed`, no events (§7.4 item 3)."""
    return Run(run_id, workflow_id, owner, channel_id, revision, definition, trigger, now, status=S.FAILED,
               completed_at=now, error_code="capacity_exceeded", error_message="the workflow run queue is full")  # fmt: skip


def _proceed(run: Run, inp: Proceed) -> Transition:
    out = _Out(run)
    now = inp.now
    if run.status is S.PENDING:
        out.move(S.RUNNING, started_at=now)
    elif run.status is not S.RUNNING:
        raise IllegalTransition(f"Proceed does not apply to a {run.status.value} run")
    steps = run.definition.steps
    if out.run.current_step >= len(steps):
        return _finish(out, now)
    step = steps[out.run.current_step]
    rec = out.run.record
    if rec is not None and rec.status is StepStatus.RUNNING and rec.resolved is not None:
        # Resume after a crash: the same effect again, one attempt later (§11.3 item 1).
        rec = replace(rec, attempt=rec.attempt + 1)
        out.put(rec)
        out.emit(L.KIND_STEP_STARTED, now, {**_step_extra(rec), "attempt": rec.attempt}, step_id=rec.step_id)
        assert rec.effect_at is not None
        out.effects.append(Dispatch(rec.index, rec.step_id, rec.attempt, rec.effect_at,
                                    Resolved(rec.action, rec.resolved), now + step.timeout_secs, True))  # fmt: skip
        return out.done()
    rec = StepRecord(out.run.current_step, step.id, step.action_name, StepStatus.RUNNING, 1, now, now)
    if not inp.owner_authorized:
        return _fail(
            out, now, "owner_unauthorized", "the workflow owner is no longer authorized in this channel", rec
        )
    if step.condition is not None:
        try:
            go = evaluate(step.condition, condition_variables(run.trigger, out.run.outputs))
        except ConditionError as exc:
            return _fail(out, now, "condition_evaluation_failed", f"step {step.id} if: {exc}", rec)
        if not go:
            rec = replace(rec, status=StepStatus.SKIPPED, completed_at=now)
            out.put(rec)
            out.emit(L.KIND_STEP_COMPLETED, now, {**_step_extra(rec), "status": "skipped", "output": None},
                     step_id=rec.step_id)  # fmt: skip
            out.move(S.RUNNING, current_step=rec.index + 1)
            out.effects.append(Continue())
            return out.done()
    try:
        resolved = resolve(step, template_scope(run.trigger, out.run.outputs), channel_id=run.channel_id,
                           owner=run.owner, run_id=run.id)  # fmt: skip
    except StepFailure as exc:
        return _fail(out, now, exc.code, exc.message, rec)
    rec = replace(rec, resolved=resolved.fields)
    out.emit(L.KIND_STEP_STARTED, now, {**_step_extra(rec), "attempt": 1}, step_id=rec.step_id)
    if isinstance(step.action, d.Delay):
        wake = now + step.action.duration
        out.put(replace(rec, status=StepStatus.WAITING, wake_at=wake))
        out.move(S.WAITING)
        out.effects.append(WakeAt(wake))
        return out.done()
    out.put(rec)
    out.effects.append(Dispatch(rec.index, rec.step_id, 1, now, resolved, now + step.timeout_secs, False))
    return out.done()


def _current(run: Run, *statuses: StepStatus) -> StepRecord:
    rec = run.record
    if rec is None or rec.status not in statuses:
        raise IllegalTransition(f"step {run.current_step} is not {'/'.join(s.value for s in statuses)}")
    return rec


def _step_result(run: Run, inp: StepSucceeded | StepFailed) -> Transition:
    if run.status is not S.RUNNING:
        raise IllegalTransition(f"a step result does not apply to a {run.status.value} run")
    rec = _current(run, StepStatus.RUNNING)
    if inp.tries is not None:  # the trace's `attempts` counts the retries inside this dispatch too
        rec = replace(rec, attempt=rec.attempt - 1 + inp.tries)
    out = _Out(run)
    if isinstance(inp, StepFailed):
        return _fail(out, inp.now, inp.code, inp.message, rec)
    return _complete_step(out, inp.now, rec, inp.output)


def _step_waits(run: Run, inp: StepWaits) -> Transition:
    rec = _current(run, StepStatus.RUNNING)
    out = _Out(run)
    out.put(replace(rec, status=StepStatus.WAITING, job_id=inp.job_id, agent=inp.agent, wake_at=inp.deadline))
    out.move(S.WAITING)
    out.effects.append(WakeAt(inp.deadline))
    return out.done()


def _approval_opened(run: Run, inp: ApprovalOpened) -> Transition:
    rec = _current(run, StepStatus.RUNNING)
    a = inp.approval
    out = _Out(run)
    out.put(replace(rec, status=StepStatus.WAITING, approval_ref=a.reference, wake_at=a.expires_at))
    out.move(S.WAITING_APPROVAL)
    message = (rec.resolved or {}).get("message", "")
    out.emit_template(lambda seq: ev.approval_requested(
        run.ref, seq, inp.now, reference=a.reference, workflow_name=run.definition.name, step_id=rec.step_id,
        message=message, approver_spec=a.spec.text, designated=list(inp.designated), expires_at=a.expires_at))  # fmt: skip
    out.effects.append(WakeAt(a.expires_at))
    return out.done()


def _wake(run: Run, inp: Wake) -> Transition:
    if run.status is not S.WAITING:
        raise IllegalTransition(f"Wake does not apply to a {run.status.value} run")
    rec = _current(run, StepStatus.WAITING)
    assert rec.wake_at is not None
    if inp.now < rec.wake_at:
        return Transition(run, (WakeAt(rec.wake_at),))  # early: nothing changes
    out = _Out(run)
    out.move(S.RUNNING)
    if rec.action == "delay":
        slept = (rec.resolved or {}).get("duration", rec.wake_at - (rec.effect_at or rec.wake_at))
        return _complete_step(out, inp.now, rec, {"slept_secs": slept, "woke_at": inp.now})
    assert rec.job_id is not None and rec.agent is not None
    # a 43005 is a job event, not a lifecycle one: it takes no `seq`
    out.effects.append(
        Emit(ev.job_cancel(run.ref, inp.now, job_id=rec.job_id, agent=rec.agent, reason="timeout"))
    )
    return _fail(out, inp.now, "job_timeout", "the agent did not finish the job in time", rec)


def _job_finished(run: Run, inp: JobFinished) -> Transition:
    if run.status is not S.WAITING:
        raise IllegalTransition(f"a job result does not apply to a {run.status.value} run")
    rec = _current(run, StepStatus.WAITING)
    out = _Out(run)
    out.move(S.RUNNING)
    if inp.output is not None:
        return _complete_step(out, inp.now, rec, inp.output)
    if inp.cancelled:
        return _fail(out, inp.now, "job_cancelled", "the job was cancelled", rec)
    return _fail(out, inp.now, "job_failed", inp.failure or "the job failed", rec)


def _approval_decided(run: Run, inp: ApprovalDecided) -> Transition:
    a = inp.approval
    if run.status is not S.WAITING_APPROVAL:
        raise IllegalTransition(f"a decision does not apply to a {run.status.value} run")
    rec = _current(run, StepStatus.WAITING)
    if rec.approval_ref != a.reference:
        raise IllegalTransition("the decision names another approval")
    out = _Out(run)
    out.emit_template(lambda seq: ev.approval_decided(
        run.ref, seq, inp.now, reference=a.reference, request_event_id=a.request_event_id or "",
        step_id=rec.step_id, decision=a.status, approver=a.approver, note=a.note,
        decision_event_id=a.decision_event_id))  # fmt: skip
    if a.status is ApprovalStatus.GRANTED:
        out.move(S.RUNNING)
        return _complete_step(
            out, inp.now, rec, {"approved": True, "approver": a.approver, "note": a.note or ""}
        )
    if a.status is ApprovalStatus.EXPIRED:
        return _fail(out, inp.now, "approval_expired", "the approval expired", rec)
    if a.status is not ApprovalStatus.DENIED:
        raise IllegalTransition(f"approval {a.status.value} is not a decision")
    out.put(replace(rec, status=StepStatus.CANCELLED, completed_at=inp.now))
    out.move(S.CANCELLED, completed_at=inp.now, error_code="approval_denied",
             error_message="an approver denied the request")  # fmt: skip
    out.emit(L.KIND_RUN_CANCELLED, inp.now, {"reason": "approval_denied", "cancelled_by": a.approver,
                                             "completed_at": inp.now})  # fmt: skip
    return out.done()


def _cancel(run: Run, inp: Cancel) -> Transition:
    out = _Out(run)
    rec = run.record
    if rec is not None and rec.status in (StepStatus.RUNNING, StepStatus.WAITING):
        out.put(replace(rec, status=StepStatus.CANCELLED, completed_at=inp.now))
        if rec.job_id and rec.agent:
            out.effects.append(Emit(ev.job_cancel(run.ref, inp.now, job_id=rec.job_id, agent=rec.agent,
                                                  reason="workflow cancelled")))  # fmt: skip
    out.move(
        S.CANCELLED, completed_at=inp.now, error_code=inp.reason, error_message="the workflow was deleted"
    )
    out.emit(
        L.KIND_RUN_CANCELLED, inp.now, {"reason": inp.reason, "cancelled_by": inp.by, "completed_at": inp.now}
    )
    return out.done()


_HANDLERS: dict[type, Any] = {
    Proceed: _proceed,
    StepSucceeded: _step_result,
    StepFailed: _step_result,
    StepWaits: _step_waits,
    ApprovalOpened: _approval_opened,
    Wake: _wake,
    JobFinished: _job_finished,
    ApprovalDecided: _approval_decided,
    Cancel: _cancel,
}


def advance(run: Run, inp: Input) -> Transition:
    """Apply one input. Raises IllegalTransition, leaving `run` (immutable) as it was."""
    if run.status in TERMINAL:
        raise IllegalTransition(f"the run is {run.status.value}")
    return _HANDLERS[type(inp)](run, inp)
