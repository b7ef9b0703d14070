"""The job turn (jobs spec §6.5–§6.7): one job, alone, in a fresh ACP session.

The dispatcher starts it for a queued job item (a solo batch marked `meta["job"]`) instead of
a channel turn. The session is created as any (system prompt, core memory) and closed when
the job ends; the prompt is `[Context]` plus `[Buzz job]`. The turn ends:

- the agent published its own 43004/43006 for the job → nothing more;
- else final assistant text → a 43004 `no_artifact` with that text as `outcome`;
- else a 43006 `agent_error` ("the agent produced no result");
- failed (error, crash, timeout) → retried at most JOB_MAX_ATTEMPTS times in all (fewer when
  `--max-attempts` says so), each retry announced by a 43003, then a 43006 `agent_error`; the
  job waits out its backoff aside, not holding its channel (docs/decisions.md 372);
- cancelled by a 43005 → nothing further; a deadline passed → 43006 `timeout`.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from buzz.agent.acp_pool import AgentGone
from buzz.agent.job_progress import Progress
from buzz.agent.queue import DeadLetter, Retry
from buzz.agent.session_factory import create_session
from buzz.agent.sessions import TurnEnd
from buzz.agent.status import EYES, SPEECH
from buzz.core.event import Event
from buzz.core.nip19 import npub
from buzz.jobs import build
from buzz.jobs import limits as L

if TYPE_CHECKING:
    from buzz.agent.runtime import Runtime
    from buzz.agent.turns import Dispatcher, Turn

log = logging.getLogger(__name__)
JOB_MAX_ATTEMPTS = 3  # a job's attempts in all: ~15 s of backoff at the default 5 s, not ~20 min

JOB_SESSIONS_PER_PROCESS = 16  # finished job sessions a subprocess may hold before a restart


@dataclass
class JobTicket:
    """What the harness knows of a job it took."""

    id: str
    channel: str
    requester: str
    requested_outcome: str
    prompt: str
    deadline: int | None
    progress_seq: int = 0  # the job's last 43003 seq on the relay when taken
    progress: Progress | None = None  # kept across attempts: one seq and one pace per job


def job_blocks(ticket: JobTicket, channel_name: str, requester_name: str | None) -> list[str]:
    deadline = (
        datetime.datetime.fromtimestamp(ticket.deadline, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        if ticket.deadline
        else "none"
    )
    who = f"{requester_name or 'unknown'} ({npub(ticket.requester)}, {ticket.requester})"
    context = "\n".join(
        [
            "[Context]",
            "Scope: job",
            f"Channel: {channel_name} (#{ticket.channel})",
            "This is a job: work on it alone; the channel's messages wait until it is done.",
        ]
    )
    job = "\n".join(
        [
            "[Buzz job]",
            f"Job: {ticket.id}",
            f"Channel: {channel_name} ({ticket.channel})",
            f"Requested by: {who}",
            f"Requested outcome: {ticket.requested_outcome}",
            f"Deadline: {deadline}",
            "Instructions:",
            ticket.prompt or ticket.requested_outcome,
            "",
            "Finish in one of two ways: publish a NIP-AJ result with "
            f"`buzz jobs handoff --channel {ticket.channel} --job {ticket.id} --manifest -` "
            "(or the MCP tool submit_job_result), listing what you produced as artifacts and how "
            "you checked it; or end the turn with your final answer as plain text.",
        ]
    )
    return [context, job]


async def run_job(dispatcher: Dispatcher, turn: Turn) -> None:
    rt = dispatcher.rt
    ticket: JobTicket = turn.batch.items[0].meta["job"]
    progress = ticket.progress
    if progress is None:
        progress = ticket.progress = Progress(
            rt.link.publish,
            rt.identity.secret,
            ticket.channel,
            ticket.id,
            interval=rt.config.job_progress_interval,
            last_seq=ticket.progress_seq,
        )
    progress.final = []
    turn.job = ticket.id
    end, failure = TurnEnd.FAILED, None
    try:
        async with rt.status.typing(turn.channel):
            end, failure = await _prompt(dispatcher, turn, ticket, progress)
    except asyncio.CancelledError:
        end = TurnEnd.SHUTDOWN
        raise
    except Exception as exc:
        log.warning("job %s failed unexpectedly: %s", ticket.id[:12], exc)
        log.debug("traceback of the failed job", exc_info=True)
        end, failure = TurnEnd.FAILED, f"internal error: {type(exc).__name__}"
    finally:
        await asyncio.shield(_finish(dispatcher, turn, ticket, progress, end, failure))


async def _prompt(
    dispatcher: Dispatcher, turn: Turn, ticket: JobTicket, progress: Progress
) -> tuple[TurnEnd, str | None]:
    rt = dispatcher.rt
    try:
        proc = await rt.pool.ensure(turn.worker)
    except AgentGone as exc:
        return TurnEnd.FAILED, str(exc)
    turn.proc = proc
    channel = rt.channel(turn.channel)
    try:
        session = await create_session(rt, proc, channel)
    except Exception as exc:
        return TurnEnd.FAILED, f"session/new failed: {exc}"
    turn.session = session
    if turn.requested is not None:
        return turn.requested, None
    requester = await rt.profiles.get(ticket.requester)
    blocks = [*session.preamble, *job_blocks(ticket, channel.name, requester.display_name)]
    session.preamble = []
    dispatcher.observers[(proc.index, session.session_id)] = progress.on_update
    progress.start()
    timer = None
    if ticket.deadline is not None:
        timer = asyncio.create_task(_deadline(dispatcher, turn, ticket.deadline - time.time()))
    try:
        await rt.status.react(turn.batch.items, SPEECH)
        outcome = await dispatcher.prompt_metered(proc, session, turn.channel, blocks)
    finally:
        dispatcher.observers.pop((proc.index, session.session_id), None)
        if timer is not None:
            timer.cancel()
    if turn.requested is not None:
        return turn.requested, None
    if outcome.failed or not proc.alive:
        if not proc.alive:
            rt.sessions.drop_worker(turn.worker)
            rt.pool.mark_dead(turn.worker)
        return TurnEnd.FAILED, outcome.failure or "the agent process ended"
    if outcome.stop_reason == "cancelled":
        return TurnEnd.FAILED, "the agent cancelled the prompt"
    return TurnEnd.COMPLETED, None


async def _deadline(dispatcher: Dispatcher, turn: Turn, delay: float) -> None:
    await asyncio.sleep(max(delay, 0.0))
    if turn.requested is None:
        await dispatcher.request_end(turn.channel, TurnEnd.JOB_TIMEOUT)


async def _drop_session(dispatcher: Dispatcher, turn: Turn) -> None:
    """The job's session is never used again: closed when the agent supports `session/close`,
    else left behind, and the subprocess restarted once it holds JOB_SESSIONS_PER_PROCESS of
    them (restarting after every job would cost a process start per job; decision 203)."""
    assert turn.session is not None
    proc = dispatcher.rt.pool.process(turn.worker)
    if proc is None or await proc.close_session(turn.session.session_id):
        return
    left = dispatcher.abandoned.get(turn.worker, 0) + 1
    dispatcher.abandoned[turn.worker] = left
    if left >= JOB_SESSIONS_PER_PROCESS:
        dispatcher.abandoned[turn.worker] = 0
        await dispatcher.retire([turn.session], idle_worker=turn.worker)


async def _ended_on_relay(dispatcher: Dispatcher, ticket: JobTicket) -> bool:
    """The agent published its own 43004/43006 for the job (e.g. `buzz jobs handoff`)."""
    rt = dispatcher.rt
    flt = {
        "kinds": [L.KIND_JOB_RESULT, L.KIND_JOB_FAILED],
        "authors": [rt.identity.pubkey],
        "#e": [ticket.id],
        "#h": [ticket.channel],
        "limit": 5,
    }
    return bool(await rt.link.query([flt]))


async def publish_lifecycle(rt: Runtime, template: build.Template, what: str) -> bool:
    """Sign and publish a job event as the agent; a refusal is logged, never raised."""
    event = Event.create(rt.identity.secret, template.kind, template.content, template.tags)
    return await rt.status.send(event, what)


async def _fail(dispatcher: Dispatcher, ticket: JobTicket, code: str, message: str) -> None:
    template = build.failed(ticket.channel, ticket.id, ticket.requester, code=code, message=message)
    await publish_lifecycle(dispatcher.rt, template, f"job {ticket.id[:12]} failure")


async def _finish(
    dispatcher: Dispatcher,
    turn: Turn,
    ticket: JobTicket,
    progress: Progress,
    end: TurnEnd,
    failure: str | None,
) -> None:
    rt = dispatcher.rt
    items = turn.batch.items
    dispatcher.stats["turns"] += 1
    dispatcher.last_turn = {"channel": turn.channel, "ended": end.value, "at": int(time.time())}
    settle = True
    try:
        await progress.stop()
        await rt.status.unreact(items, (SPEECH,))
        if end is TurnEnd.FAILED:
            dispatcher.stats["failures"] += 1
            result = rt.queue.fail(turn.channel, time.monotonic(), hold=False, max_attempts=JOB_MAX_ATTEMPTS)
            if isinstance(result, Retry):
                settle = False
                log.warning(
                    "job %s failed (attempt %d): %s; retrying in %.1f s",
                    ticket.id[:12],
                    result.attempts,
                    failure,
                    result.delay_s,
                )
                await progress.say(f"retrying, attempt {result.attempts + 1}")
            elif isinstance(result, DeadLetter):
                dispatcher.stats["dead_letters"] += 1
                log.error("job %s failed on every attempt: %s", ticket.id[:12], failure)
                await _fail(dispatcher, ticket, "agent_error", "the agent failed on every attempt")
        else:
            rt.queue.finish(turn.channel)
            if end is TurnEnd.COMPLETED:
                await progress.flush()
                if not await _ended_on_relay(dispatcher, ticket):
                    text = progress.final_text
                    if text:
                        manifest = build.text_result(
                            ticket.id, ticket.requested_outcome, text, progress.message
                        )
                        template = build.result(ticket.channel, ticket.id, ticket.requester, manifest)
                        await publish_lifecycle(rt, template, f"job {ticket.id[:12]} result")
                    else:
                        await _fail(dispatcher, ticket, "agent_error", "the agent produced no result")
            elif end is TurnEnd.JOB_TIMEOUT:
                await _fail(dispatcher, ticket, "timeout", "the job's deadline passed before a result")
            elif end in (TurnEnd.OWNER_CANCEL, TurnEnd.OWNER_ROTATE):
                await _fail(dispatcher, ticket, "agent_error", "stopped by the agent's owner")
            elif end is TurnEnd.SHUTDOWN:
                settle = False  # given back: another process (or this one restarted) takes it
                await rt.claims.release(ticket.id)
            log.info("job %s ended %s", ticket.id[:12], end.value)
        if settle:
            await rt.status.unreact(items, (EYES,))
            await rt.claims.done(ticket.id)
        if turn.session is not None:
            await _drop_session(dispatcher, turn)
    finally:
        rt.work.turn_ended(turn, end)
        rt.pool.busy[turn.worker] = False
        dispatcher.turns.pop(turn.channel, None)
        dispatcher.last_activity = time.monotonic()
        dispatcher.turn_ended.set()
        dispatcher.wake()
