"""Browser: the owner's view of an agent — channels, turns, engram memory (issue 12, item 4).

`buzz mem` (as the agent) writes first and the browser reads; the browser writes and `buzz
mem` reads back; the browser's events carry exactly the d-tags and body bytes of
buzz.core.engram."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from buzz.agent.metrics import build_metric_event
from buzz.core import engram, nip44
from tests.agent.support import workspace
from tests.mem.cli import buzz_mem
from tests.support.relay import Identity, RunningRelay
from tests.web.browser import assert_all_passed, require_browser, run_scenario

PLAN = "Ship the web client.\nThen the huddles."
CORE = 'I am Rulesbot, edited in the browser: "quotes", back\\slash, tab\t, émoji 🐝,\nand a new line.'
NOTE = "written in the browser ✓"


async def test_agent_memory_round_trips_with_buzz_mem(
    sqlite_relay: RunningRelay, alice: Identity, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_browser()
    agent = Identity.new()
    async with workspace(sqlite_relay, alice, agent, tmp_path, monkeypatch) as ws:
        env = {"BUZZ_AUTH_TAG": json.dumps(ws.auth_tag)}

        async def mem(*args: str) -> bytes:
            run = await buzz_mem(sqlite_relay, agent, *args, env=env)
            assert run.code == 0, run.stderr
            return run.stdout

        await mem("set", "core", "I am Rulesbot.")
        await mem("set", "mem/project/plan", PLAN)
        await mem("set", "mem/old", "to be deleted")
        payload = {
            "harness": "buzz",
            "model": "test-model",
            "turnSeq": 1,
            "turn": {"totalTokens": 42, "costUsd": 0.0012},
            "stopReason": "end_turn",
        }
        async with sqlite_relay.client(agent, auth_tags=[ws.auth_tag]) as client:
            result = await client.publish(
                build_metric_event(agent.secret, alice.pubkey, payload, int(time.time()))
            )
            assert result.accepted, result.message

        report = await run_scenario(
            "memory",
            {
                "url": sqlite_relay.http_url + "/",
                "owner": alice.secret,
                "agentSecret": agent.secret,
                "otherSecret": Identity.new().secret,
                "planText": PLAN,
                "coreText": CORE,
                "noteText": NOTE,
            },
        )
        assert_all_passed(
            report,
            [
                "my agent, its channels, turns and memory written by buzz mem",
                "editing needs the agent key, not another one",
                "core is edited in the browser",
                "a new entry is added",
                "an entry is deleted",
                "screenshots: agent memory at both widths",
            ],
        )

        assert (await mem("get", "core")).decode() == CORE
        assert (await mem("get", "mem/browser/note")).decode() == NOTE
        gone = await buzz_mem(sqlite_relay, agent, "get", "mem/old", env=env)
        assert gone.code == 1 and gone.error["error"] == "not_found"
        listed = [e["slug"] for e in json.loads(await mem("ls"))]
        assert listed == ["mem/browser/note", "mem/project/plan"]

        # Same bytes as buzz.core.engram: the d-tag, the tags' order and the canonical body.
        key = engram.conversation_key(alice.secret, agent.pubkey)
        async with sqlite_relay.client(alice) as owner:
            events = await owner.query([{"kinds": [30174], "authors": [agent.pubkey], "#p": [alice.pubkey]}])
        by_d = {e.first_tag("d"): e for e in events}
        for body in (
            engram.CoreBody(CORE),
            engram.MemoryBody("mem/browser/note", NOTE),
            engram.MemoryBody("mem/old", None),
        ):
            event = by_d[engram.d_tag(key, body.slug)]
            assert [list(t) for t in event.tags] == [["d", engram.d_tag(key, body.slug)], ["p", alice.pubkey]]
            assert nip44.decrypt(event.content, key).encode() == engram.encode_body(body)
