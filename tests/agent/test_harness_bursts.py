"""Bursts and cancels (issue 14 items 7–11), against agents that misbehave the way real ACP
agents have (`tests/agent/quirk_agent.py`)."""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import re
import sys

import pytest

from buzz.agent import acp_pool
from buzz.agent.acp_pool import AgentProcess
from buzz.core.event import Event
from tests.agent.support import EYES, QUIRK_AGENT, SPEECH, Workspace


def _answered(ws: Workspace, event: Event):
    return lambda e: bool(ws.watcher.answers_to(event, ws.agent.pubkey))


async def _prompt_started(ws: Workspace, event: Event) -> None:
    await ws.watcher.wait_for(
        lambda e: e.kind == 7 and e.content == SPEECH and e.tag_values("e") == [event.id], what="💬"
    )


async def _queued(ws: Workspace, event: Event) -> None:
    await ws.watcher.wait_for(
        lambda e: e.kind == 7 and e.content == EYES and e.tag_values("e") == [event.id], what="👀"
    )


def _worked_on(ws: Workspace, event: Event) -> bool:
    """`event` was presented to the agent as work (an event block, not history)."""
    needle = f"Event ID: {event.id}"
    return any(
        needle in b and b.startswith(("[Buzz event", "[New events", "[Interrupted work"))
        for r in ws.records("prompt")
        for b in r["blocks"]
    )


async def _records(ws: Workspace, kind: str, count: int) -> None:
    """Wait until the agent recorded `count` entries of `kind`."""
    for _ in range(200):
        if len(ws.records(kind)) >= count:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"the agent recorded {len(ws.records(kind))} {kind}, not {count}")


async def _idle(harness, timeout: float = 20.0) -> None:
    """Wait until the harness has nothing queued or in flight."""
    for _ in range(int(timeout / 0.05)):
        if not harness.runtime.queue.has_work() and not harness.dispatcher.turns:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the harness did not go idle")


async def test_a_burst_steers_at_most_twice_then_queues(ws: Workspace) -> None:
    async with ws.harness() as harness:
        warm = await ws.post(ws.owner, "ping", mention=ws.agent.pubkey)  # the session exists
        await ws.watcher.wait_for(_answered(ws, warm), what="warm-up answer")
        await _idle(harness)
        burst = []
        for _ in range(8):  # a mention every 0.3 s, each needing 0.9 s of work
            burst.append(await ws.post(ws.owner, f"sleep 0.9{len(burst)}", mention=ws.agent.pubkey))
            await asyncio.sleep(0.3)
        await _queued(ws, burst[-1])
        await _idle(harness)
    cancels = ws.records("cancelled")
    answers = [a for event in burst for a in ws.watcher.answers_to(event, ws.agent.pubkey)]
    # It did steer, and never more than --steer-limit (2) times in a row: a run of cancelled
    # turn numbers with no turn between them that ran to its end. A burst that outlasts the
    # finished turn may steer the next turn again (the count is per turn).
    turns = sorted(int(r["turn"]) for r in cancels)
    runs = [1]
    for before, after in itertools.pairwise(turns):
        runs[-1:] = [runs[-1] + 1] if after == before + 1 else [runs[-1], 1]
    assert cancels and max(runs) <= 2, turns
    assert len(answers) >= 2  # the steered turn finished and the queued rest got its own turn
    assert [_worked_on(ws, e) for e in burst] == [True] * len(burst)  # none lost
    assert ws.watcher.answers_to(burst[-1], ws.agent.pubkey)  # the last one was answered


async def test_the_third_steer_waits_for_the_next_turn(ws: Workspace) -> None:
    async with ws.harness() as harness:
        first = await ws.post(ws.owner, "sleep 2", mention=ws.agent.pubkey)
        await _prompt_started(ws, first)
        steering = []
        for n in (1, 2):  # two steers: each cancels the prompt in flight and re-prompts
            steering.append(await ws.post(ws.owner, f"sleep 2.{n}", mention=ws.agent.pubkey))
            await _records(ws, "prompt", n + 1)
        queued = await ws.post(ws.owner, "echo queued", mention=ws.agent.pubkey)
        await ws.watcher.wait_for(_answered(ws, steering[-1]), what="the steered turn's answer")
        await ws.watcher.wait_for(_answered(ws, queued), what="the queued mention's answer")
        await _idle(harness)
    heads = [
        [b.split("\n", 1)[0][:20] for b in r["blocks"] if b.startswith("[")] for r in ws.records("prompt")
    ]
    steered = [h for h in heads if any(x.startswith("[Interrupted work") for x in h)]
    assert len(heads) == 4 and len(steered) == 2  # the third mention did not steer
    assert not any(h.startswith("[Interrupted") for h in heads[3])  # a turn of its own
    assert ws.watcher.answers_to(steering[-1], ws.agent.pubkey)[0].content.startswith("steered: slept 2.2")
    assert ws.watcher.answers_to(queued, ws.agent.pubkey)[0].content.startswith("queued [")


