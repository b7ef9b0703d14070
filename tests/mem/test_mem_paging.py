"""`buzz mem ls` pages past the relay's clamp (issue 16 item 2): with more newer records than
one page holds, the older live entry is still listed and the listing says it is complete."""

from __future__ import annotations

import time

from buzz.core import engram
from buzz.core.filters import MAX_LIMIT
from tests.mem.cli import buzz_mem
from tests.support.relay import Identity, RunningRelay

TOMBSTONES = MAX_LIMIT + 5


async def test_ls_pages_past_the_clamp(sqlite_relay: RunningRelay, alice: Identity, bob: Identity) -> None:
    agent, owner = alice, bob
    start = int(time.time()) - 850  # inside the relay's 900 s past-drift window
    events = [engram.build_event(agent.secret, owner.pubkey, engram.MemoryBody("mem/keep", "kept"), start)]
    events += [
        engram.build_event(
            agent.secret, owner.pubkey, engram.MemoryBody(f"mem/gone/{i}", None), start + 1 + i // 2
        )
        for i in range(TOMBSTONES)
    ]
    async with sqlite_relay.client(agent) as c:
        for event in events:
            result = await c.publish(event)
            assert result.accepted, result.message

    r = await buzz_mem(sqlite_relay, agent, "ls", "--owner", owner.pubkey, "--status")
    assert r.code == 0, r.stderr
    report = r.json
    assert [e["slug"] for e in report["entries"]] == ["mem/keep"]
    assert (report["complete"], report["reason"]) == (True, None)
    assert report["records"] == TOMBSTONES + 1 and report["pages"] >= 2
    assert "incomplete" not in r.stderr

    plain = await buzz_mem(sqlite_relay, bob, "ls", "--agent", agent.pubkey)
    assert [e["slug"] for e in plain.json] == ["mem/keep"]


async def test_one_second_over_a_page_is_reported_incomplete(
    sqlite_relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    agent, owner = alice, bob
    second = int(time.time()) - 60
    async with sqlite_relay.client(agent) as c:
        for i in range(MAX_LIMIT + 1):
            body = engram.MemoryBody(f"mem/n/{i}", "v")
            result = await c.publish(engram.build_event(agent.secret, owner.pubkey, body, second))
            assert result.accepted, result.message
    r = await buzz_mem(sqlite_relay, agent, "ls", "--owner", owner.pubkey, "--status")
    assert r.code == 0, r.stderr
    assert r.json["complete"] is False and str(second) in r.json["reason"]
    assert len(r.json["entries"]) == MAX_LIMIT
    assert "warning: listing incomplete" in r.stderr
