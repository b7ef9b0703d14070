"""The harness's work status, kind 30181 (jobs spec §12.3, checklist item 58): `idle` when it
starts serving a channel, `working` at turn start naming the request, `queued` counts of a
channel waiting for a busy agent, at most one snapshot per channel per 5 s between turn
boundaries, and `idle` with `queued: 0` for every channel on graceful exit;
`--no-work-status` publishes none. Real harness, real relay, the rules agent as the real ACP
subprocess, and a pool of one, so a second channel waits while the first one's turn runs."""

from __future__ import annotations

import itertools
from typing import Any

import orjson

from buzz.core.event import Event
from tests.agent.support import Workspace, add_member, create_channel

KIND = 30181


def _body(event: Event) -> dict[str, Any]:
    return orjson.loads(event.content)


def _snapshots(ws: Workspace, channel: str) -> list[Event]:
    return [e for e in ws.watcher.of(KIND, ws.agent.pubkey) if e.tag_values("h") == [channel]]


def _is(ws: Workspace, channel: str, after: Event | None = None, **want: Any):
    def match(e: Event) -> bool:
        if e.kind != KIND or e.pubkey != ws.agent.pubkey or e.tag_values("h") != [channel]:
            return False
        if after is not None and e.created_at <= after.created_at:
            return False
        body = _body(e)
        return all(body.get(k) == v for k, v in want.items())

    return match


async def test_snapshots_follow_the_turns_and_the_queue(ws: Workspace) -> None:
    eng = await create_channel(ws.owner_client, ws.owner, "eng")
    await add_member(ws.owner_client, ws.owner, eng, ws.agent.pubkey, "bot")
    await ws.watch(eng)
    async with ws.harness(agents=1) as harness:
        for channel in (ws.channel, eng):
            await ws.watcher.wait_for(_is(ws, channel, status="idle", queued=0), what="idle at start")
        long = await ws.post(ws.owner, "@Rulesbot sleep 60\nand more", mention=ws.agent.pubkey)
        working = await ws.watcher.wait_for(_is(ws, ws.channel, status="working"), what="working")
        # the only worker is busy: #eng's mentions wait, and its snapshot counts them
        for i in range(3):
            await ws.post(ws.owner, f"@Rulesbot echo {i}", mention=ws.agent.pubkey, channel=eng)
        await ws.watcher.wait_for(_is(ws, eng, status="idle", queued=3), what="#eng queued 3")
        await ws.post(ws.owner, "@Rulesbot !cancel", mention=ws.agent.pubkey, reply_to=long)
        ended = await ws.watcher.wait_for(_is(ws, ws.channel, status="complete"), what="complete")
        await ws.watcher.wait_for(_is(ws, eng, status="working"), what="#eng working")
        await ws.watcher.wait_for(_is(ws, eng, status="complete"), what="#eng complete")
        await ws.watcher.wait_for(
            _is(ws, ws.channel, ended, status="idle", queued=0), what="idle after the turn"
        )
        assert harness.runtime.work.enabled
    # graceful exit: the snapshot each channel keeps is `idle`, nothing queued
    async with ws.relay.client(ws.owner) as reader:
        kept = await reader.query([{"kinds": [KIND], "authors": [ws.agent.pubkey]}])
    assert sorted(e.d_tag for e in kept) == sorted([ws.channel, eng])
    assert {(_body(e)["status"], _body(e)["queued"]) for e in kept} == {("idle", 0)}

    body = _body(working)
    assert working.tag_values("d") == [ws.channel]
    assert body["source"] == "buzz-agent-harness" and body["v"] == 1
    assert body["activity"][0] == {
        "at": body["activity"][0]["at"],
        "kind": "message",
        "title": "sleep 60",  # what it works on: the request's first line, without the mention
        "status": "running",
    }
    assert body["respondTo"] == "owner-only" and body["queued"] == 0 and body["turnId"]
    end = _body(ended)
    assert (end["turnId"], end["stopReason"]) == (body["turnId"], "cancelled") and end["completedAt"]
    assert ended.created_at > working.created_at  # the later snapshot wins its address

    # between turn boundaries, at most one snapshot per channel per 5 s: #eng's snapshots
    # before its turn started are all paced (boundaries are `working` / `complete` / `error`)
    eng_snapshots = _snapshots(ws, eng)
    first_turn = next(i for i, e in enumerate(eng_snapshots) if _body(e)["status"] == "working")
    paced = eng_snapshots[:first_turn]
    assert [_body(e)["queued"] for e in paced][-1] == 3
    assert all(b.created_at - a.created_at >= 5 for a, b in itertools.pairwise(paced))


async def test_no_work_status_publishes_none(ws: Workspace) -> None:
    async with ws.harness(no_work_status=True) as harness:
        asked = await ws.post(ws.owner, "@Rulesbot ping", mention=ws.agent.pubkey)
        await ws.watcher.wait_for(lambda e: bool(ws.watcher.answers_to(asked, ws.agent.pubkey)), what="pong")
        assert not harness.runtime.work.enabled
    async with ws.relay.client(ws.owner) as reader:
        assert await reader.query([{"kinds": [KIND], "authors": [ws.agent.pubkey]}]) == []
