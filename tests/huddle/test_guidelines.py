"""Agents know they are in a huddle (issue 13 item 4, block/buzz#3074), on the real relay with the
real harness and its real ACP subprocess (the example rules agent, which records its prompts).

A human runs the huddle client in a channel without agents. Later (the issue's "30 s"; a
parameter here, so the test stays fast) the owner adds the agent as a `bot`. The client notices
the newcomer and posts the voice guidelines (48106) p-tagged to it; the harness lets 48106
through its mention filter, and the agent's first prompt in that channel carries them.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path

import pytest

from buzz.cli.huddle_cmd import KeySigner
from buzz.voice.client import HuddleClient, HuddleOptions
from buzz.voice.guidelines import VOICE_GUIDELINES, VOICE_GUIDELINES_KIND
from buzz.voice.whisper import WhisperRecognizer
from tests.agent.support import add_member, create_channel, workspace
from tests.support.deadline import scaled
from tests.support.relay import Identity, RunningRelay

AGENT_ADDED_AFTER_S = 1.0  # stands for the 30 s: nothing in the flow depends on the delay


async def _until(predicate, timeout: float = 20.0, what: str = "condition") -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


async def test_agent_added_later_gets_the_voice_guidelines_in_its_first_prompt(
    sqlite_relay: RunningRelay,
    alice: Identity,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    whisper: WhisperRecognizer,
) -> None:
    agent = Identity.new()
    async with workspace(sqlite_relay, alice, agent, tmp_path, monkeypatch) as ws:
        huddle = await create_channel(ws.owner_client, alice, "standup", visibility="private")
        await ws.watch(huddle)
        async with ws.harness():
            async with sqlite_relay.client(alice) as alice_nostr:
                options = HuddleOptions(
                    sqlite_relay.url, huddle, transcribe=False, speak_replies=False, agents_check_s=0.2
                )
                client = HuddleClient(
                    options, KeySigner(alice.secret), alice_nostr, recognizer_factory=WhisperRecognizer
                )
                running = asyncio.create_task(client.run())
                try:
                    first = await ws.watcher.wait_for(
                        lambda e: e.kind == VOICE_GUIDELINES_KIND, what="48106 at start"
                    )
                    assert first.tag_values("p") == [] and first.tag_values("h") == [huddle]  # no agent yet
                    await asyncio.sleep(AGENT_ADDED_AFTER_S)
                    await add_member(ws.owner_client, alice, huddle, agent.pubkey, "bot")
                    retagged = await ws.watcher.wait_for(
                        lambda e: e.kind == VOICE_GUIDELINES_KIND and agent.pubkey in e.tag_values("p"),
                        what="48106 p-tagged to the new agent",
                    )
                    assert retagged.pubkey == alice.pubkey and retagged.content == VOICE_GUIDELINES
                    ask = await ws.post(alice, "what is on the agenda", channel=huddle, mention=agent.pubkey)
                    await ws.watcher.wait_for(
                        lambda e: bool(ws.watcher.replies_to(ask, agent.pubkey)), what="the agent's reply"
                    )
                finally:
                    client.stop()
                    with contextlib.suppress(Exception):
                        await asyncio.wait_for(running, scaled(15))
    prompts = [r for r in ws.records("prompt") if any(huddle in b for b in r["blocks"])]
    assert prompts, ws.records("prompt")
    voice = [b for b in prompts[0]["blocks"] if b.startswith("[Voice]")]
    assert voice and "no code blocks" in voice[0] and "Answer briefly" in voice[0]
    assert [g["agents"] for g in client.report.guidelines] == [[], [agent.pubkey]]  # told once each
