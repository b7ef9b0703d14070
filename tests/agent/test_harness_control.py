"""Owner control commands `!cancel`, `!rotate`, `!shutdown` (agents.md §4.5, §9.2 item 19)."""

from __future__ import annotations

import asyncio
import json
import os
import sys

import orjson

from buzz.core.event import Event
from tests.agent.support import RULES_AGENT, SPEECH, Workspace
from tests.support.deadline import scaled


def _outcomes(ws: Workspace) -> list[dict[str, str]]:
    return [orjson.loads(e.content) for e in ws.watcher.of(40099, ws.agent.pubkey)]


def _outcome(ws: Workspace, kind: str):
    return lambda e: (
        e.kind == 40099 and e.pubkey == ws.agent.pubkey and orjson.loads(e.content)["type"] == kind
    )


def _session_of(reply: Event) -> str:
    return reply.content.split("session=")[1].split()[0]


async def _reply(ws: Workspace, event: Event) -> Event:
    await ws.watcher.wait_for(
        lambda e: bool(ws.watcher.replies_to(event, ws.agent.pubkey)), what=f"reply to {event.content!r}"
    )
    return ws.watcher.replies_to(event, ws.agent.pubkey)[0]


async def test_cancel_stops_a_long_turn_and_posts_the_outcome(ws: Workspace) -> None:
    async with ws.harness():
        idle = await ws.post(ws.owner, "!cancel", mention=ws.agent.pubkey)
        await ws.watcher.wait_for(_outcome(ws, "agent_cancel_noop"), what="cancel no-op outcome")
        long = await ws.post(ws.owner, "sleep 30", mention=ws.agent.pubkey)
        await ws.watcher.wait_for(
            lambda e: e.kind == 7 and e.content == SPEECH and e.tag_values("e") == [long.id],
            what="turn start",
        )
        cancel = await ws.post(ws.owner, "!cancel", mention=ws.agent.pubkey, reply_to=long)
        outcome = await ws.watcher.wait_for(_outcome(ws, "agent_turn_cancelled"), what="cancel outcome")
        after = await ws.post(ws.owner, "ping", mention=ws.agent.pubkey)
        reply = await _reply(ws, after)
    assert orjson.loads(outcome.content) == {
        "type": "agent_turn_cancelled",
        "actor": ws.owner.pubkey,
        "target": ws.agent.pubkey,
        "channel_id": ws.channel,
    }
    # the command was a reply in the thread rooted at the long turn's event
    assert [list(t) for t in outcome.tags] == [["h", ws.channel], ["e", long.id, "", "reply"]]
    assert ws.watcher.answers_to(long, ws.agent.pubkey) == []  # the batch was dropped
    # the person sees the turn end (issue 27 item 5)
    assert [e.content for e in ws.watcher.notices_to(long, ws.agent.pubkey)] == ["stopped by Olivia"]
    cancelled = ws.records("cancelled")
    assert len(cancelled) == 1
    # commands never reach ACP and are consumed: no prompt carries them, no reaction on them
    assert all(c.id not in b for p in ws.records("prompt") for b in p["blocks"] for c in (idle, cancel))
    assert not [e for e in ws.watcher.of(7, ws.agent.pubkey) if e.tag_values("e")[0] in (idle.id, cancel.id)]
    # the cancelled session was invalidated: the next mention runs in a new one
    assert _session_of(reply) != cancelled[0]["session_id"]


async def test_rotate_gives_the_next_mention_a_fresh_session(ws: Workspace) -> None:
    async with ws.harness():
        noop = await ws.post(ws.owner, "!rotate", mention=ws.agent.pubkey)
        await ws.watcher.wait_for(_outcome(ws, "agent_rotate_noop"), what="rotate no-op")
        first = await _reply(ws, await ws.post(ws.owner, "ping", mention=ws.agent.pubkey))
        same = await _reply(ws, await ws.post(ws.owner, "echo same", mention=ws.agent.pubkey))
        await ws.post(ws.owner, "  !rotate \n", mention=ws.agent.pubkey)
        await ws.watcher.wait_for(_outcome(ws, "agent_session_rotated"), what="rotate outcome")
        fresh = await _reply(ws, await ws.post(ws.owner, "echo fresh", mention=ws.agent.pubkey))
    assert _session_of(first) == _session_of(same)
    assert _session_of(fresh) != _session_of(first)
    assert [o["type"] for o in _outcomes(ws)] == ["agent_rotate_noop", "agent_session_rotated"]
    assert [list(t) for t in ws.watcher.of(40099, ws.agent.pubkey)[0].tags] == [["h", ws.channel]]
    assert noop.id not in json.dumps(ws.records("prompt"))
    assert len(ws.records("session_new")) == 2


async def test_shutdown_exits_zero(ws: Workspace) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BUZZ_")}
    env.update(
        BUZZ_PRIVATE_KEY=ws.agent.secret,
        BUZZ_RELAY_URL=ws.relay.url,
        BUZZ_AUTH_TAG=json.dumps(ws.auth_tag),
        BUZZ_ACP_AGENT_COMMAND=sys.executable,
        BUZZ_ACP_AGENT_ARGS=RULES_AGENT,
    )
    proc = await asyncio.create_subprocess_exec(
        os.path.join(os.path.dirname(sys.executable), "buzz"),
        "agent",
        "run",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        cwd=str(ws.tmp),
    )
    try:
        assert proc.stderr is not None
        while True:  # ready once it serves its channels (startup step 7 logged)
            line = await asyncio.wait_for(proc.stderr.readline(), scaled(30))
            assert line, "harness exited during startup"
            if b"serving 1 channel(s)" in line:
                break
        drain = asyncio.create_task(proc.stderr.read())  # keep the log pipe from filling up
        await ws.post(ws.owner, "!shutdown", mention=ws.agent.pubkey)
        code = await asyncio.wait_for(proc.wait(), scaled(30))
        log = (await drain).decode()
        assert ws.agent.secret not in log  # the key never reaches a log line
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert code == 0
    await ws.watcher.wait_for(_outcome(ws, "agent_shutdown"), what="shutdown outcome")
    assert ws.records("prompt") == []
