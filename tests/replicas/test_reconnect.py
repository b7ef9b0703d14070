"""relay.md §12.4 items 2 and 3 when Redis goes away: publishes fail (echo entry removed, local
delivery unharmed), the listener backs off from 1 s and resubscribes every wanted topic.

The shared Redis is never restarted: this test runs its own `redis-server` on a free port.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from redis.asyncio import Redis

from buzz.core.event import Event
from tests.replicas.conftest import replica_pair
from tests.replicas.helpers import subscribers, wait_until
from tests.replicas.own_redis import OwnRedis, own_redis
from tests.support.relay import Identity
from tests.workspace.helpers import accepted, create_channel, live, message

pytestmark = [pytest.mark.redis, pytest.mark.postgres]


@pytest.fixture
async def private_redis(tmp_path: Path) -> AsyncIterator[OwnRedis]:
    async with own_redis(tmp_path / "redis") as server:
        yield server


async def test_replicas_survive_a_redis_restart(
    tmp_path: Path, private_redis: OwnRedis, alice: Identity, bob: Identity
) -> None:
    async with replica_pair(tmp_path, private_redis.url, "restart") as (a, b):
        bus_a, bus_b = a.relay.bus, b.relay.bus
        assert bus_a is not None and bus_b is not None
        async with a.client(alice) as on_a, b.client(bob) as on_b:
            channel = await create_channel(on_a, alice, "open")
            remote = await live(on_b, {"#h": [channel], "kinds": [9]})
            local = await live(on_a, {"#h": [channel], "kinds": [9]})

            await private_redis.stop()
            await wait_until(lambda: not bus_b.connected, 5, "B to notice the loss")
            lost = await message(on_a, alice, channel, "while Redis is down")
            assert (await local.next()).id == lost.id  # local delivery does not need Redis
            await wait_until(lambda: lost.id not in bus_a.echo, 5, "the failed publish")
            assert a.relay.stats["bus_publish_failed"] >= 1

            await private_redis.start()
            await wait_until(lambda: bus_a.connected and bus_b.connected, 10, "both to reconnect")
            assert b.relay.stats["bus_reconnects"] >= 1
            probe = Redis.from_url(private_redis.url)
            try:
                topic = f"buzz:restart:channel:{channel}"
                for _ in range(100):  # both resubscribe the channel topic their subscribers name
                    if await subscribers(probe, topic) == 2:
                        break
                    await asyncio.sleep(0.02)
                assert await subscribers(probe, topic) == 2
            finally:
                await probe.aclose()
            back = await message(on_a, alice, channel, "after the restart")
            assert (await remote.next()).id == back.id  # `lost` never reached B; `back` does
            assert (await local.next()).id == back.id
            note = Event.create(bob.secret, 1, "global after the restart")
            everyone = await live(on_a, {"kinds": [1]})
            await accepted(on_b, note)
            assert (await everyone.next()).id == note.id


async def test_listener_backs_off_1_2_4_seconds_while_redis_is_down(
    tmp_path: Path, private_redis: OwnRedis, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(
        "DEBUG", logger="buzz.relay.replicas.bus"
    )  # each attempt is a DEBUG line; the WARNING is rate-limited
    async with replica_pair(tmp_path, private_redis.url, "backoff") as (a, _):
        await private_redis.stop()

        def delays() -> list[str]:
            return [
                r.getMessage().rsplit("retrying in ", 1)[1]
                for r in caplog.records
                if r.name == "buzz.relay.replicas.bus" and "retrying in" in r.getMessage()
            ]

        await wait_until(lambda: len(delays()) >= 6, 6, "three attempts on each replica")
        assert delays()[:6] == ["1 s", "1 s", "2 s", "2 s", "4 s", "4 s"]  # both replicas, in step
        assert a.relay.bus is not None and not a.relay.bus.connected
