"""relay.md §12.2 item 2 across replicas: the newest 20001 per pubkey in a Redis key with a
90 s TTL, so presence set on one replica is served on the other."""

from __future__ import annotations

import asyncio
import time

import orjson
import pytest
from redis.asyncio import Redis

from buzz.core.event import Event
from tests.support.relay import Identity, RunningRelay
from tests.workspace.helpers import accepted, create_channel, put_user

pytestmark = [pytest.mark.redis, pytest.mark.postgres]

Pair = tuple[RunningRelay, RunningRelay]


async def test_presence_set_on_a_is_served_on_b_newest_wins(
    replicas: Pair, redis: Redis, workspace_id: str, alice: Identity, bob: Identity
) -> None:
    a, b = replicas
    key = f"buzz:{workspace_id}:presence:{alice.pubkey}"
    flt = {"kinds": [20001], "authors": [alice.pubkey]}
    t = int(time.time())
    async with a.client(alice) as alice_a, b.client(alice) as alice_b, b.client(bob) as bob_b:
        assert await bob_b.query([flt]) == []
        online = Event.create(alice.secret, 20001, "online", created_at=t - 2)
        await accepted(alice_a, online)
        assert [e.id for e in await bob_b.query([flt])] == [online.id]
        assert 0 < await redis.pttl(key) <= 90_000
        stored = orjson.loads(await redis.get(key))
        assert stored == {"v": 1, "created_at": t - 2, "channel_id": None, "event": online.to_dict()}

        older = Event.create(alice.secret, 20001, "busy", created_at=t - 5)
        await accepted(alice_b, older)  # older than the newest, and on the other replica
        assert [e.id for e in await bob_b.query([flt])] == [online.id]

        await accepted(alice_b, Event.create(alice.secret, 20001, "offline", created_at=t))
        async with a.client(bob) as bob_a:
            assert await bob_a.query([flt]) == []  # offline set on B clears it on A
        assert orjson.loads(await redis.get(key))["event"] is None


async def test_channel_presence_on_b_follows_readability(
    replicas: Pair, alice: Identity, bob: Identity
) -> None:
    a, b = replicas
    async with a.client(alice) as alice_a, b.client(bob) as bob_b:
        channel = await create_channel(alice_a, alice, "private")
        status = Event.create(alice.secret, 20001, "online", [["h", channel]])
        await accepted(alice_a, status)
        flt = {"kinds": [20001], "authors": [alice.pubkey]}
        assert await bob_b.query([flt]) == []  # not a reader of the channel
        await put_user(alice_a, alice, channel, bob.pubkey)
        # B cached "not a reader"; the access_changed from A drops that at once (not after 10 s).
        deadline = time.monotonic() + 2
        while not (found := [e.id for e in await bob_b.query([flt])]) and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        assert found == [status.id]
