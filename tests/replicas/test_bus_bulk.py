"""The bus reads Redis in bulk and drops its echoes unparsed (decisions 351, 352): what that must
keep and what it changes, on two real replicas, one PostgreSQL, one Redis."""

from __future__ import annotations

import json

import orjson
import pytest
from redis.asyncio import Redis

from buzz.core.event import Event
from tests.replicas.helpers import nothing_more, wait_until
from tests.support.relay import Identity, RunningRelay
from tests.workspace.helpers import accepted, live

pytestmark = [pytest.mark.redis, pytest.mark.postgres]

Pair = tuple[RunningRelay, RunningRelay]
BURST = 400  # events of ~3 KiB in one pipeline: several socket reads, replies split across them


async def test_an_echo_is_dropped_before_its_payload_is_parsed(
    replicas: Pair, redis: Redis, workspace_id: str, alice: Identity
) -> None:
    """A's own event id read off the raw bytes is enough to drop the message: a copy whose
    JSON is cut short after the id is an echo on A, not a bad payload (before decision 352 it
    was parsed first and counted as one)."""
    a, _ = replicas
    async with a.client(alice) as on_a:
        note = Event.create(alice.secret, 1, "mine")
        await accepted(on_a, note)
        await wait_until(lambda: a.relay.stats["bus_echo_dropped"] >= 1, what="A to drop its echo")
        echoes, bad = a.relay.stats["bus_echo_dropped"], a.relay.stats["bus_bad_payload"]
        cut = b'{"v":1,"channel_id":null,"event":{"id":"%s","pubkey":' % note.id.encode()
        await redis.publish(f"buzz:{workspace_id}:global", cut)
        await wait_until(lambda: a.relay.stats["bus_echo_dropped"] > echoes, what="A to drop the cut copy")
        assert a.relay.stats["bus_bad_payload"] == bad


async def test_a_payload_of_another_encoder_is_delivered_once_and_its_echo_dropped(
    replicas: Pair, redis: Redis, workspace_id: str, alice: Identity, bob: Identity
) -> None:
    """§12.4 item 1 fixes the payload's fields, not their order or spacing: a payload written
    by another encoder (keys reordered, spaces after separators: the raw id check finds no
    `"id":"`) reaches B's subscriber once, and a second copy of it is dropped by the echo
    cache after parsing."""
    _, b = replicas
    event = Event.create(alice.secret, 1, "from elsewhere")
    payload = json.dumps({"event": event.to_dict(), "channel_id": None, "v": 1}).encode()
    assert b'"id":"' not in payload
    async with b.client(bob) as on_b:
        sub = await live(on_b, {"kinds": [1], "authors": [alice.pubkey]})
        received, echoes = b.relay.stats["bus_received"], b.relay.stats["bus_echo_dropped"]
        await redis.publish(f"buzz:{workspace_id}:global", payload)
        assert (await sub.next()).id == event.id
        await redis.publish(f"buzz:{workspace_id}:global", payload)
        await wait_until(lambda: b.relay.stats["bus_echo_dropped"] > echoes, what="B to drop the copy")
        assert b.relay.stats["bus_received"] == received + 1
        await nothing_more(sub)


async def test_a_burst_larger_than_one_read_arrives_whole_and_in_order(
    replicas: Pair, redis: Redis, workspace_id: str, alice: Identity, bob: Identity
) -> None:
    """Messages split across socket reads are parsed whole: every event of a burst published
    in one pipeline reaches B's subscriber once, in publication order."""
    _, b = replicas
    events = [Event.create(alice.secret, 1, f"{i} " + "x" * 3000) for i in range(BURST)]
    async with b.client(bob) as on_b:
        sub = await live(on_b, {"kinds": [1], "authors": [alice.pubkey]})
        received = b.relay.stats["bus_received"]
        pipe = redis.pipeline(transaction=False)
        for event in events:
            pipe.publish(
                f"buzz:{workspace_id}:global",
                orjson.dumps({"v": 1, "channel_id": None, "event": event.to_dict()}),
            )
        await pipe.execute()
        got = [(await sub.next(timeout=30)).id for _ in events]
        assert got == [e.id for e in events]
        assert b.relay.stats["bus_received"] == received + BURST
        await nothing_more(sub)
