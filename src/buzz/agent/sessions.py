"""ACP sessions of the harness (agents.md §4.8, §4.9), pure bookkeeping.

One session per (subprocess, channel); threads and DMs share their channel's session. The
table below says which turn endings drop the channel's session (§4.9 item 3); the second
table says what an event arriving during a turn does under `--multiple-event-handling`
(§4.8). Subprocess exit drops every session of that subprocess (`drop_worker`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class TurnEnd(enum.Enum):
    """How a turn ended."""

    COMPLETED = "completed"  # the agent answered the prompt
    OWNER_CANCEL = "owner_cancel"  # `!cancel`
    OWNER_ROTATE = "owner_rotate"  # `!rotate`
    STEERED = "steered"  # cancelled to re-prompt with new events (§4.8 steer)
    SUPERSEDED = "superseded"  # cancelled by newer events (§4.8 interrupt)
    FAILED = "failed"  # error, crash, idle timeout or max duration (§4.7 item 4)
    SHUTDOWN = "shutdown"  # `!shutdown` or harness exit
    JOB_CANCELLED = "job_cancelled"  # a 43005 for the running job (jobs spec §6.7)
    JOB_TIMEOUT = "job_timeout"  # the job's deadline passed (jobs spec §6.5 item 3)


# §4.9 item 3: endings after which the channel's session is dropped.
DROPS_SESSION: dict[TurnEnd, bool] = {
    TurnEnd.COMPLETED: False,  # unless --max-turns-per-session is reached
    TurnEnd.OWNER_CANCEL: True,
    TurnEnd.OWNER_ROTATE: True,
    TurnEnd.STEERED: False,  # the same session is prompted again
    TurnEnd.SUPERSEDED: False,
    TurnEnd.FAILED: True,
    TurnEnd.SHUTDOWN: True,
    TurnEnd.JOB_CANCELLED: True,
    TurnEnd.JOB_TIMEOUT: True,
}

# §4.7 item 4: only these endings are failures (retried with backoff); cancellations by owner
# commands, steering or interruption are not.
IS_FAILURE: dict[TurnEnd, bool] = {end: end is TurnEnd.FAILED for end in TurnEnd}


class Arrival(enum.Enum):
    """What a new event for a channel with a turn in flight does (§4.8)."""

    STEER = "steer"  # cancel, then re-prompt the same session with old batch + new events
    QUEUE = "queue"  # wait for the next batch
    INTERRUPT = "interrupt"  # cancel; the old batch is superseded, the new events run next


# --multiple-event-handling → (action for the owner's events, action for everyone else's).
ARRIVAL_POLICY: dict[str, tuple[Arrival, Arrival]] = {
    "steer": (Arrival.STEER, Arrival.STEER),
    "queue": (Arrival.QUEUE, Arrival.QUEUE),
    "interrupt": (Arrival.INTERRUPT, Arrival.INTERRUPT),
    "owner-interrupt": (Arrival.INTERRUPT, Arrival.QUEUE),
}


def arrival_action(mode: str, author: str, owner: str | None) -> Arrival:
    """The §4.8 action for an event by `author` arriving while its channel has a turn in flight."""
    for_owner, for_others = ARRIVAL_POLICY[mode]
    return for_owner if owner is not None and author == owner else for_others


def steer_allowed(steers_so_far: int, limit: int) -> bool:
    """Issue 14 item 7: a newer event may steer an in-flight turn at most `limit` times in a
    row; after that the turn finishes and later events wait for the next batch."""
    return steers_so_far < limit


class Verdict(enum.Enum):
    """What one `session/prompt` result means for the batch (issue 14 items 8 and 11)."""

    ANSWERED = "answered"  # the agent answered this prompt
    INTERRUPTED = "interrupted"  # a cancel of ours ended it; whatever it answered, nobody failed
    STALE = "stale"  # the result belongs to an earlier prompt: send this one again
    FAILED = "failed"  # error, crash or timeout: the batch is retried with backoff


def prompt_verdict(
    *,
    failed: bool,
    alive: bool,
    stop_reason: str | None,
    cancel_sent: bool,
    updates: int,
    after_cancel: bool,
    cancel_held: bool = False,
) -> Verdict:
    """Match a prompt's result to that prompt only.

    A cancel of ours is one sent while this prompt was pending (`cancel_sent`) or one sent
    while the previous prompt of the session was pending that the agent answered without
    honouring it (`cancel_held`: the cancel crossed that answer, and an agent that keeps it
    aborts this prompt). A prompt ended by a cancel of ours is interrupted when the agent
    answered `cancelled` or with an error (the error answers our cancel, it is no failure), as
    long as the subprocess lives (a timeout kills it, so timeouts stay failures); any other stop
    reason of a prompt we cancelled means the agent finished before it saw the cancel, which is
    never a stale answer (issue 24 item 2). A `cancelled` with no cancel of ours behind it is a
    stale answer to an earlier prompt; so is an `end_turn` with no `session/update` at all right
    after a prompt the agent answered `cancelled` (`after_cancel`; an agent that answers a
    cancel with an error has answered it in full). A stale answer to a prompt we cancelled as
    well is taken as interrupted: its work is folded into the next prompt, never dropped."""
    ours = cancel_sent or cancel_held
    if ours and alive and (failed or stop_reason == "cancelled"):
        return Verdict.INTERRUPTED
    if failed:
        return Verdict.FAILED
    if stop_reason == "cancelled":
        return Verdict.STALE
    if after_cancel and updates == 0 and stop_reason == "end_turn":
        return Verdict.INTERRUPTED if cancel_sent else Verdict.STALE
    return Verdict.ANSWERED


def drops_session(end: TurnEnd, turns_done: int, max_turns: int) -> bool:
    """§4.9 item 3, including `--max-turns-per-session` (0 = unlimited) after a completed turn."""
    if DROPS_SESSION[end]:
        return True
    return end is TurnEnd.COMPLETED and max_turns > 0 and turns_done >= max_turns


@dataclass
class SessionState:
    """One ACP session. `preamble` holds system-prompt blocks still to be sent as the leading
    blocks of the first prompt (the `user` transport); `metrics` is the turn-metric baseline."""

    session_id: str
    worker: int
    channel: str | None  # None for the heartbeat session
    memory_section: str | None = None
    preamble: list[str] = field(default_factory=list)
    turns: int = 0
    after_cancel: bool = False  # the agent answered the previous prompt `cancelled` to our cancel
    cancel_held: bool = False  # a cancel of ours crossed the previous prompt's answer
    model: str | None = None
    metrics: dict[str, Any] = field(default_factory=dict)


class SessionTable:
    """Sessions by (worker index, channel)."""

    def __init__(self) -> None:
        self._by_key: dict[tuple[int, str], SessionState] = {}

    def get(self, worker: int, channel: str) -> SessionState | None:
        return self._by_key.get((worker, channel))

    def put(self, state: SessionState) -> None:
        if state.channel is None:
            raise ValueError("heartbeat sessions are kept by their worker")
        self._by_key[(state.worker, state.channel)] = state

    def drop(self, worker: int, channel: str) -> SessionState | None:
        return self._by_key.pop((worker, channel), None)

    def drop_channel(self, channel: str) -> list[SessionState]:
        """Drop the channel's sessions on every worker (removal, `!rotate` when idle)."""
        keys = [k for k in self._by_key if k[1] == channel]
        return [self._by_key.pop(k) for k in keys]

    def drop_worker(self, worker: int) -> list[SessionState]:
        """Drop every session of one subprocess (it exited or was killed)."""
        keys = [k for k in self._by_key if k[0] == worker]
        return [self._by_key.pop(k) for k in keys]

    def holders(self, channel: str) -> list[int]:
        """Workers holding a session for `channel`."""
        return [w for (w, c) in self._by_key if c == channel]

    def has_channel(self, channel: str) -> bool:
        return any(c == channel for (_, c) in self._by_key)
