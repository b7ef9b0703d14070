"""Core memory at each new session (agents.md §4.10, §4.11, §4.15; engram.md §13), as the
agent subprocess receives it, for each system-prompt transport."""

from __future__ import annotations

import time

import pytest

from buzz.core import engram, nip44
from buzz.core.event import Event
from buzz.core.keys import generate_secret_key, public_key
from tests.agent.support import Workspace, publish

PROFILE = "I am Rulesbot, the team's test agent.\nRule: answer briefly."


async def _publish_as_agent(ws: Workspace, event: Event) -> None:
    async with ws.relay.client(ws.agent, auth_tags=[ws.auth_tag]) as client:
        await publish(client, event)


async def _turn(ws: Workspace, **flags: object) -> str:
    """Run one mention through a fresh harness; return the system prompt the agent received."""
    async with ws.harness(**flags):
        mention = await ws.post(ws.owner, "ping", mention=ws.agent.pubkey)
        await ws.watcher.wait_for(
            lambda e: bool(ws.watcher.replies_to(mention, ws.agent.pubkey)), what="reply"
        )
    sessions = ws.records("session_new")
    prompts = [r for r in ws.records("system_prompt")]
    assert len(sessions) == 1
    return sessions[0]["system_prompt"] or prompts[0]["system_prompt"]


@pytest.mark.parametrize("transport", ["user", "field", "claude-meta"])
async def test_core_memory_found_is_the_last_section(ws: Workspace, transport: str) -> None:
    body = engram.CoreBody(PROFILE)
    await _publish_as_agent(
        ws, engram.build_event(ws.agent.secret, ws.owner.pubkey, body, int(time.time()) - 10)
    )
    prompt = await _turn(ws, system_prompt_transport=transport, system_prompt="Be the test agent.")
    assert ws.records("session_new")[0]["transport"] == (None if transport == "user" else transport)
    headers = [
        section.split("\n", 1)[0] for section in prompt.split("\n\n") if section.startswith(("[", "<"))
    ]
    assert headers[:3] == ["[Workspace]", "[Base]", "[System]"]
    assert prompt.endswith(f"\n\n<core-memory>\n{PROFILE}\n</core-memory>")
    assert str(ws.tmp) in prompt.split("\n\n", 1)[0]  # [Workspace] names the absolute cwd
    assert ws.records("session_new")[0]["cwd"] == str(ws.tmp)


async def test_no_core_memory_gives_the_onboarding_nudge(ws: Workspace) -> None:
    prompt = await _turn(ws)
    section = prompt[prompt.rindex("<core-memory>") :]
    assert section.endswith("</core-memory>")
    assert "No core memory exists yet" in section and 'buzz mem set core "' in section
    assert "identity, rules" in section and "Ask your user about yourself" in section


async def test_unreadable_core_memory_injects_nothing_and_the_turn_runs(ws: Workspace) -> None:
    """The relay answers the core query with a candidate that cannot be decrypted (a Failure
    of engram.md §13.4): neither the profile nor the nudge is injected."""
    key = engram.conversation_key(ws.agent.secret, ws.owner.pubkey)
    wrong = nip44.get_conversation_key(ws.agent.secret, public_key(generate_secret_key()))
    content = nip44.encrypt('{"slug":"core","profile":"hijacked"}', wrong)
    tags = [["d", engram.d_tag(key, "core")], ["p", ws.owner.pubkey]]
    await _publish_as_agent(ws, Event.create(ws.agent.secret, engram.KIND_ENGRAM, content, tags))
    prompt = await _turn(ws)
    assert "<core-memory>" not in prompt and "hijacked" not in prompt
    assert prompt.startswith("[Workspace]")


async def test_no_memory_switch_injects_nothing(ws: Workspace) -> None:
    body = engram.CoreBody(PROFILE)
    await _publish_as_agent(
        ws, engram.build_event(ws.agent.secret, ws.owner.pubkey, body, int(time.time()) - 10)
    )
    prompt = await _turn(ws, no_memory=True)
    assert "<core-memory>" not in prompt and PROFILE not in prompt
