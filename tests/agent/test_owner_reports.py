"""`buzz agent status` and `buzz agent usage` (issue 14 item 12): the owner's view of a running
harness and of its decrypted turn metrics, through the real CLI against the real relay."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

from buzz.agent.reports import agent_status, parse_since, status_rows
from tests.agent.support import Workspace

BUZZ = str(Path(sys.executable).with_name("buzz"))


def _cli(ws: Workspace, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BUZZ_")}
    cmd = [BUZZ, "--relay", ws.relay.url, "--private-key", ws.owner.secret, "agent", *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)


async def _status_with_turns(ws: Workspace, turns: int) -> dict:
    for _ in range(200):
        report = await agent_status(ws.owner_client.query, ws.owner.secret, ws.owner.pubkey)
        if report["agents"] and report["agents"][0].get("turns", 0) >= turns:
            return report
        await asyncio.sleep(0.1)
    raise AssertionError(f"no status snapshot with {turns} turn(s)")


async def test_owner_sees_status_and_usage_of_their_agent(ws: Workspace) -> None:
    async with ws.harness(max_attempts=1):
        ok = await ws.post(ws.owner, "ping", mention=ws.agent.pubkey)
        await ws.watcher.wait_for(lambda e: bool(ws.watcher.answers_to(ok, ws.agent.pubkey)), what="answer")
        bad = await ws.post(ws.owner, "fail", mention=ws.agent.pubkey)
        await ws.watcher.wait_for(lambda e: bool(ws.watcher.notices_to(bad, ws.agent.pubkey)), what="failure")
        await _status_with_turns(ws, 2)
        result = await asyncio.to_thread(_cli, ws, "status")
        table = await asyncio.to_thread(_cli, ws, "status", "--format", "table")
    assert result.returncode == 0, result.stderr
    (agent,) = json.loads(result.stdout)["agents"]
    assert agent["agent"] == ws.agent.pubkey and agent["name"] == "Rulesbot" and agent["state"] == "running"
    assert agent["channels"] == [{"id": ws.channel, "name": "general", "queue": 0, "in_flight": False}]
    assert (agent["turns"], agent["failures"], agent["dead_letters"]) == (2, 1, 1)
    assert agent["last_turn"]["channel"] == ws.channel and agent["last_turn"]["ended"] == "failed"
    assert table.returncode == 0 and "Rulesbot" in table.stdout and "running" in table.stdout
    # after a graceful stop the snapshot says so
    stopped = json.loads((await asyncio.to_thread(_cli, ws, "status")).stdout)["agents"][0]
    assert stopped["state"] == "stopped"

    usage = await asyncio.to_thread(_cli, ws, "usage", "--since", "1h")
    assert usage.returncode == 0, usage.stderr
    report = json.loads(usage.stdout)
    (totals,) = report["agents"]
    assert totals["agent"] == ws.agent.pubkey and totals["turns"] >= 1
    assert totals["inputTokens"] > 0 and totals["totalTokens"] >= totals["inputTokens"]
    assert [c["channel"] for c in totals["channels"]] == [ws.channel]
    usage_table = await asyncio.to_thread(_cli, ws, "usage", "--format", "table")
    assert usage_table.returncode == 0 and ws.agent.pubkey[:12] in usage_table.stdout
    bad_since = await asyncio.to_thread(_cli, ws, "usage", "--since", "yesterday")
    assert bad_since.returncode == 1 and json.loads(bad_since.stderr)["error"] == "user_error"


def test_since_takes_seconds_or_a_duration() -> None:
    assert parse_since("1700000000", 0) == 1_700_000_000
    assert parse_since("24h", 100_000) == 100_000 - 86_400
    assert parse_since("7d", 1_000_000) == 1_000_000 - 7 * 86_400


def test_status_table_shows_the_last_turn_in_iso_8601_utc() -> None:
    report = {
        "agents": [
            {
                "agent": "ab" * 32,
                "name": "Rulesbot",
                "state": "running",
                "channels": [],
                "turns": 3,
                "failures": 0,
                "last_turn": {"ended": "ok", "at": 1796027776},
            }
        ]
    }
    (row,) = status_rows(report)
    assert row[-1] == "ok @ 2026-11-30T08:36:16Z"
    assert report["agents"][0]["last_turn"]["at"] == 1796027776  # the JSON output keeps unix seconds


async def test_job_turns_count_in_usage_and_the_last_turn(ws: Workspace) -> None:
    """A job turn is a turn like a mention's: its usage reaches the owner (44200) and it becomes
    the status's last turn (a failed mention first, so the last turn tells them apart)."""
    from tests.agent.test_harness_jobs import _ask, _ended

    async with ws.harness(max_attempts=1):
        bad = await ws.post(ws.owner, "fail", mention=ws.agent.pubkey)
        await ws.watcher.wait_for(lambda e: bool(ws.watcher.notices_to(bad, ws.agent.pubkey)), what="failure")
        for n in range(2):
            job = await _ask(ws, ws.owner, f"summarise week {n}")
            await ws.watcher.wait_for(_ended(ws, job), timeout=60, what="the job's end")
        report = await _status_with_turns(ws, 3)
        (agent,) = report["agents"]
        assert agent["last_turn"]["ended"] == "completed", agent["last_turn"]
        for _ in range(300):
            usage = await asyncio.to_thread(_cli, ws, "usage", "--since", "1h")
            assert usage.returncode == 0, usage.stderr
            totals = json.loads(usage.stdout)["agents"]
            if totals and totals[0]["turns"] >= 2:
                break
            await asyncio.sleep(0.2)
    assert totals[0]["turns"] == 2 and totals[0]["inputTokens"] > 0  # the failed mention reports none
