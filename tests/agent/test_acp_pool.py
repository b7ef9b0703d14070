"""The ACP subprocess wrapper against the real rules agent (agents.md §4.1, §4.14 item 3)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from buzz.agent.acp_pool import AgentPool, AgentProcess
from tests.agent.support import RULES_AGENT

EVENT_ID = "ab" * 32


def _block(content: str) -> str:
    return (
        f"[Buzz event: @mention]\nEvent ID: {EVENT_ID}\nKind: 9\nContent:\n{content}\nTags: []\nParsed: {{}}"
    )


def _process(tmp_path: Path, index: int = 0) -> AgentProcess:
    env = {**os.environ, "RULES_AGENT_RECORD": str(tmp_path / "record.jsonl")}
    return AgentProcess(
        index, sys.executable, [RULES_AGENT], env, str(tmp_path), "bypass-permissions", lambda *a: None
    )


async def test_initialize_and_prompt(tmp_path: Path) -> None:
    proc = _process(tmp_path)
    await proc.start()
    try:
        assert proc.protocol_version == 1
        session = await proc.request("session/new", {"cwd": str(tmp_path), "mcpServers": []})
        outcome = await proc.prompt(
            session["sessionId"], [_block("silent")], idle_timeout=10, max_duration=30
        )
        assert (outcome.stop_reason, outcome.failure) == ("end_turn", None)
        assert outcome.usage is not None and outcome.usage["totalTokens"] >= 0
    finally:
        await proc.kill()
    assert not proc.alive


async def test_idle_timeout_cancels_and_replaces_the_subprocess(tmp_path: Path) -> None:
    proc = _process(tmp_path)
    await proc.start()
    try:
        session = await proc.request("session/new", {"cwd": str(tmp_path), "mcpServers": []})
        outcome = await proc.prompt(
            session["sessionId"], [_block("sleep 30")], idle_timeout=1, max_duration=30
        )
    finally:
        await proc.kill()
    assert outcome.failed and outcome.failure is not None and "idle timeout" in outcome.failure
    assert outcome.stop_reason == "cancelled"  # it answered session/cancel within the grace
    assert not proc.alive  # and was killed anyway; the pool respawns it


async def test_max_turn_duration_and_respawn(tmp_path: Path) -> None:
    pool = AgentPool(1, lambda i: _process(tmp_path, i))
    try:
        first = await pool.ensure(0)
        session = await first.request("session/new", {"cwd": str(tmp_path), "mcpServers": []})
        outcome = await first.prompt(
            session["sessionId"], [_block("sleep 30")], idle_timeout=30, max_duration=1
        )
        assert outcome.failure is not None and "max turn duration" in outcome.failure
        assert pool.process(0) is None
        second = await pool.ensure(0)  # re-initialized replacement
        assert second is not first and second.alive and second.protocol_version == 1
    finally:
        await pool.close()
