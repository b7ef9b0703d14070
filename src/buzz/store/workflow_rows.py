"""Rows of the workflow engine's tables (workflows.md §11.1) and the one write that changes them.

The store knows nothing of definitions or run state machines: a run's and a step's details
travel as JSON text (`data`) that the runner in `buzz.workflows` reads and writes; the columns
are what the store must query on (status, wake-up times, leases, keyset order).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from buzz.core.errors import Invalid
from buzz.core.stored import StoredEvent


@dataclass(frozen=True, slots=True)
class WorkflowRow:
    """One workflow (§11.1 `workflows`): `definition` is the canonical JSON (§3.9), `yaml` the
    head's text, `status` `active` | `suspended` | `deleted`."""

    id: str
    channel_id: str
    owner: str
    name: str
    head_event_id: str
    definition: str
    definition_hash: str
    trigger_on: str
    elevated: bool
    enabled: bool
    status: str
    accepted_at: int
    created_at: int
    updated_at: int
    secret_hash: str | None = None


@dataclass(frozen=True, slots=True)
class RunRow:
    """One run (§11.1 `workflow_runs`); `data` holds the trigger context, revision, definition
    and times as the runner's JSON. `wake_at` is the earliest time the run needs attention
    while it waits (a delay, a job deadline, an approval expiry)."""

    id: str
    workflow_id: str
    status: str
    created_at: int
    current_step: int
    seq: int
    data: str
    wake_at: int | None = None
    error_code: str | None = None


@dataclass(frozen=True, slots=True)
class StepRow:
    run_id: str
    idx: int
    data: str  # the step record as the runner's JSON (status, attempt, effect, output, error)


@dataclass(frozen=True, slots=True)
class ApprovalRow:
    reference: str
    workflow_id: str
    run_id: str
    channel_id: str
    status: str
    expires_at: int
    data: str  # the approval as the runner's JSON (spec, approver, note, event ids, times)
    request_event_id: str | None = None


@dataclass(frozen=True, slots=True)
class Claim:
    """A unique row that must be new for the write to happen: a schedule instant
    (`workflow_schedule_claims`) or a webhook `Idempotency-Key` (`workflow_webhook_keys`)."""

    table: str  # "schedule" | "webhook"
    workflow_id: str
    key: str  # the instant (decimal) or the idempotency key
    run_id: str


@dataclass(frozen=True, slots=True)
class ApprovalSwap:
    """Move an approval out of `expected` status (compare-and-set, §9.4 item 2.6)."""

    row: ApprovalRow
    expected: str = "pending"


@dataclass(frozen=True, slots=True)
class WorkflowWrite:
    """Everything one engine transition commits at once (§11.1 items 1–2): rows to upsert,
    relay-signed events to store, an approval to open or decide, a claim that must be new.

    Also an ingest effect, so a 46020 / 46030 / 46031 and its run change commit together.
    `lease` (a replica id) makes every run update conditional on holding that run's lease.
    """

    workflow: WorkflowRow | None = None
    runs: tuple[RunRow, ...] = ()
    steps: tuple[StepRow, ...] = ()
    events: tuple[StoredEvent, ...] = ()
    approval: ApprovalRow | None = None
    swap: ApprovalSwap | None = None
    claim: Claim | None = None
    lease: str | None = None
    release: bool = False  # drop the lease with the write (the run waits or ended)
    take: tuple[str, int] | None = None  # (replica, until): a new run leased by its creator
    cancel_approvals: tuple[ApprovalRow, ...] = ()  # pending ones become these rows; decided ones stay
    # An action's events with the effects the relay's own path adds (`Host.plan`): a new run's
    # first message, stored with the run that sends it (decision 383)
    published: tuple[tuple[StoredEvent, tuple[Any, ...]], ...] = ()

    @property
    def stored_events(self) -> tuple[StoredEvent, ...]:
        """Every event the write stores, in the order they are fanned out after its commit."""
        return (*self.events, *(stored for stored, _ in self.published))


ActiveRun = tuple[RunRow, list[StepRow], list[ApprovalRow]]
CancelRuns = Callable[[WorkflowRow, list[ActiveRun], int], WorkflowWrite]


@dataclass(frozen=True, slots=True)
class DeleteWorkflow:
    """Ingest effect of a deletion that removes a workflow's live head (§6.6 items 3–4): in the
    deletion's own transaction, the workflow's unfinished runs are read (locked on PostgreSQL)
    and `cancel` — the runner's pure transition, given them — returns the write that marks the
    row deleted, cancels them and stores their 46007s. Nothing when the row is gone or already
    deleted, belongs to another owner, or its head is still live after the deletion's earlier
    effects (an `e` of an older version, an `a` deletion dated before the head)."""

    workflow_id: str
    owner: str
    cancel: CancelRuns
    whatever_the_head: bool = False  # the channel itself is deleted (9008): its heads stay stored


@dataclass(frozen=True, slots=True)
class RunLease:
    """Ingest effect: the event commits only while `owner` (a replica) holds the unfinished
    run's lease, so a step's effect never lands after its run was cancelled (§6.6 item 4).
    Raises LeaseLost otherwise, rolling the insert back."""

    run_id: str
    owner: str


class ApprovalRaced(Invalid):
    """The approval left `pending` while this decision was checked (§9.4 item 2.6)."""

    def __init__(self) -> None:
        super().__init__("approval already acted on (race)")


class LeaseLost(Exception):
    """Another replica holds the run now: this replica must stop driving it."""
