"""The agent's work status, kind 30181 (jobs spec §12.3): for each channel it serves, what it
is doing there, as one addressable snapshot the channel's readers (the directory) can see.

| when | snapshot | pace |
|---|---|---|
| a turn starts | `working`, the request as the first `message` activity, `turnId`, `queued` | at once |
| a turn ends | `complete` (or `error` for a failed attempt), `completedAt`, `stopReason` | at once |
| the queue or the turn's tool calls change | the current state (`working` / `idle`) with `queued` | ≤ 1 per channel per 5 s |
| nothing in flight | `idle` | ≤ 1 per channel per 5 s |
| every 300 s | the current state | |
| graceful exit | `idle`, `queued: 0`, every channel | at once |

One task per channel sends that channel's snapshots in order: boundary snapshots are built
when they happen and queued (a turn that starts and ends before the first is sent still shows
both); paced ones are built when sent. Each `created_at` is `max(now, previous + 1)`, seeded
from the agent's snapshots already on the relay, so the later snapshot always wins its
address. Publish failures are logged (`StatusPublisher.send`) and never reach a turn. Private
conversations (NIP-17) get none, since a snapshot would tell the workspace that they exist; nor
do DMs and channels of unknown type, where a stranger must hear nothing from the agent
(agents.md §4.6 item 2) and which no directory lists.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from buzz.agent.gates import DM_LIKE_TYPES, strip_self_mentions
from buzz.agent.prompts import is_private
from buzz.agent.sessions import TurnEnd
from buzz.core.event import Event
from buzz.jobs import limits as L
from buzz.jobs import work_status as aw
from buzz.jobs.build import Template

if TYPE_CHECKING:
    from buzz.agent.runtime import Runtime
    from buzz.agent.turns import Turn

log = logging.getLogger(__name__)

STOP_REASONS = {TurnEnd.COMPLETED: "end_turn", TurnEnd.FAILED: "error"}  # else "cancelled"


@dataclass
class _Channel:
    """What one channel's snapshots are made of, and its sender's state."""

    activity: list[aw.Activity] = field(default_factory=list)
    tools: dict[str, int] = field(default_factory=dict)  # toolCallId → index in `activity`
    turn: dict[str, Any] = field(default_factory=dict)  # turnId, turnStartedAt, jobId
    working: bool = False
    outbox: deque[Template] = field(default_factory=deque)
    dirty: bool = False
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    sent_at: float = float("-inf")  # monotonic time of the last snapshot sent
    created_at: int = 0  # `created_at` of the last snapshot sent (or found on the relay)
    task: asyncio.Task[None] | None = None


class WorkStatus:
    """Publishes the 30181 snapshots of §12.3; a no-op with `--no-work-status`."""

    def __init__(self, rt: Runtime, *, enabled: bool, interval: float = L.WORK_STATUS_MIN_INTERVAL_S) -> None:
        self.rt = rt
        self.enabled = enabled
        self.interval = interval
        self._channels: dict[str, _Channel] = {}
        self._refresh: asyncio.Task[None] | None = None
        self.clock: Callable[[], float] = time.time

    # -- channels -----------------------------------------------------------------------------
    async def seed(self) -> None:
        """Learn the `created_at` of the agent's snapshots on the relay (a restart within the
        second of the last one must still supersede it)."""
        if not self.enabled:
            return
        try:
            events = await self.rt.link.query(
                [{"kinds": [L.KIND_AGENT_WORK_STATUS], "authors": [self.rt.identity.pubkey]}]
            )
        except Exception as exc:
            log.info("work status: previous snapshots not read: %s", exc)
            return
        for event in events:
            state = self._channels.setdefault(event.d_tag, _Channel())
            state.created_at = max(state.created_at, event.created_at)

    def open(self, channel: str) -> None:
        """Serve `channel`: its sender starts and says `idle` (or what it is doing)."""
        if not self.enabled or is_private(channel) or self.rt.channel(channel).type in DM_LIKE_TYPES:
            return
        state = self._channels.setdefault(channel, _Channel())
        if state.task is None:
            state.task = asyncio.create_task(self._sender(channel, state), name=f"work-status-{channel[:8]}")
        self._mark(channel)
        if self._refresh is None:
            self._refresh = asyncio.create_task(self._refresh_loop(), name="work-status-refresh")

    def close_channel(self, channel: str) -> None:
        """Removed from `channel`: no more snapshots (the relay would refuse them)."""
        state = self._channels.pop(channel, None)
        if state is not None and state.task is not None:
            state.task.cancel()

    # -- what happens -------------------------------------------------------------------------
    def queue_changed(self, channel: str) -> None:
        self._mark(channel)

    def turn_started(self, turn: Turn) -> None:
        state = self._state(turn.channel)
        if state is None:
            return
        now = self.clock()
        state.working = True
        state.tools = {}
        state.activity = [aw.Activity(now, "message", self._title(turn))]
        state.turn = {"turnId": str(uuid.uuid4()), "turnStartedAt": aw.rfc3339(now), "jobId": turn.job}
        self._boundary(turn.channel, state, "working", now)

    def turn_ended(self, turn: Turn, end: TurnEnd) -> None:
        state = self._state(turn.channel)
        if state is None or not state.working:
            return
        now = self.clock()
        state.working = False
        state.activity = [aw.Activity(a.at, a.kind, a.title, "complete") for a in state.activity]
        status = "error" if end is TurnEnd.FAILED else "complete"
        extra = {"completedAt": aw.rfc3339(now), "stopReason": STOP_REASONS.get(end, "cancelled")}
        self._boundary(turn.channel, state, status, now, **extra)
        state.turn = {}
        self._mark(turn.channel)  # then `idle`, paced

    def on_update(self, channel: str, update: dict[str, object]) -> None:
        """A `session/update` of the channel's turn: tool calls become `tool` activity."""
        state = self._state(channel)
        if state is None or not state.working:
            return
        kind, call = update.get("sessionUpdate"), update.get("toolCallId")
        if kind not in ("tool_call", "tool_call_update") or not isinstance(call, str):
            return
        title, done = update.get("title"), update.get("status") in ("completed", "failed")
        index = state.tools.get(call)
        if index is None:
            if not isinstance(title, str) or not title.strip():
                return
            state.tools[call] = len(state.activity)
            state.activity.append(aw.Activity(self.clock(), "tool", title, "complete" if done else "running"))
        else:
            old = state.activity[index]
            new_title = title if isinstance(title, str) and title.strip() else old.title
            state.activity[index] = aw.Activity(old.at, "tool", new_title, "complete" if done else old.status)
        self._mark(channel)

    async def close(self, *, publish: bool = True) -> None:
        """Graceful exit: every sender stops, then (`publish`: the relay is reachable) `idle`
        with `queued: 0` for every channel."""
        if self._refresh is not None:
            self._refresh.cancel()
        for channel, state in list(self._channels.items()):
            if state.task is None:
                continue
            state.task.cancel()
            with contextlib.suppress(BaseException):
                await state.task
            state.task = None
            if publish:
                idle = self._snapshot(channel, state, "idle", self.clock(), queued=0)
                await self._send(channel, state, idle)

    # -- sending ------------------------------------------------------------------------------
    def _state(self, channel: str) -> _Channel | None:
        state = self._channels.get(channel)
        return state if state is not None and state.task is not None else None

    def _mark(self, channel: str) -> None:
        state = self._state(channel)
        if state is not None:
            state.dirty = True
            state.wake.set()

    def _boundary(self, channel: str, state: _Channel, status: str, now: float, **extra: Any) -> None:
        state.outbox.append(self._snapshot(channel, state, status, now, **extra))
        state.dirty = False  # the boundary snapshot says everything a pending refresh would
        state.wake.set()

    def _snapshot(self, channel: str, state: _Channel, status: str, now: float, **extra: Any) -> Template:
        rt = self.rt
        queued = extra.pop("queued", rt.queue.pending_count(channel))
        policy = rt.policy
        return aw.snapshot(
            channel,
            status,
            now=now,
            activity=tuple(state.activity if status != "idle" else ()),
            queued=queued,
            respondTo=policy.respond_to if policy is not None else None,
            model=rt.config.model,
            **state.turn,
            **extra,
        )

    def _current(self, channel: str, state: _Channel) -> Template:
        return self._snapshot(channel, state, "working" if state.working else "idle", self.clock())

    async def _sender(self, channel: str, state: _Channel) -> None:
        # `outbox` and `dirty` are the truth; `wake` only ends a wait early.
        while True:
            if state.outbox:
                await self._send(channel, state, state.outbox.popleft())
                continue
            if not state.dirty:
                state.wake.clear()
                await state.wake.wait()
                continue
            wait = state.sent_at + self.interval - time.monotonic()
            if wait > 0:  # paced; a boundary snapshot arriving meanwhile goes out at once
                state.wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(state.wake.wait(), wait)
                continue
            state.dirty = False
            await self._send(channel, state, self._current(channel, state))

    async def _send(self, channel: str, state: _Channel, template: Template) -> None:
        at = max(int(self.clock()), state.created_at + 1)
        state.created_at = at
        state.sent_at = time.monotonic()
        event = Event.create(
            self.rt.identity.secret, template.kind, template.content, template.tags, created_at=at
        )
        await self.rt.status.send(event, "work status")

    async def _refresh_loop(self) -> None:
        while True:
            await asyncio.sleep(L.WORK_STATUS_REFRESH_S)
            for channel in list(self._channels):
                self._mark(channel)

    def _title(self, turn: Turn) -> str:
        """What the turn works on: a job's requested outcome, else the newest request's first
        line without the leading mention of the agent."""
        first = turn.batch.items[0] if turn.batch.items else None
        ticket = first.meta.get("job") if first is not None else None
        if ticket is not None:
            return str(getattr(ticket, "requested_outcome", "") or "a job")
        if not turn.batch.items:
            return "a request"
        event = turn.batch.items[-1].event
        names = [self.rt.agent_name] if self.rt.agent_name else []
        text = strip_self_mentions(event.content, self.rt.identity.pubkey, names)
        line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
        return line or "a request"
