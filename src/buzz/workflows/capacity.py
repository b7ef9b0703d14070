"""Capacity: which new runs are admitted, and the run rate (§7.1, §7.4); which pending runs start
is the engine's count of free drives (`Engine.free`, decisions 376 and 379).

Policies as data: `REFUSALS` says what each door does with a run it cannot create, so the
channel-event, schedule, webhook and manual paths never decide it themselves.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from enum import StrEnum

from buzz.workflows.limits import RUN_QUEUE_MAX, RUN_RATE_WINDOW_S, WORKFLOW_RUN_RATE


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
