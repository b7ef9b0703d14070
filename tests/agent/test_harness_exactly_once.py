"""Exactly once (issue 14 items 4, 5): the relay says what this agent already took, so a
restart and two processes for one key answer each mention once; missed mentions are caught up
oldest first, each in its own thread; reconnects are logged and their backoff is capped."""

from __future__ import annotations

import asyncio
import logging

import pytest

from buzz.agent import relay_link
from buzz.agent.claims import CLAIM_KIND, claim_address
from buzz.core.event import Event
from tests.agent.support import SPEECH, Workspace


def _answered(ws: Workspace, event: Event):
    return lambda e: bool(ws.watcher.answers_to(event, ws.agent.pubkey))


async def _settled(ws: Workspace, event: Event) -> None:
    """Wait until the turn that answered `event` removed its 💬 (the turn is over)."""
    speech = await ws.watcher.wait_for(
        lambda e: e.kind == 7 and e.content == SPEECH and e.tag_values("e") == [event.id], what="💬"
    )
    await ws.watcher.wait_for(lambda e: e.kind == 5 and e.tag_values("e") == [speech.id], what="💬 removal")


async def test_restart_catches_up_missed_mentions_and_never_answers_twice(ws: Workspace) -> None:
    async with ws.harness():
        before = await ws.post(ws.owner, "echo before the restart", mention=ws.agent.pubkey)
        await ws.watcher.wait_for(_answered(ws, before), what="first answer")
        # stopped at once: the turn may still be winding down, its claim must stay anyway
    missed = []
    for i in range(3):  # one per second: `created_at` is all the relay can order them by
        missed.append(await ws.post(ws.owner, f"echo missed {i}", mention=ws.agent.pubkey))
        await ws.next_second()
    async with ws.harness():  # default --catch-up 600: the last ten minutes are read again
        for event in missed:
            await ws.watcher.wait_for(_answered(ws, event), what="caught-up answer")
        await _settled(ws, missed[-1])
        late = await ws.post(ws.owner, "echo live again", mention=ws.agent.pubkey)
        await ws.watcher.wait_for(_answered(ws, late), what="live answer")
    assert len(ws.watcher.answers_to(before, ws.agent.pubkey)) == 1  # not again after the restart
    answers = [ws.watcher.answers_to(event, ws.agent.pubkey) for event in missed]
    assert [len(a) for a in answers] == [1, 1, 1]
    # each in its own thread and its own prompt, oldest first
    for event, (answer,) in zip(missed, answers, strict=True):
        assert answer.tag_values("e") == [event.id] and "events=1]" in answer.content
    order = [e.id for e in ws.watcher.events]
    assert order.index(answers[0][0].id) < order.index(answers[1][0].id) < order.index(answers[2][0].id)
    # the relay holds the claims: one per answered event, signed by the agent
    claims = await ws.owner_client.query([{"kinds": [CLAIM_KIND], "authors": [ws.agent.pubkey]}])
    assert {c.first_tag("d") for c in claims} >= {claim_address(e.id) for e in (before, *missed, late)}


async def test_catch_up_zero_disables_it(ws: Workspace) -> None:
    missed = await ws.post(ws.owner, "echo while down", mention=ws.agent.pubkey)
    await ws.next_second()
    async with ws.harness(catch_up=0):
        live = await ws.post(ws.owner, "echo live", mention=ws.agent.pubkey)
        await ws.watcher.wait_for(_answered(ws, live), what="live answer")
    assert ws.watcher.replies_to(missed, ws.agent.pubkey) == []


async def test_caught_up_owner_commands_are_not_replayed(ws: Workspace) -> None:
    """A `!shutdown` sent while the harness was down is stale: catch-up answers mentions, but
    never runs an owner command from before the start (the agent would stop at once)."""
    await ws.post(ws.owner, "!shutdown", mention=ws.agent.pubkey)
    await ws.next_second()
    async with ws.harness():
        live = await ws.post(ws.owner, "echo still here", mention=ws.agent.pubkey)
        await ws.watcher.wait_for(_answered(ws, live), what="answer after a stale !shutdown")
    assert len(ws.watcher.answers_to(live, ws.agent.pubkey)) == 1


async def test_two_processes_for_one_key_answer_each_mention_once(ws: Workspace) -> None:
    async with ws.harness() as first, ws.harness() as second:
        assert first is not second
        mentions = []
        for i in range(5):  # one at a time: both processes see each mention while idle
            mentions.append(await ws.post(ws.owner, f"echo race {i}", mention=ws.agent.pubkey))
            await ws.watcher.wait_for(_answered(ws, mentions[-1]), what="answer")
        await asyncio.sleep(1.0)  # room for a second answer to show up
    assert [len(ws.watcher.answers_to(e, ws.agent.pubkey)) for e in mentions] == [1] * 5
    prompted = "".join("".join(r["blocks"]) for r in ws.records("prompt"))
    assert [prompted.count(f"Event ID: {e.id}") for e in mentions] == [1] * 5


async def test_reconnect_is_logged_and_catches_up(ws: Workspace, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="buzz.agent")
    async with ws.harness() as harness:
        link = harness.runtime.link
        for conn in list(ws.relay.relay.connections):  # the relay drops the agent's socket
            if getattr(conn.session, "pubkey", None) == ws.agent.pubkey:
                await conn.ws.close()
        during = await ws.post(ws.owner, "echo during the outage", mention=ws.agent.pubkey)
        for _ in range(200):
            if link.connections == 2 and link.connected.is_set():
                break
            await asyncio.sleep(0.05)
        await ws.watcher.wait_for(_answered(ws, during), what="answer after the reconnect")
        await asyncio.sleep(0.5)
    assert len(ws.watcher.answers_to(during, ws.agent.pubkey)) == 1
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("relay connection lost") for m in messages)
    assert any(m.startswith("relay connection regained after") for m in messages)


def test_reconnect_backoff_is_capped_so_a_long_outage_costs_at_most_five_seconds() -> None:
    delay, waited, schedule = relay_link.BACKOFF_MIN_S, 0.0, []
    while waited < 25.0:  # a 25 s outage: every attempt fails
        schedule.append(delay)
        waited += delay
        delay = relay_link.next_backoff(delay)
    # the relay is back at 25 s: the next attempt comes at most one capped delay later
    assert max(schedule) == relay_link.BACKOFF_MAX_S == 5.0
    assert waited - 25.0 < relay_link.BACKOFF_MAX_S