async def test_a_cancel_answered_with_an_error_is_no_failure(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="buzz.agent")
    monkeypatch.setenv("RULES_AGENT_QUIRKS", "cancel-error")
    async with ws.harness(agent_args=QUIRK_AGENT, max_attempts=2, retry_backoff=0.2) as harness:
        slow = await ws.post(ws.owner, "sleep 5", mention=ws.agent.pubkey)
        await _prompt_started(ws, slow)
        newer = await ws.post(ws.owner, "echo newer", mention=ws.agent.pubkey)
        await ws.watcher.wait_for(_answered(ws, newer), what="steered answer")
        await _idle(harness)
    assert ws.watcher.answers_to(newer, ws.agent.pubkey)[0].content.startswith("steered: newer")
    assert _notices(ws) == []
    assert not [r for r in caplog.records if "failed (attempt" in r.getMessage()]
    # the interrupted batch was merged into the next prompt, never retried alone
    prompts = ws.records("prompt")
    assert len(prompts) == 2 and any(b.startswith("[Interrupted work") for b in prompts[1]["blocks"])


async def test_only_a_pending_prompt_is_cancelled(ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RULES_AGENT_QUIRKS", "sticky-cancel")
    env = dict(os.environ)
    proc = AgentProcess(0, sys.executable, [QUIRK_AGENT], env, str(ws.tmp), "auto", lambda *a: None)
    await proc.start()
    try:
        session = (await proc.request("session/new", {"cwd": str(ws.tmp), "mcpServers": []}))["sessionId"]
        assert await proc.cancel(session) is False  # idle: nothing is sent
        outcome = await proc.prompt(session, ["[Heartbeat]\nanything?"], 30, 60)
        assert outcome.stop_reason == "end_turn" and not outcome.failed
    finally:
        await proc.kill()
    assert ws.records("idle_cancel") == [] and ws.records("sticky_abort") == []


def _said_once(ws: Workspace, words: list[str]) -> list[int]:
    """How often each of `words` appears as a word in the agent's channel messages."""
    said = [e.content for e in ws.watcher.of(9, ws.agent.pubkey)]
    return [sum(len(re.findall(rf"\b{w}\b", text)) for text in said) for w in words]


def _crossed_cancels(caplog: pytest.LogCaptureFixture) -> int:
    """Prompts the harness cancelled (while its prompt was pending) that came back `end_turn`:
    the agent had answered before the cancel reached it, so the cancel found it idle."""
    return sum(
        1
        for r in caplog.records
        if r.name == "buzz.agent.turns"
        and r.msg.startswith("prompt in ")
        and r.args[2] == "end_turn"  # type: ignore[index]
        and r.args[3] is True  # type: ignore[index]
    )


async def _answer_each_after_the_last(ws: Workspace, words: list[str], pause: float) -> None:
    """Mention the agent with `echo <word>` once the previous word was answered."""
    for i, word in enumerate(words):
        await ws.post(ws.owner, f"echo {word}", mention=ws.agent.pubkey)
        await ws.watcher.wait_for(lambda e, w=word: _said_once(ws, [w]) != [0], what=f"answer {word}")
        await asyncio.sleep(pause * i)  # land at different points of the turn's ending


async def _burst(
    ws: Workspace,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    quirks: str,
    words: list[str],
    pause: float,
) -> None:
    """The quirk agent with `quirks` answers `words` one after the other (the harness's prompt
    outcomes are logged for `_crossed_cancels`), until the harness is idle."""
    caplog.set_level(logging.DEBUG, logger="buzz.agent.turns")
    monkeypatch.setenv("RULES_AGENT_QUIRKS", quirks)
    async with ws.harness(agent_args=QUIRK_AGENT) as harness:
        await _answer_each_after_the_last(ws, words, pause)
        await _idle(harness)


def _notices(ws: Workspace) -> list[Event]:
    """The harness's notices (failure, retrying, ...) among the agent's channel messages."""
    return [e for e in ws.watcher.of(9, ws.agent.pubkey) if any(t[0] == "buzz:agent-notice" for t in e.tags)]


def _presented_as_new(ws: Workspace, event: Event) -> int:
    """In how many prompts `event` was new work (an event block, not `[Interrupted work`)."""
    needle = f"Event ID: {event.id}"
    return sum(
        any(needle in b and b.startswith(("[Buzz event", "[New events")) for b in r["blocks"])
        for r in ws.records("prompt")
    )


def _failed_attempts(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "failed (attempt" in r.getMessage()]


async def test_a_burst_at_turn_ends_loses_and_repeats_nothing(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 14 item 9. The harness only cancels a prompt it has not seen answered; a cancel
    can still cross the answer on the wire (the agent's result is on its way), which on a busy
    machine happens, so what is checked is that every such idle cancel was one of those and
    that an agent keeping it (its next prompt aborted) costs no mention and no double answer."""
    words = [f"n{i}" for i in range(8)]
    await _burst(ws, monkeypatch, caplog, "sticky-cancel", words, pause=0.03)
    assert _said_once(ws, words) == [1] * len(words)
    assert len(ws.records("idle_cancel")) <= _crossed_cancels(caplog)
    assert len(ws.records("sticky_abort")) <= len(ws.records("idle_cancel"))
    assert _notices(ws) == []


@pytest.mark.parametrize("quirks", ["sticky-cancel,cross-cancel", "sticky-cancel,cross-cancel,cancel-error"])
async def test_a_cancel_that_crosses_the_answer_loses_nothing(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, quirks: str
) -> None:
    """The crossing made certain (`cross-cancel`: the agent answers each steered prompt as if
    the cancel had come after its answer): the sticky agent aborts the next prompt (with
    `cancelled`, or with a JSON-RPC error as Gemini CLI does), which the harness takes as
    interrupted by its own cancel and sends again at once (issue 24 item 2), so each mention is
    answered once and nobody is told of a failure. Each next mention is posted once the agent
    has started the prompt it will answer (3 s of work), so every one of them steers; the agent
    then finishes that work, reply included, after the cancel, so the cancel's grace (10 s
    before the subprocess is killed) is lengthened: on a loaded box the reply alone can take
    that long, and the grace is not what is tested here."""
    caplog.set_level(logging.DEBUG, logger="buzz.agent")
    monkeypatch.setenv("RULES_AGENT_QUIRKS", quirks)
    monkeypatch.setattr(acp_pool, "CANCEL_GRACE_S", 120.0)
    chain: list[Event] = []
    async with ws.harness(agent_args=QUIRK_AGENT) as harness:
        for i in range(4):
            chain.append(await ws.post(ws.owner, f"sleep 3.{i}", mention=ws.agent.pubkey))
            await _records(ws, "prompt", i + 1)  # its prompt runs (sent again after an abort)
        await ws.watcher.wait_for(_answered(ws, chain[-1]), what="the last answer")
        await _idle(harness)
    crossed, aborted = len(ws.records("idle_cancel")), len(ws.records("sticky_abort"))
    assert crossed == _crossed_cancels(caplog) == len(chain) - 1  # each next mention steered
    assert aborted == crossed  # each crossing aborted the prompt after it ...
    answers = [[a.content.split(" [")[0] for a in ws.watcher.answers_to(e, ws.agent.pubkey)] for e in chain]
    assert answers == [[f"slept {float(f'3.{i}'):g}"] for i in range(4)]  # ... sent again, answered once
    assert len(ws.records("prompt")) == len(chain)  # the agent worked on each mention once
    assert _notices(ws) == [] and _failed_attempts(caplog) == []


@pytest.mark.parametrize("quirks", ["close", ""])
async def test_rotation_closes_the_old_session(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch, quirks: str
) -> None:
    monkeypatch.setenv("RULES_AGENT_QUIRKS", quirks)
    async with ws.harness(agent_args=QUIRK_AGENT) as harness:
        for i in range(3):
            mention = await ws.post(ws.owner, f"echo turn {i}", mention=ws.agent.pubkey)
            await ws.watcher.wait_for(_answered(ws, mention), what=f"answer {i}")
            await _idle(harness)
            await ws.next_second()  # identical `!rotate` events of one second share an id
            await ws.post(ws.owner, "!rotate", mention=ws.agent.pubkey)
            await ws.watcher.wait_for(
                lambda e, n=i: e.kind == 40099 and len(ws.watcher.of(40099, ws.agent.pubkey)) > n,
                what="!rotate",
            )
    opened = ws.records("open")
    assert len(opened) == 3
    assert [r["open"] for r in opened] == [1, 1, 1]  # never more than one open session
    if quirks == "close":  # ACP session/close: one process, every old session closed
        assert len({r["pid"] for r in opened}) == 1 and len(ws.records("closed")) == 3
    else:  # no session/close: the subprocess is restarted instead
        assert len({r["pid"] for r in opened}) == 3 and ws.records("closed") == []


async def test_a_stale_end_turn_after_a_cancel_does_not_swallow_the_next_prompt(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RULES_AGENT_QUIRKS", "stale-end-turn")
    async with ws.harness(agent_args=QUIRK_AGENT) as harness:
        slow = await ws.post(ws.owner, "sleep 5", mention=ws.agent.pubkey)
        await _prompt_started(ws, slow)
        newer = await ws.post(ws.owner, "echo after the cancel", mention=ws.agent.pubkey)
        await ws.watcher.wait_for(_answered(ws, newer), what="answer after the stale end_turn")
        await _idle(harness)
        later = await ws.post(ws.owner, "echo later", mention=ws.agent.pubkey)
        await ws.watcher.wait_for(_answered(ws, later), what="the next answer")
    assert len(ws.records("stale")) == 1  # the agent did answer stale once; it was not taken as done
    assert "after the cancel" in ws.watcher.answers_to(newer, ws.agent.pubkey)[0].content


async def test_no_owner_with_owner_only_is_said_loudly_at_start(
    ws: Workspace, caplog: pytest.LogCaptureFixture
) -> None:
    """Without an auth tag, owner-only admits nobody (§4.2 item 2): one WARNING at start says so."""
    caplog.set_level(logging.INFO, logger="buzz.agent")
    async with ws.harness(auth_tag=None):
        pass
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("this agent answers nobody" in w and "BUZZ_AUTH_TAG" in w for w in warnings), warnings


async def test_a_mention_stream_to_an_agent_that_answers_cancels_with_errors(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 24 item 2: an agent that answers a cancelled prompt with a JSON-RPC error and
    streams no `session/update` (the error-on-cancel agent), 16 mentions 0.4 s apart, each
    needing 0.6 s of work. Every cancel is the harness's own (steering): an interrupted batch is
    folded into the next steered prompt, never sent again alone, never a failed attempt."""
    caplog.set_level(logging.DEBUG, logger="buzz.agent")
    monkeypatch.setenv("RULES_AGENT_QUIRKS", "cancel-error,no-updates")
    async with ws.harness(agent_args=QUIRK_AGENT) as harness:
        stream = []
        for i in range(16):
            stream.append(await ws.post(ws.owner, f"sleep 0.6{i:02d}", mention=ws.agent.pubkey))
            await asyncio.sleep(0.4)
        await _queued(ws, stream[-1])
        await _idle(harness, timeout=60)
    said = [e.content for e in ws.watcher.of(9, ws.agent.pubkey)]
    slept = [f"slept {float(f'0.6{i:02d}'):g}" for i in range(16)]
    # the rules agent answers the new events of a prompt (interrupted work is context to it)
    answers = [sum(len(re.findall(rf"{re.escape(s)}\b", t)) for t in said) for s in slept]
    assert max(answers) == 1 and answers[-1] == 1  # nothing answered twice, the last answered
    assert [_presented_as_new(ws, e) for e in stream] == [1] * 16  # never re-sent as new work
    assert ws.records("cancelled")  # it did steer, and each steer was answered with an error
    assert _notices(ws) == [] and _failed_attempts(caplog) == []
    assert not [r for r in caplog.records if "stale" in r.getMessage()]
