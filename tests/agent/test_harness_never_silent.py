"""Never silent (issue 14 items 1, 2, 3, 6): a refused author, a dead backend, a bad command and
a failing sibling each end in something visible — and only once."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from buzz.core.event import Event
from buzz.core.nip19 import npub
from buzz.core.nip_oa import build_auth_tag
from tests.agent.support import OPENAI_AGENT, Workspace, add_member, set_profile
from tests.support.deadline import scaled
from tests.support.relay import Identity

BUZZ = str(Path(sys.executable).with_name("buzz"))


def _answered(ws: Workspace, event: Event):
    return lambda e: bool(ws.watcher.answers_to(event, ws.agent.pubkey))


def _noticed(ws: Workspace, event: Event, kind: str):
    return lambda e: bool(ws.watcher.notices_to(event, ws.agent.pubkey, kind))


def _messages(caplog: pytest.LogCaptureFixture, level: int = logging.INFO) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= level and r.name.startswith("buzz.agent")]


async def test_refused_author_gets_one_notice_per_hour(
    ws: Workspace, bob: Identity, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="buzz.agent")
    async with ws.harness():
        first = await ws.post(bob, "ping", mention=ws.agent.pubkey)
        await ws.watcher.wait_for(_noticed(ws, first, "not-admitted"), what="not-admitted notice")
        again = await ws.post(bob, "ping again", mention=ws.agent.pubkey)
        unmentioned = await ws.post(bob, "just chatting")
        marker = await ws.post(ws.owner, "echo marker", mention=ws.agent.pubkey)
        await ws.watcher.wait_for(_answered(ws, marker), what="owner's answer")
    notice = ws.watcher.notices_to(first, ws.agent.pubkey)
    assert len(notice) == 1 and ws.watcher.answers_to(first, ws.agent.pubkey) == []
    assert "my owner (Olivia) and agents they own" in notice[0].content
    # it names the owner and the one command (or click) that lets this asker in (issue 27 item 3)
    assert "Ask my owner Olivia for access" in notice[0].content
    assert f"--respond-to allowlist --allow {npub(bob.pubkey)}`" in notice[0].content
    assert [list(t) for t in notice[0].tags] == [
        ["h", ws.channel],
        ["e", first.id, "", "reply"],
        ["buzz:agent-notice", "not-admitted"],
        ["buzz:asker", bob.pubkey, "owner-only"],
    ]
    # once per author and channel per hour; never for a message that did not mention the agent
    assert ws.watcher.replies_to(again, ws.agent.pubkey) == []
    assert ws.watcher.replies_to(unmentioned, ws.agent.pubkey) == []
    assert "respond-to owner-only: answering my owner (Olivia) and agents they own" in _messages(caplog)


async def test_members_mode_answers_members_of_the_channel(
    ws: Workspace, bob: Identity, carol: Identity
) -> None:
    await add_member(ws.owner_client, ws.owner, ws.channel, bob.pubkey)
    async with ws.harness(respond_to="members"):
        member = await ws.post(bob, "echo from a member", mention=ws.agent.pubkey)
        outsider = await ws.post(carol, "echo from outside", mention=ws.agent.pubkey)
        await ws.watcher.wait_for(_answered(ws, member), what="answer to the member")
        await ws.watcher.wait_for(_noticed(ws, outsider, "not-admitted"), what="notice to the outsider")
    assert ws.watcher.answers_to(outsider, ws.agent.pubkey) == []
    assert "members of this channel" in ws.watcher.notices_to(outsider, ws.agent.pubkey)[0].content


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def test_backend_down_says_retrying_then_fails_once(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="buzz.agent")
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{_closed_port()}/v1")  # refuses connections
    async with ws.harness(agent_args=OPENAI_AGENT, max_attempts=3, retry_backoff=0.2):
        mention = await ws.post(ws.owner, "hello?", mention=ws.agent.pubkey)
        await ws.watcher.wait_for(_noticed(ws, mention, "retrying"), what="retrying notice")
        await ws.watcher.wait_for(_noticed(ws, mention, "failure"), what="failure notice")
        await asyncio.sleep(0.3)
    notices = ws.watcher.replies_to(mention, ws.agent.pubkey)
    assert [ws.watcher.notices_to(mention, ws.agent.pubkey, k) != [] for k in ("retrying", "failure")] == [
        True,
        True,
    ]
    assert len(notices) == 2 and "retrying" in notices[0].content  # retrying first, then the failure
    attempts = [m for m in _messages(caplog) if "failed (attempt" in m]
    assert len(attempts) == 3 and "attempt 3 of 3" in attempts[-1]
    # tracebacks only at DEBUG: nothing at INFO or above looks like one
    loud = _messages(caplog)
    assert not [m for m in loud if "Traceback" in m or m.split("stderr: ", 1)[-1].startswith("  File ")]
    assert any("Traceback" in m for m in _messages(caplog, logging.DEBUG))


def _run_cli(ws: Workspace, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "BUZZ_PRIVATE_KEY": ws.agent.secret, "BUZZ_AUTH_TAG": json.dumps(ws.auth_tag)}
    cmd = [BUZZ, "agent", "run", "--relay", ws.relay.url, *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60, cwd=ws.tmp)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--agent-command", sys.executable, "--agent-args", OPENAI_AGENT, "--mcp-command", "/nonexistent"], "--mcp-command '/nonexistent' does not start"),
        (["--agent-command", "/nonexistent"], "--agent-command '/nonexistent' does not start"),
        (["--agent-command", sys.executable, "--agent-args", "-c,pass"], "--agent-command"),
    ],
)  # fmt: skip
async def test_bad_agent_or_mcp_command_is_refused_at_start(
    ws: Workspace, args: list[str], needle: str
) -> None:
    result = await asyncio.to_thread(_run_cli, ws, *args)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    # one clear line: the JSON error last, before it at most the INFO start-up lines
    assert not [line for line in lines[:-1] if " INFO " not in line], result.stderr
    assert "Traceback" not in result.stderr
    error = json.loads(lines[-1])
    assert error["error"] == "user_error" and needle in error["message"]


async def test_siblings_never_start_a_turn_on_a_failure_notice(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    sibling = Identity.new()
    tag = build_auth_tag(ws.owner.secret, sibling.pubkey)
    async with ws.relay.client(sibling, auth_tags=[tag]) as client:
        await set_profile(client, sibling, "Sister", tag)
    await add_member(ws.owner_client, ws.owner, ws.channel, sibling.pubkey, "bot")
    sister_config = ws.config(
        private_key=sibling.secret,
        auth_tag=json.dumps(tag),
        subscribe="all",
        kinds="9",
        no_typing=True,
        catch_up=0,
        max_attempts=1,
    )
    from buzz.agent.harness import Harness
    from buzz.agent.identity import resolve_identity

    sister = Harness(sister_config, resolve_identity(sister_config), cwd=str(ws.tmp))
    task = asyncio.create_task(sister.run())
    try:
        await asyncio.wait_for(sister.ready.wait(), scaled(30))
        async with ws.harness(max_attempts=1):
            failing = await ws.post(ws.owner, "fail", mention=ws.agent.pubkey)
            notice = await ws.watcher.wait_for(_noticed(ws, failing, "failure"), what="failure notice")
            marker = await ws.post(ws.owner, "echo marker")  # the sister answers every message
            await ws.watcher.wait_for(
                lambda e: bool(ws.watcher.answers_to(marker, sibling.pubkey)), what="sister"
            )
    finally:
        await sister.request_shutdown()
        await asyncio.wait_for(task, scaled(30))
    # the sister answered the owner's messages but never the failure notice
    assert ws.watcher.replies_to(notice, sibling.pubkey) == []
    assert not [r for r in ws.records("prompt") if notice.id in "".join(r["blocks"])]
