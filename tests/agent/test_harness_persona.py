"""`buzz agent run --persona` (jobs spec §10.2, checklist items 55–56): the owner's persona is
the `[System]` section and the model of new sessions; a newer version applies to the next new
session only; a missing persona or one combined with --system-prompt exits 1."""

from __future__ import annotations

import asyncio
import json
import os
import sys

from buzz.core.event import Event
from tests.agent.support import RULES_AGENT, Workspace, publish
from tests.agent.test_harness_claim_lease import BUZZ
from tests.support.deadline import scaled


async def _persona(ws: Workspace, slug: str, prompt: str, at: int | None = None) -> Event:
    body = {"display_name": "Reviewer", "system_prompt": prompt, "model": "careful-1", "runtime": "goose"}
    # shared: a persona is readable by others (the agent) only with ["shared","true"]
    event = Event.create(
        ws.owner.secret, 30175, json.dumps(body), [["d", slug], ["shared", "true"]], created_at=at
    )
    return await publish(ws.owner_client, event)


async def test_persona_prompt_applies_and_updates_reach_new_sessions_only(ws: Workspace) -> None:
    first = await _persona(ws, "reviewer", "You review code kindly.")
    async with ws.harness(persona="reviewer", system_prompt_transport="field") as harness:
        assert harness.runtime.config.model == "careful-1" and harness.runtime.persona_name == "Reviewer"
        one = await ws.post(ws.owner, "echo first", mention=ws.agent.pubkey)
        await ws.watcher.wait_for(lambda e: bool(ws.watcher.answers_to(one, ws.agent.pubkey)), what="answer")
        await _persona(ws, "reviewer", "You review code strictly.", at=first.created_at + 1)
        for _ in range(200):
            if harness.runtime.config.system_prompt == "You review code strictly.":
                break
            await asyncio.sleep(0.05)
        two = await ws.post(ws.owner, "echo second", mention=ws.agent.pubkey)  # the same session
        await ws.watcher.wait_for(lambda e: bool(ws.watcher.answers_to(two, ws.agent.pubkey)), what="answer")
    sessions = ws.records("session_new")
    assert len(sessions) == 1
    assert "[System]\nYou review code kindly." in sessions[0]["system_prompt"]
    assert sessions[0]["title"].startswith("Reviewer · #")


async def _run(ws: Workspace, *args: str) -> tuple[int, str]:
    env = {**os.environ, "BUZZ_PRIVATE_KEY": ws.agent.secret, "BUZZ_AUTH_TAG": json.dumps(ws.auth_tag)}
    proc = await asyncio.create_subprocess_exec(
        BUZZ, "agent", "run", "--relay", ws.relay.url, "--agent-command", sys.executable,
        "--agent-args", RULES_AGENT, *args, env=env, cwd=ws.tmp,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), scaled(60))
    return proc.returncode or 0, (out + err).decode()


async def test_missing_persona_or_a_second_prompt_exits_1(ws: Workspace) -> None:
    code, text = await _run(ws, "--persona", "nobody-here")
    assert code == 1 and "persona not found" in text, text
    code, text = await _run(ws, "--persona", "reviewer", "--system-prompt", "x")
    assert code == 1 and "mutually exclusive" in text, text


async def test_the_managed_records_persona_applies_without_a_flag(ws: Workspace) -> None:
    await _persona(ws, "helper", "You help with chores.")
    record = Event.create(
        ws.owner.secret, 30177, json.dumps({"persona_id": "helper"}), [["d", ws.agent.pubkey]]
    )
    await publish(ws.owner_client, record)
    async with ws.harness(system_prompt_transport="field") as harness:
        for _ in range(200):
            if harness.runtime.config.system_prompt == "You help with chores.":
                break
            await asyncio.sleep(0.05)
        one = await ws.post(ws.owner, "echo hi", mention=ws.agent.pubkey)
        await ws.watcher.wait_for(lambda e: bool(ws.watcher.answers_to(one, ws.agent.pubkey)), what="answer")
    (session,) = ws.records("session_new")
    assert "[System]\nYou help with chores." in session["system_prompt"]
