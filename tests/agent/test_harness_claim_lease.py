"""Claims carry a lease (docs/decisions.md): a harness killed mid-turn leaves a claim that stops
moving, and a restarted harness (or another replica) answers the mention once the lease ran
out — never while the holder is alive, never when the answer is already on the relay."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from buzz.agent.claims import CLAIM_KIND, CLAIMED, DONE, claim_address, claim_event, claim_state
from buzz.core.event import Event
from tests.agent.support import RULES_AGENT, Workspace, message, publish, until_logged
from tests.support.deadline import scaled

BUZZ = str(Path(sys.executable).with_name("buzz"))
LEASE = 4  # the smallest lease: the heartbeat runs every second


def _answered(ws: Workspace, event: Event):
    return lambda e: bool(ws.watcher.answers_to(event, ws.agent.pubkey))


async def _claim(ws: Workspace, event: Event) -> tuple[str, int] | None:
    flt = {"kinds": [CLAIM_KIND], "authors": [ws.agent.pubkey], "#d": [claim_address(event.id)]}
    return claim_state(await ws.owner_client.query([flt]))


async def _until_done(ws: Workspace, event: Event) -> None:
    for _ in range(400):
        state = await _claim(ws, event)
        if state is not None and state[0] == DONE:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"the claim on {event.id[:12]} never became done: {await _claim(ws, event)}")


async def _until_prompted(ws: Workspace, event: Event, times: int) -> None:
    for _ in range(400):
        if _prompts_of(ws, event) >= times:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"the agent was not prompted {times} time(s) with {event.id[:12]}")


def _prompts_of(ws: Workspace, event: Event) -> int:
    return sum("".join(r["blocks"]).count(f"Event ID: {event.id}") for r in ws.records("prompt"))


@contextlib.asynccontextmanager
async def _harness_process(ws: Workspace, log: Path) -> AsyncIterator[asyncio.subprocess.Process]:
    """`buzz agent run` with the rules agent, in a process group of its own (a kill takes the
    harness and its agent subprocess down together, as a crashed host would)."""
    env = {
        **os.environ,
        "BUZZ_PRIVATE_KEY": ws.agent.secret,
        "BUZZ_AUTH_TAG": json.dumps(ws.auth_tag),
    }
    args = ["--relay", ws.relay.url, "--agent-command", sys.executable, "--agent-args", RULES_AGENT]
    args += ["--claim-lease", str(LEASE), "--no-typing"]
    with log.open("ab") as out:
        proc = await asyncio.create_subprocess_exec(
            BUZZ, "agent", "run", *args, env=env, cwd=ws.tmp, stdout=out, stderr=out, start_new_session=True
        )
    try:
        yield proc
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()


async def test_harness_killed_mid_turn_is_answered_once_after_a_restart(ws: Workspace) -> None:
    log = ws.tmp / "harness.log"
    async with _harness_process(ws, log) as first:
        await ws.next_second()
        mention = await ws.post(ws.owner, "sleep 3", mention=ws.agent.pubkey)
        await _until_prompted(ws, mention, 1)  # the turn runs
        os.killpg(first.pid, signal.SIGKILL)  # the harness and its agent die mid-turn
        await first.wait()
    assert (await _claim(ws, mention) or ("", 0))[0] == CLAIMED  # the dead holder's claim stays
    async with _harness_process(ws, log) as second:
        await ws.watcher.wait_for(_answered(ws, mention), timeout=60, what="answer after the restart")
        await _until_done(ws, mention)
        second.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(second.wait(), scaled(30)) == 0, log.read_text()
    answers = ws.watcher.answers_to(mention, ws.agent.pubkey)
    assert [a.content.split(" [")[0] for a in answers] == ["slept 3"], log.read_text()
    assert _prompts_of(ws, mention) == 2  # killed once, answered by the restart


async def test_a_stale_claim_whose_answer_was_posted_is_not_answered_again(
    ws: Workspace, caplog: pytest.LogCaptureFixture
) -> None:
    """The holder posted its answer and died before it marked the claim done."""
    caplog.set_level(logging.INFO, logger="buzz.agent")
    mention = await ws.post(ws.owner, "echo once", mention=ws.agent.pubkey)
    async with ws.relay.client(ws.agent, auth_tags=[ws.auth_tag]) as agent:
        await publish(agent, claim_event(ws.agent.secret, mention.id, mention.created_at, CLAIMED))
        answer = await publish(
            agent, message(ws.agent, ws.channel, "once [by the dead one]", reply_to=mention)
        )
    await ws.next_second()
    async with ws.harness(claim_lease=LEASE):
        await until_logged(
            caplog, "after its answer was posted", "the harness never looked at the stale claim again"
        )
    assert [a.id for a in ws.watcher.answers_to(mention, ws.agent.pubkey)] == [answer.id]
    assert _prompts_of(ws, mention) == 0


async def test_a_live_claim_is_not_taken_over_during_a_turn_longer_than_the_lease(ws: Workspace) -> None:
    async with ws.harness(claim_lease=LEASE), ws.harness(claim_lease=LEASE):
        mention = await ws.post(ws.owner, f"sleep {2 * LEASE + 1}", mention=ws.agent.pubkey)
        await ws.watcher.wait_for(_answered(ws, mention), timeout=60, what="answer to the long turn")
        await _until_done(ws, mention)
    assert len(ws.watcher.answers_to(mention, ws.agent.pubkey)) == 1
    assert _prompts_of(ws, mention) == 1  # the other process watched; it never started a turn
