"""Events arriving during a turn (agents.md §4.8): steer re-prompts the same session with the
interrupted batch and the new events; queue runs them as the next batch."""

from __future__ import annotations

from buzz.core.event import Event
from tests.agent.support import SPEECH, Workspace


async def _turn_started(ws: Workspace, event: Event) -> None:
    await ws.watcher.wait_for(
        lambda e: e.kind == 7 and e.content == SPEECH and e.tag_values("e") == [event.id], what="turn start"
    )


async def test_steer_reprompts_the_same_session_with_both_messages(ws: Workspace) -> None:
    async with ws.harness():  # steer is the default
        long = await ws.post(ws.owner, "sleep 20", mention=ws.agent.pubkey)
        await _turn_started(ws, long)
        late = await ws.post(ws.owner, "ping", mention=ws.agent.pubkey)
        await ws.watcher.wait_for(
            lambda e: bool(ws.watcher.replies_to(late, ws.agent.pubkey)), what="steered reply"
        )
    prompts = ws.records("prompt")
    assert len(prompts) == 2 and len(ws.records("cancelled")) == 1
    assert prompts[0]["session_id"] == prompts[1]["session_id"]  # same session (§9.2 item 25)
    blocks = prompts[1]["blocks"]
    wip = next(b for b in blocks if b.startswith("[Interrupted work"))
    new = next(b for b in blocks if b.startswith("[New events during that work"))
    assert f"Event ID: {long.id}" in wip and "Content:\nsleep 20" in wip
    assert f"Event ID: {late.id}" in new and long.id not in new
    assert blocks.index(wip) < blocks.index(new)
    assert not any(b.startswith("[Buzz event") for b in blocks)
    reply = ws.watcher.replies_to(late, ws.agent.pubkey)[0]
    assert reply.content.startswith("steered: pong")
    # the interrupted batch is not retried on its own, and no second reply appears
    assert [e.content.split(" [")[0] for e in ws.watcher.of(9, ws.agent.pubkey)] == ["steered: pong"]


async def test_queue_mode_runs_them_in_order(ws: Workspace) -> None:
    async with ws.harness(multiple_event_handling="queue"):
        first = await ws.post(ws.owner, "sleep 1", mention=ws.agent.pubkey)
        await _turn_started(ws, first)
        second = await ws.post(ws.owner, "ping", mention=ws.agent.pubkey)
        await ws.watcher.wait_for(
            lambda e: bool(ws.watcher.replies_to(second, ws.agent.pubkey)), what="second reply"
        )
    replies = [e.content.split(" [")[0] for e in ws.watcher.of(9, ws.agent.pubkey)]
    assert replies == ["slept 1", "pong"]
    prompts = ws.records("prompt")
    assert [p["session_id"] for p in prompts] == [prompts[0]["session_id"]] * 2
    assert ws.records("cancelled") == []
    assert first.id in "".join(prompts[0]["blocks"]) and first.id not in "".join(prompts[1]["blocks"])
    assert second.id in "".join(prompts[1]["blocks"])
