"""Capacity: which new runs are admitted, which pending runs may start, and the run rate (§7.1, §7.4).

Policies as data: `REFUSALS` says what each door does with a run it cannot create, so the
channel-event, schedule, webhook and manual paths never decide it themselves.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from buzz.workflows.limits import MAX_CONCURRENT_RUNS, RUN_QUEUE_MAX, RUN_RATE_WINDOW_S, WORKFLOW_RUN_RATE


class Door(StrEnum):
    CHANNEL_EVENT = "channel_event"
    SCHEDULE = "schedule"
    WEBHOOK = "webhook"
    MANUAL = "manual"


class Verdict(StrEnum):
    ADMIT = "admit"
    QUEUE_FULL = "queue_full"
    RATE_LIMITED = "rate_limited"


@dataclass(frozen=True)
class Refusal:
    """What a door does with a run it may not create."""

    record_failed: bool  # store the run `failed` with `capacity_exceeded` (no lifecycle events)
    http_status: int | None  # the webhook's answer
    relay_message: str | None  # the 46020's `OK false` message
    log: bool  # one log line per workflow per minute


# (door, verdict) → refusal; every door has both rows (§7.1, §7.4 item 3, §13 item 2.7, §14).
REFUSALS: dict[tuple[Door, Verdict], Refusal] = {
    (Door.CHANNEL_EVENT, Verdict.QUEUE_FULL): Refusal(True, None, None, True),
    (Door.SCHEDULE, Verdict.QUEUE_FULL): Refusal(True, None, None, True),
    (Door.WEBHOOK, Verdict.QUEUE_FULL): Refusal(False, 503, None, False),
    (Door.MANUAL, Verdict.QUEUE_FULL): Refusal(
        False, None, "rate-limited: workflow run queue is full", False
    ),
    (Door.CHANNEL_EVENT, Verdict.RATE_LIMITED): Refusal(False, None, None, True),
    (Door.SCHEDULE, Verdict.RATE_LIMITED): Refusal(False, None, None, True),
    (Door.WEBHOOK, Verdict.RATE_LIMITED): Refusal(False, 429, None, False),
    (Door.MANUAL, Verdict.RATE_LIMITED): Refusal(
        False, None, "rate-limited: workflow run rate exceeded", False
    ),
}


class RunRate:
    """At most `limit` runs created per workflow in any `window` seconds (WORKFLOW_RUN_RATE).

    Memory is bounded by `limit` instants per workflow seen within the last window; `forget`
    drops workflows idle for a window.
    """

    def __init__(self, limit: int = WORKFLOW_RUN_RATE, window: int = RUN_RATE_WINDOW_S) -> None:
        self.limit = limit
        self.window = window
        self._seen: dict[str, deque[float]] = {}

    def allow(self, workflow_id: str, now: float) -> bool:
        """Count one run at `now` if the workflow is under its rate; False (not counted) otherwise."""
        times = self._seen.setdefault(workflow_id, deque())
        while times and times[0] <= now - self.window:
            times.popleft()
        if len(times) >= self.limit:
            return False
        times.append(now)
        return True

    def forget(self, now: float) -> None:
        for wid in [w for w, t in self._seen.items() if not t or t[-1] <= now - self.window]:
            del self._seen[wid]


def admit(pending: int, queue_max: int = RUN_QUEUE_MAX, rate_ok: bool = True) -> Verdict:
    """May a door create a run? Rate first (nothing is counted when refused), then the queue."""
    if not rate_ok:
        return Verdict.RATE_LIMITED
    return Verdict.ADMIT if pending < queue_max else Verdict.QUEUE_FULL


@dataclass(frozen=True)
class Candidate:
    """A pending run in queue order `(created_at, id)`."""

    run_id: str
    workflow_id: str
    max_concurrent: int | None  # the definition's own cap (decision 184)


def pick(
    queue: Iterable[Candidate],
    running_here: int,
    running_by_workflow: Mapping[str, int],
    permits: int = MAX_CONCURRENT_RUNS,
) -> list[str]:
    """The pending runs this replica starts now: first in, first out, up to its free permits,
    skipping (not blocking on) a run whose workflow is at its own `max_concurrent`."""
    free = permits - running_here
    busy = dict(running_by_workflow)
    chosen: list[str] = []
    for c in queue:
        if free <= 0:
            break
        if c.max_concurrent is not None and busy.get(c.workflow_id, 0) >= c.max_concurrent:
            continue
        chosen.append(c.run_id)
        busy[c.workflow_id] = busy.get(c.workflow_id, 0) + 1
        free -= 1
    return chosen
