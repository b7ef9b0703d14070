"""End-to-end encrypted DMs to the agent (NIP-17, docs/decisions.md 283): the harness opens the
gift wraps addressed to its agent, the real rules agent answers privately (`buzz dms send
--private`), nothing public is published about the conversation, and a restarted harness does
not answer again (the relay's claim, keyed by the message's own id), after a kill -9 mid-turn
too."""

from __future__ import annotations

import asyncio
import logging
import os
import signal

import pytest

from buzz.agent.claims import CLAIM_KIND, CLAIMED, claim_address, claim_event
from buzz.core import nip59
from buzz.core.event import Event
from tests.agent.support import Watcher, Workspace, publish, until_logged
from tests.agent.test_harness_claim_lease import (
    LEASE,
    _claim,
    _harness_process,
    _prompts_of,
    _until_done,
    _until_prompted,
)
from tests.support.deadline import scaled


async def send_private(ws: Workspace, content: str) -> Event:
    rumor = nip59.make_rumor(ws.owner.secret, [ws.agent.pubkey], content)
    for wrap in nip59.wrap_message(ws.owner.secret, rumor, [ws.agent.pubkey, ws.owner.pubkey]):
        result = await ws.owner_client.publish(wrap)
        assert result.accepted, result.message
    return rumor


class Inbox:
    """The owner's private DMs, unwrapped as they arrive."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self.raw = Watcher()
        self.messages: list[nip59.Opened] = []

    async def start(self) -> None:
        flt = {"kinds": [1059], "#p": [self.ws.owner.pubkey], "since": 0}
        sub = await self.ws.owner_client.subscribe([flt])
        asyncio.get_running_loop().create_task(self.raw.pump(sub))

    def answers(self, rumor: Event) -> list[Event]:
        out = {}
        for wrap in self.raw.events:
            opened = nip59.unwrap(self.ws.owner.secret, wrap)
            mine = opened.rumor
            if mine.pubkey == self.ws.agent.pubkey and rumor.id in mine.tag_values("e"):
                out[mine.id] = mine
        return list(out.values())

    async def wait_answer(self, rumor: Event) -> Event:
        await self.raw.wait_for(
            lambda _e: bool(self.answers(rumor)), what=f"private answer to {rumor.content!r}"
        )
        return self.answers(rumor)[0]


async def test_private_dm_is_answered_privately_once(ws: Workspace) -> None:
    inbox = Inbox(ws)
    await inbox.start()
    async with ws.harness():
        first = await send_private(ws, "echo only for you")
        answer = await inbox.wait_answer(first)
        assert answer.content.startswith("only for you [session=")
        assert answer.kind == 14 and answer.tag_values("p") == [ws.owner.pubkey]
    # nothing public about it: no reply, reaction or notice in the workspace's channel
    assert not [e for e in ws.watcher.events if e.pubkey == ws.agent.pubkey and e.kind in (5, 7, 9)]
    prompts = ws.records("prompt")
    assert any("Reply privately: buzz dms send --private" in b for p in prompts for b in p["blocks"])

    async with ws.harness():  # default --catch-up 600: the first message is read again
        second = await send_private(ws, "echo after the restart")
        await inbox.wait_answer(second)
    assert len(inbox.answers(first)) == 1 and len(inbox.answers(second)) == 1
    claims = await ws.owner_client.query([{"kinds": [CLAIM_KIND], "authors": [ws.agent.pubkey]}])
    assert {c.first_tag("d") for c in claims} >= {claim_address(first.id), claim_address(second.id)}
    for claim in claims:
        assert "only for you" not in claim.content


async def test_stranger_private_dm_is_not_answered_under_owner_only(ws: Workspace) -> None:
    from tests.support.relay import Identity

    stranger = Identity.new()
    inbox = Inbox(ws)
    await inbox.start()
    async with ws.harness(respond_to="owner-only"):
        rumor = nip59.make_rumor(stranger.secret, [ws.agent.pubkey], "echo let me in")
        async with ws.relay.client(stranger) as client:
            (wrap,) = nip59.wrap_message(stranger.secret, rumor, [ws.agent.pubkey])
            assert (await client.publish(wrap)).accepted
        owner_dm = await send_private(ws, "echo owner")
        await inbox.wait_answer(owner_dm)  # handled after the stranger's, in order
    assert ws.records("prompt") and not any(
        "let me in" in b for p in ws.records("prompt") for b in p["blocks"]
    )


async def test_harness_killed_mid_turn_answers_the_private_dm_once_after_a_restart(ws: Workspace) -> None:
    """kill -9 of the harness and its agent mid-turn: the claim stays, stops moving, and the
    restarted process answers privately — once."""
    inbox = Inbox(ws)
    await inbox.start()
    log = ws.tmp / "harness.log"
    async with _harness_process(ws, log) as first:
        await ws.next_second()
        dm = await send_private(ws, "sleep 3")
        await _until_prompted(ws, dm, 1)
        os.killpg(first.pid, signal.SIGKILL)
        await first.wait()
    assert (await _claim(ws, dm) or ("", 0))[0] == CLAIMED
    assert inbox.answers(dm) == []
    async with _harness_process(ws, log) as second:
        await inbox.wait_answer(dm)
        await _until_done(ws, dm)
        second.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(second.wait(), scaled(30)) == 0, log.read_text()
    assert [a.content.split(" [")[0] for a in inbox.answers(dm)] == ["slept 3"], log.read_text()
    assert _prompts_of(ws, dm) == 2


async def test_a_stale_claim_whose_private_answer_was_sent_is_not_answered_again(
    ws: Workspace, caplog: pytest.LogCaptureFixture
) -> None:
    """The holder sent its private answer (its own wrapped copy tags the message) and died
    before it marked the claim done: the harness finds the answer in its wraps."""
    caplog.set_level(logging.INFO, logger="buzz.agent")
    dm = await send_private(ws, "echo once")
    answer = nip59.make_rumor(ws.agent.secret, [ws.owner.pubkey], "once [by the dead one]", [["e", dm.id]])
    async with ws.relay.client(ws.agent, auth_tags=[ws.auth_tag]) as agent:
        await publish(agent, claim_event(ws.agent.secret, dm.id, dm.created_at, CLAIMED))
        for wrap in nip59.wrap_message(ws.agent.secret, answer, [ws.owner.pubkey, ws.agent.pubkey]):
            await publish(agent, wrap)
    await ws.next_second()
    async with ws.harness(claim_lease=LEASE):
        await until_logged(
            caplog, "after its answer was posted", "the harness never looked at the stale claim again"
        )
    assert _prompts_of(ws, dm) == 0
