"""Voice guidelines as huddle.md §8 posts them (issue 24 item 1): the starter posts 48106 in the
huddle channel before adding the agents, with no `p` tag (§8.4 step 2, §8.1), so a harness that
only wakes on mentions never receives it on its subscription. The harness reads the channel's
newest 48106 when it creates the channel's session: the first prompt there, and after `!rotate`."""

from __future__ import annotations

import asyncio

from buzz.agent.intake import channel_sub
from buzz.core.event import Event
from tests.agent.support import Workspace, add_member, create_channel, publish

FIRST = "Voice mode: answer in one or two short spoken sentences, no markup."
SECOND = "Voice mode, revised: one sentence only, and never spell out links."


def _voice_blocks(ws: Workspace, channel: str) -> list[str | None]:
    """The `[Voice]` block of each prompt in `channel` (None for a prompt without one)."""
    prompts = [r for r in ws.records("prompt") if any(f"(#{channel})" in b for b in r["blocks"])]
    return [next((b for b in r["blocks"] if b.startswith("[Voice]")), None) for r in prompts]


async def _guidelines(ws: Workspace, channel: str, text: str) -> Event:
    """A spec-shaped 48106: `h` = the huddle channel, no `p` tag."""
    return await publish(ws.owner_client, Event.create(ws.owner.secret, 48106, text, [["h", channel]]))


async def _ask(ws: Workspace, channel: str, text: str) -> None:
    ask = await ws.post(ws.owner, text, channel=channel, mention=ws.agent.pubkey)
    await ws.watcher.wait_for(lambda e: bool(ws.watcher.answers_to(ask, ws.agent.pubkey)), what=text)


async def _subscribed(harness, channel: str) -> None:  # type: ignore[no-untyped-def]
    for _ in range(400):
        if harness.runtime.link.subscribed(channel_sub(channel)):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"the harness never subscribed to {channel}")


async def test_guidelines_posted_before_the_agent_was_added_reach_its_prompts(ws: Workspace) -> None:
    async with ws.harness() as harness:
        huddle = await create_channel(ws.owner_client, ws.owner, "huddle", visibility="private")
        await ws.watch(huddle)
        await _guidelines(ws, huddle, FIRST)  # §8.4 step 2: before the agent is added
        await add_member(ws.owner_client, ws.owner, huddle, ws.agent.pubkey, "bot")
        await _subscribed(harness, huddle)
        await _ask(ws, huddle, "echo what is on the agenda")
        await _ask(ws, huddle, "echo and after that")
        await ws.next_second()  # the newer 48106 is newer by created_at
        await _guidelines(ws, huddle, SECOND)  # not delivered: no `p` tag
        await ws.post(ws.owner, "!rotate", channel=huddle, mention=ws.agent.pubkey)
        await ws.watcher.wait_for(lambda e: e.kind == 40099, what="!rotate outcome")
        await _ask(ws, huddle, "echo once more")
    voice = _voice_blocks(ws, huddle)
    texts = [v or "" for v in voice]
    assert len(voice) == 3 and all(voice), voice
    assert [f"> {FIRST}" in v for v in texts] == [True, True, False]
    assert f"> {SECOND}" in texts[2]  # read again for the session after the rotation
    assert "Answer briefly in plain spoken sentences" in texts[0]  # the harness's own rules
    assert _voice_blocks(ws, ws.channel) == []  # nothing asked there


async def test_a_harness_started_after_the_guidelines_reads_them(ws: Workspace) -> None:
    """Another client started the huddle and added the agent while its harness was down."""
    huddle = await create_channel(ws.owner_client, ws.owner, "huddle", visibility="private")
    await ws.watch(huddle)
    await _guidelines(ws, huddle, FIRST)
    await add_member(ws.owner_client, ws.owner, huddle, ws.agent.pubkey, "bot")
    await ws.next_second()
    async with ws.harness():
        await _ask(ws, huddle, "echo hello")
        await _ask(ws, ws.channel, "echo elsewhere")
    voice = _voice_blocks(ws, huddle)
    assert len(voice) == 1 and f"> {FIRST}" in (voice[0] or ""), voice
    assert _voice_blocks(ws, ws.channel) == [None]  # a channel without 48106 is no voice room
