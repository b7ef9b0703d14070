"""Turn dispatch and execution (agents.md §4.7–§4.9, §4.13, §5.1).

`Dispatcher.run` starts a turn whenever a subprocess is free and a channel has work (the
queue's oldest-waiting rule); the subprocess that already holds the channel's session is
preferred. A turn:

1. keeps typing indicators going;
2. gets (or creates) the channel's session on its subprocess;
3. adds 💬 to the batch and prompts the session with the §4.12 blocks (system-prompt blocks
   first with the `user` transport);
4. publishes the turn metric (44200) when usage was reported;
5. if steering was requested, prompts the same session again with the interrupted batch and
   the new events (§4.8) and goes back to 4;
6. ends: removes 💬 (and 👀 unless the batch is retried), applies the ending's rules
   (retry or dead-letter, session drop) and frees the subprocess.

Owner commands, steering and interruption request an ending (`TurnEnd`) and send
`session/cancel`; the subprocess answers the prompt and the turn ends with that ending.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from buzz.agent import attachments
from buzz.agent.acp_pool import AgentGone, AgentProcess, Block, PromptOutcome
from buzz.agent.event_view import reply_anchor
from buzz.agent.history import build_history
from buzz.agent.job_turns import run_job
from buzz.agent.metrics import TurnUsage, build_metric_event, build_payload, is_all_null, map_stop_reason
from buzz.agent.prompts import ChannelInfo, turn_blocks
from buzz.agent.queue import Batch, DeadLetter, Item, Retry
from buzz.agent.runtime import Runtime
from buzz.agent.session_factory import create_session
from buzz.agent.sessions import (
    IS_FAILURE,
    SessionState,
    TurnEnd,
    Verdict,
    drops_session,
    prompt_verdict,
    steer_allowed,
)
from buzz.agent.status import EYES, NOTICE_FAILURE, NOTICE_RETRYING, SPEECH

log = logging.getLogger(__name__)

SHUTDOWN_GRACE_S = 12.0
STALE_RESENDS = 1  # a prompt answered stale is sent again at most this often (issue 14 item 11)


@dataclass(eq=False)
class Turn:
    """One batch in flight on one subprocess. `requested` is the ending asked for by a
    command, steering or interruption; `drop_session` is set when the channel was removed."""

    channel: str
    worker: int
    batch: Batch
    requested: TurnEnd | None = None
    steers: int = 0  # steering requests honoured so far (issue 14 item 7)
    answered: bool = False  # the agent answered the batch's last prompt (its claims stay)
    drop_session: bool = False
    job: str | None = None  # the job id of a job turn (jobs spec §6.5): never steered
    session: SessionState | None = None
    proc: AgentProcess | None = None
    task: asyncio.Task[None] | None = field(default=None, repr=False)


class Dispatcher:
    """Runs turns; one per channel at a time, channels in parallel up to the pool size."""

    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime
        self.turns: dict[str, Turn] = {}
        self._wake = asyncio.Event()
        self._usage: dict[tuple[int, str], TurnUsage] = {}
        self.stopping = False
        self.last_activity = time.monotonic()
        self.heartbeat_running = False
        self._restart: set[int] = set()
        # for the owner's status snapshot (buzz.agent.reports)
        self.stats = {"turns": 0, "failures": 0, "dead_letters": 0}
        self.last_turn: dict[str, object] | None = None
        self.turn_ended = asyncio.Event()
        # (worker, session id) → who wants that session's `session/update`s (a job's progress)
        self.observers: dict[tuple[int, str], Callable[[dict[str, object]], None]] = {}
        self.abandoned: dict[int, int] = {}  # worker → finished job sessions it still holds

    # -- control surface -------------------------------------------------------------------
    def wake(self) -> None:
        self._wake.set()

    def in_flight(self, channel: str) -> Turn | None:
        return self.turns.get(channel)

    async def request_end(self, channel: str, end: TurnEnd) -> bool:
        """Ask the channel's in-flight turn to end with `end` (sends `session/cancel`).
        False when the channel is idle. A stronger request replaces a weaker one."""
        turn = self.turns.get(channel)
        if turn is None:
            return False
        if (
            turn.requested not in (TurnEnd.OWNER_CANCEL, TurnEnd.OWNER_ROTATE, TurnEnd.SHUTDOWN)
            or end is TurnEnd.SHUTDOWN
        ):
            turn.requested = end
        if turn.proc is not None and turn.session is not None:
            await turn.proc.cancel(turn.session.session_id)  # only a pending prompt (item 9)
        return True

    async def steer(self, channel: str) -> bool:
        """Steer the channel's in-flight turn with newly queued events unless it was already
        steered `--steer-limit` times (then they wait for the next batch). True when steered
        or a steer is already pending."""
        turn = self.turns.get(channel)
        if turn is None:
            return False
        if turn.requested is TurnEnd.STEERED:
            return True
        if turn.job is not None:  # events arriving during a job wait for the next batch (§6.4)
            return False
        if turn.requested is not None or not steer_allowed(turn.steers, self.rt.config.steer_limit):
            return False
        turn.steers += 1
        return await self.request_end(channel, TurnEnd.STEERED)

    async def retire(self, states: list[SessionState], idle_worker: int | None = None) -> None:
        """Close dropped sessions (issue 14 item 10): ACP `session/close` when the agent
        supports it, otherwise restart its subprocess once it is idle (a subprocess holding
        sessions we no longer use would keep them open for ever)."""
        for state in states:
            proc = self.rt.pool.process(state.worker)
            if proc is None or await proc.close_session(state.session_id):
                continue
            self._restart.add(state.worker)
        for worker in sorted(self._restart):
            if worker == idle_worker or not self.rt.pool.busy[worker]:
                self._restart.discard(worker)
                self.rt.sessions.drop_worker(worker)
                await self.rt.pool.restart(worker)

    def on_update(self, worker: int, session_id: str, update: dict[str, object]) -> None:
        """`session/update` from a subprocess: usage goes to the running turn's metrics, and
        every update to the session's observer (a job's progress)."""
        observer = self.observers.get((worker, session_id))
        if observer is not None:
            observer(update)
        for turn in self.turns.values():  # tool calls are the turn's activity (jobs spec §12.1)
            if turn.worker == worker and turn.session is not None and turn.session.session_id == session_id:
                self.rt.work.on_update(turn.channel, update)
        if update.get("sessionUpdate") == "usage_update":
            usage = self._usage.get((worker, session_id))
            if usage is not None:
                usage.add_usage_update(update)

    # -- loop ------------------------------------------------------------------------------
    async def run(self) -> None:
        while not self.stopping:
            self._start_ready()
            now = time.monotonic()
            wakeup = self.rt.queue.next_wakeup(now)
            timeout = None if wakeup is None else max(wakeup - now, 0.0) + 0.01
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)
            self._wake.clear()

    async def trim_pool(self) -> None:
        """Stop idle workers above the pool's limit (a 30177 lowered parallelism)."""
        for worker in self.rt.pool.surplus():
            self.rt.sessions.drop_worker(worker)
            await self.rt.pool.restart(worker)

    def _start_ready(self) -> None:
        if self.stopping:
            return
        if self.rt.pool.surplus():
            asyncio.get_running_loop().create_task(self.trim_pool(), name="pool-trim")
        while True:
            free = [w for w in self.rt.pool.free()]
            if not free:
                return
            batch = self.rt.queue.next_batch(time.monotonic())
            if batch is None:
                return
            holders = [w for w in self.rt.sessions.holders(batch.channel) if w in free]
            worker = holders[0] if holders else free[0]
            self.rt.pool.busy[worker] = True
            turn = Turn(batch.channel, worker, batch)
            self.turns[batch.channel] = turn
            self.last_activity = time.monotonic()
            if "job" in batch.items[0].meta:  # a job runs alone in its own session (jobs spec §6.5)
                turn.job = batch.items[0].event.id
            self.rt.work.turn_started(turn)
            run = run_job(self, turn) if turn.job is not None else self._run(turn)
            turn.task = asyncio.create_task(run, name=f"{'job' if turn.job else 'turn'}-{batch.channel}")

    async def shutdown(self) -> None:
        """Stop dispatching, cancel in-flight turns and wait for them (bounded)."""
        self.stopping = True
        self.wake()
        tasks = [t.task for t in self.turns.values() if t.task is not None]
        for channel in list(self.turns):
            await self.request_end(channel, TurnEnd.SHUTDOWN)
        if tasks:
            await asyncio.wait(tasks, timeout=SHUTDOWN_GRACE_S)

    # -- one turn --------------------------------------------------------------------------
    async def _run(self, turn: Turn) -> None:
        rt = self.rt
        channel = rt.channel(turn.channel)
        end = TurnEnd.FAILED
        failure: str | None = None
        try:
            async with rt.status.typing(turn.channel):
                end, failure = await self._prompt_loop(turn, channel)
        except asyncio.CancelledError:
            end = TurnEnd.SHUTDOWN
            raise
        except Exception as exc:  # a bug must not wedge the channel
            log.warning("turn in %s failed unexpectedly: %s", turn.channel, exc)
            log.debug("traceback of the failed turn", exc_info=True)
            end, failure = TurnEnd.FAILED, f"internal error: {type(exc).__name__}"
        finally:
            await asyncio.shield(self._finish(turn, end, failure))

    async def _prompt_loop(self, turn: Turn, channel: ChannelInfo) -> tuple[TurnEnd, str | None]:
        rt = self.rt
        try:
            proc = await rt.pool.ensure(turn.worker)
        except AgentGone as exc:
            return TurnEnd.FAILED, str(exc)
        turn.proc = proc
        interrupted: list[Item] = []
        items = list(turn.batch.items)
        resend: list[Block] | None = None
        stale_left = STALE_RESENDS
        while True:
            if turn.requested is not None and turn.requested is not TurnEnd.STEERED:
                return turn.requested, None  # ended before the prompt started
            session = rt.sessions.get(turn.worker, turn.channel)
            if session is None:
                try:
                    session = await create_session(rt, proc, channel)
                except Exception as exc:
                    return TurnEnd.FAILED, f"session/new failed: {exc}"
                rt.sessions.put(session)
            turn.session = session
            if turn.requested is TurnEnd.STEERED and resend is None:
                turn.requested = None  # events arrived before any prompt: join them
                arrived = rt.queue.take_pending(turn.channel)
                turn.batch.items.extend(arrived)
                items = [*items, *arrived]
            if resend is not None:
                blocks, resend = resend, None
            else:
                blocks = await self._blocks(turn, session, channel, items, interrupted)
            if turn.requested is not None and turn.requested is not TurnEnd.STEERED:
                return turn.requested, None  # ended while the prompt was being built
            await rt.status.react(items, SPEECH)  # 💬 when the prompt starts (§4.13)
            outcome = await self.prompt_metered(proc, session, turn.channel, blocks)
            verdict = prompt_verdict(
                failed=outcome.failed,
                alive=proc.alive,
                stop_reason=outcome.stop_reason,
                cancel_sent=outcome.cancel_requested,
                updates=outcome.updates,
                after_cancel=session.after_cancel,
                cancel_held=session.cancel_held,
            )
            log.debug(
                "prompt in %s: %s (stop %s, cancel sent %s, cancel held %s, %d updates)",
                turn.channel,
                verdict.value,
                outcome.stop_reason,
                outcome.cancel_requested,
                session.cancel_held,
                outcome.updates,
            )
            session.after_cancel = verdict is Verdict.INTERRUPTED and outcome.stop_reason == "cancelled"
            session.cancel_held = outcome.cancel_requested and verdict is Verdict.ANSWERED
            requested = turn.requested
            if verdict is Verdict.FAILED:
                if not proc.alive:
                    rt.sessions.drop_worker(turn.worker)
                    rt.pool.mark_dead(turn.worker)
                if requested in (TurnEnd.OWNER_CANCEL, TurnEnd.OWNER_ROTATE, TurnEnd.SHUTDOWN):
                    return requested, outcome.failure
                return TurnEnd.FAILED, outcome.failure
            if verdict is Verdict.STALE:
                if stale_left == 0:
                    return TurnEnd.FAILED, f"stale answers ({outcome.stop_reason}) to a repeated prompt"
                stale_left -= 1
                log.info(
                    "a stale %s answer in %s; sending the prompt again", outcome.stop_reason, turn.channel
                )
                resend = blocks
                continue
            turn.answered = verdict is Verdict.ANSWERED
            if verdict is Verdict.INTERRUPTED and outcome.failed:
                log.info("the agent answered a cancel in %s with an error: %s", turn.channel, outcome.failure)
            if verdict is Verdict.INTERRUPTED and requested in (None, TurnEnd.STEERED):
                # a cancel of ours ended the prompt: for steering (or one held from an earlier
                # prompt) the same session is prompted again with the interrupted work and the
                # events that arrived meanwhile (§4.8); an interrupted batch is never retried
                # alone and never counts as a failed attempt (issue 14 item 8, issue 24 item 2)
                turn.requested = None
                if requested is None:
                    log.info("a cancel held from an earlier prompt ended the prompt in %s", turn.channel)
                arrived = rt.queue.take_pending(turn.channel) if requested is TurnEnd.STEERED else []
                turn.batch.items.extend(arrived)
                if arrived:
                    interrupted = [*interrupted, *items]
                    items = arrived
                continue
            if requested is TurnEnd.STEERED:
                # the agent finished before it saw the cancel: this turn is complete and the
                # new events are the channel's next batch (item 11: a result is its prompt's)
                turn.requested = None
                requested = None
            if requested is not None:
                return requested, None
            session.turns += 1
            return TurnEnd.COMPLETED, None

    async def _blocks(
        self,
        turn: Turn,
        session: SessionState,
        channel: ChannelInfo,
        items: list[Item],
        interrupted: list[Item],
    ) -> list[Block]:
        rt = self.rt
        events = [i.event for i in items]
        old = [i.event for i in interrupted]
        authors = [e.pubkey for e in (*old, *events)]
        people = {pk: p.person for pk, p in (await rt.profiles.get_many(authors)).items()}
        history = await build_history(
            rt.link,
            rt.profiles,
            channel,
            events[-1],
            [e.id for e in (*old, *events)],
            rt.config.context_message_limit,
        )
        prompt_tag = str(items[0].meta.get("prompt_tag", "@mention"))
        names = [rt.agent_name] if rt.agent_name else []
        voice = rt.voice_text(channel.id)
        files: list[attachments.Attachment] = []
        if rt.files is not None:  # media.md §14.1: attached files, downloaded for the agent
            files = await attachments.fetch(rt.files, Path(rt.cwd), [*old, *events])
        lines = {eid: attachments.attachment_lines(a) for eid, a in attachments.by_event(files).items()}
        text = turn_blocks(
            events, channel, people, prompt_tag, rt.identity.pubkey, history, old, names, voice, lines
        )
        caps = turn.proc.prompt_capabilities if turn.proc is not None else {}
        blocks: list[Block] = [*text, *attachments.content_blocks(files, caps)]
        if session.preamble:
            blocks = [*session.preamble, *blocks]
            session.preamble = []
        return blocks

    async def prompt_metered(
        self, proc: AgentProcess, session: SessionState, channel: str, blocks: list[Block]
    ) -> PromptOutcome:
        """One `session/prompt`, its usage published to the owner as a turn metric (44200);
        channel turns and job turns alike."""
        rt = self.rt
        key = (proc.index, session.session_id)
        usage = TurnUsage()
        self._usage[key] = usage
        try:
            outcome = await proc.prompt(
                session.session_id, blocks, rt.config.idle_timeout, rt.config.max_turn_duration
            )
        finally:
            self._usage.pop(key, None)
        usage.add_prompt_usage(outcome.usage)
        await self._publish_metric(session, channel, usage, outcome)
        return outcome

    async def _publish_metric(
        self, session: SessionState, channel: str, usage: TurnUsage, outcome: PromptOutcome
    ) -> None:
        """§5.1 item 4: owner known, usage reported, metrics on, never all-null."""
        rt = self.rt
        owner = rt.identity.owner
        if owner is None or rt.config.no_turn_metrics or not usage.reported:
            return
        now = time.time()
        payload = build_payload(
            usage,
            session.metrics,
            timestamp=now,
            model=session.model,
            channel_id=channel,
            session_id=session.session_id,
            turn_id=str(uuid.uuid4()),
            stop_reason=map_stop_reason(outcome.stop_reason, outcome.failed),
        )
        if is_all_null(payload):
            return
        try:
            event = build_metric_event(rt.identity.secret, owner, payload, int(now))
        except ValueError as exc:
            log.warning("turn metric not published: %s", exc)
            return
        await rt.status.send(event, "turn metric")

    async def _finish(self, turn: Turn, end: TurnEnd, failure: str | None) -> None:
        rt = self.rt
        items = turn.batch.items
        anchor = reply_anchor(items[-1].event) if items else None
        self.stats["turns"] += 1
        self.stats["failures"] += IS_FAILURE[end]
        self.last_turn = {"channel": turn.channel, "ended": end.value, "at": int(time.time())}
        try:
            await rt.status.unreact(items, (SPEECH,))
            if IS_FAILURE[end] and not turn.drop_session:
                result = rt.queue.fail(turn.channel, time.monotonic())
                attempt = result.attempts if isinstance(result, Retry) else result.batch.attempts
                # one line per attempt (issue 14 item 2); tracebacks only at DEBUG
                if isinstance(result, Retry):
                    log.warning(
                        "turn in %s failed (attempt %d of %d): %s; retrying in %.1f s",
                        turn.channel,
                        attempt,
                        rt.queue.max_attempts,
                        failure,
                        result.delay_s,
                    )
                    if attempt == 1 and anchor is not None:
                        await rt.status.notice(turn.channel, anchor, NOTICE_RETRYING)
                elif isinstance(result, DeadLetter):
                    self.stats["dead_letters"] += 1
                    log.error(
                        "turn in %s failed (attempt %d of %d): %s; dead-lettered %d event(s)",
                        turn.channel,
                        attempt,
                        rt.queue.max_attempts,
                        failure,
                        len(items),
                    )
                    await rt.status.unreact(items, (EYES,))
                    if anchor is not None:
                        await rt.status.notice(turn.channel, anchor, NOTICE_FAILURE)
                    await self._settle(items)
            else:
                log.info("turn in %s ended %s%s", turn.channel, end.value, f": {failure}" if failure else "")
                rt.queue.finish(turn.channel)
                await rt.status.unreact(items, (EYES,))
                if end is not TurnEnd.SHUTDOWN or turn.answered:  # a stop releases the rest
                    await self._settle(items)
            session = turn.session
            turns_done = session.turns if session is not None else 0
            # an owner's !rotate / !cancel that came after the agent answered (the turn was still
            # ending) drops the session too: its outcome already said so
            late = turn.requested is not None and drops_session(turn.requested, 0, 0)
            if turn.drop_session or late or drops_session(end, turns_done, rt.config.max_turns_per_session):
                dropped = rt.sessions.drop(turn.worker, turn.channel)
                await self.retire([dropped] if dropped is not None else [], idle_worker=turn.worker)
        finally:
            rt.work.turn_ended(turn, end)
            rt.pool.busy[turn.worker] = False
            self.turns.pop(turn.channel, None)
            self.last_activity = time.monotonic()
            self.turn_ended.set()
            self.wake()

    async def _settle(self, items: list[Item]) -> None:
        """These events are answered (or given up): their relay claims are marked done."""
        for item in items:
            await self.rt.claims.done(item.event.id)

    # -- heartbeat (§4.14 item 4) ----------------------------------------------------------
    async def heartbeat_once(self, text: str) -> bool:
        """Prompt one idle subprocess in its heartbeat session. Skipped (False) when a
        heartbeat is in flight, events are waiting, or every subprocess is busy."""
        rt = self.rt
        if self.heartbeat_running or self.stopping or rt.queue.ready(time.monotonic()):
            return False
        free = rt.pool.free()
        if not free:
            return False
        worker = free[0]
        rt.pool.busy[worker] = True
        self.heartbeat_running = True
        try:
            proc = await rt.pool.ensure(worker)
            state = proc.heartbeat_session
            if state is None:
                state = await create_session(rt, proc, None)
                proc.heartbeat_session = state
            blocks = [*state.preamble, text]
            state.preamble = []
            await proc.prompt(state.session_id, blocks, rt.config.idle_timeout, rt.config.max_turn_duration)
            return True
        except Exception as exc:
            log.warning("heartbeat failed: %s", exc)
            return False
        finally:
            rt.pool.busy[worker] = False
            self.heartbeat_running = False
            self.wake()
