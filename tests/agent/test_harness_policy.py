"""The owner steers a running agent (jobs spec §10.1, checklist items 51–54): whom it answers
and its parallelism follow the owner's 30177 without a restart; anyone else's record changes
nothing; a refused asker is told whom to ask and how."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

from buzz.agent.harness import Harness
from buzz.core.event import Event
from tests.agent.support import Workspace, add_member, publish
from tests.support.relay import Identity


async def _until(check: Callable[[], bool], what: str) -> None:
    for _ in range(300):
        if check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"never: {what}")


async def _managed(ws: Workspace, who: Identity, body: dict, at: int | None = None) -> Event:
    event = Event.create(who.secret, 30177, json.dumps(body), [["d", ws.agent.pubkey]], created_at=at)
    if who == ws.owner:
        return await publish(ws.owner_client, event)
    async with ws.relay.client(who) as c:
        return await publish(c, event)


def _answered(ws: Workspace, event: Event):
    return lambda e: bool(ws.watcher.answers_to(event, ws.agent.pubkey))


async def test_respond_to_follows_the_owners_record_live(ws: Workspace, bob: Identity) -> None:
    await add_member(ws.owner_client, ws.owner, ws.channel, bob.pubkey)
    async with ws.harness() as harness:
        refused = await ws.post(bob, "echo let me in", mention=ws.agent.pubkey)
        notice = await ws.watcher.wait_for(
            lambda e: bool(ws.watcher.notices_to(refused, ws.agent.pubkey)), what="the not-admitted notice"
        )
        (text,) = [n.content for n in ws.watcher.notices_to(refused, ws.agent.pubkey)]
        assert "Ask my owner Olivia for access" in text and "buzz agents managed set --agent npub1" in text, (
            text
        )
        assert notice is not None
        # someone else's record for this agent changes nothing
        await _managed(ws, bob, {"respond_to": "anyone"})
        await _managed(ws, ws.owner, {"respond_to": "members", "parallelism": 1})
        await _until(lambda: harness.runtime.policy.respond_to == "members", "members applied")
        admitted = await ws.post(bob, "echo now I am in", mention=ws.agent.pubkey)
        await ws.watcher.wait_for(_answered(ws, admitted), timeout=30, what="the member's answer")
        await ws.next_second()
        await _managed(ws, ws.owner, {"respond_to": "owner-only"})
        await _until(lambda: harness.runtime.policy.respond_to == "owner-only", "owner-only again")
    assert [a.content.split(" [")[0] for a in ws.watcher.answers_to(admitted, ws.agent.pubkey)] == [
        "now I am in"
    ]
    assert ws.watcher.answers_to(refused, ws.agent.pubkey) == []


async def test_a_record_from_another_author_is_never_applied(ws: Workspace, bob: Identity) -> None:
    await _managed(ws, bob, {"respond_to": "anyone", "parallelism": 4})
    async with ws.harness() as harness:
        assert harness.policy is not None and harness.runtime.policy.source == "flags"
        await _managed(ws, ws.owner, {"respond_to": "nobody"})
        await _until(lambda: harness.runtime.policy.respond_to == "nobody", "nobody applied")
        assert harness.runtime.pool.limit == 1


async def test_parallelism_grows_and_shrinks_the_pool(ws: Workspace) -> None:
    async with ws.harness() as harness:
        pool = harness.runtime.pool
        await _managed(ws, ws.owner, {"parallelism": 3})
        await _until(lambda: pool.limit == 3 and all(pool.process(i) for i in range(3)), "three workers")
        await ws.next_second()
        await _managed(ws, ws.owner, {"parallelism": 1})
        await _until(
            lambda: pool.limit == 1 and pool.process(1) is None and pool.process(2) is None, "one worker"
        )


async def test_modes_outside_the_allowed_list_are_ignored(ws: Workspace) -> None:
    async with ws.harness(allowed_respond_to="owner-only,members") as harness:
        await _managed(ws, ws.owner, {"respond_to": "anyone", "parallelism": 2})
        await _until(lambda: harness.runtime.pool.limit == 2, "parallelism applied")
        assert harness.runtime.policy.respond_to == "owner-only"
    async with ws.harness(no_managed_policy=True) as harness:
        assert isinstance(harness, Harness) and harness.policy is None
        assert harness.runtime.policy.respond_to == "owner-only"
