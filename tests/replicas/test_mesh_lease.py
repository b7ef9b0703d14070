"""The fenced room lease across two replicas (huddle.md §9.3–§9.5; issue 15 step 2): real relays
on one PostgreSQL and one Redis with BUZZ_MESH on. The first replica to admit a peer owns the
room under a Redis lease; the last leave releases the lease; a lost lease closes the room's sockets; Redis down = joins
refused (`join_rejected`), never a silent join."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest
from redis.asyncio import Redis

from buzz.core.mesh_lease import lease_keys
from tests.huddle.support import ChannelSpec, join, make_channel, refused
from tests.replicas.conftest import meshed, redis_url
from tests.replicas.helpers import runtime, wait_until
from tests.replicas.own_redis import own_redis
from tests.support.relay import Identity

pytestmark = [pytest.mark.redis, pytest.mark.postgres]

UNREACHABLE = {
    "type": "error",
    "code": "huddle_owner_unreachable",
    "message": "could not reach the huddle owner",
}
REJECTED = {"type": "error", "code": "join_rejected", "message": "huddle join rejected"}


async def test_first_replica_owns_the_room_until_the_last_leave(
    tmp_path: Path, redis: Redis, workspace_id: str, alice: Identity, bob: Identity, carol: Identity
) -> None:
    async with meshed(tmp_path, redis_url(), workspace_id) as (a, b):
        cid = await make_channel(a, ChannelSpec(alice, members=[bob, carol]))
        lease_key, generation_key = lease_keys(cid, workspace_id)
        first = await join(a, alice, cid)
        assert first.joined is not None and first.joined["peer_index"] == 0
        assert (await redis.get(lease_key)).decode() == f"{runtime(a)}|1|huddle-control"
        assert 0 < await redis.pttl(lease_key) <= 30_000
        second = await join(a, carol, cid)  # the owner admits more peers under the same lease
        assert second.joined is not None and second.joined["peer_index"] == 1
        for peer in (first, second):
            await peer.ws.send_str('{"type":"leave"}')
            await peer.close()
        await wait_until(lambda: len(a.relay.huddles.rooms) == 0, what="room reclaimed on A")
        await wait_until(lambda: not a.relay.huddles.mesh.owned, what="lease released")  # type: ignore[union-attr]
        assert await redis.get(lease_key) is None
        assert await redis.get(generation_key) == b"1"  # the generation never goes back
        on_b = await join(b, bob, cid)  # the room is free: B takes it with a higher generation
        assert on_b.joined is not None and on_b.joined["type"] == "joined"
        assert (await redis.get(lease_key)).decode() == f"{runtime(b)}|2|huddle-control"
        await on_b.close()


async def test_a_lost_lease_closes_the_rooms_sockets(
    tmp_path: Path, redis: Redis, workspace_id: str, alice: Identity, bob: Identity
) -> None:
    async with meshed(tmp_path, redis_url(), workspace_id) as (a, _b):
        huddles = a.relay.huddles
        assert huddles.mesh is not None
        huddles.mesh.renew_s = 0.1
        cid = await make_channel(a, ChannelSpec(alice, members=[bob]))
        peers = [await join(a, alice, cid), await join(a, bob, cid)]
        lease_key, _ = lease_keys(cid, workspace_id)
        await redis.set(lease_key, f"{'c' * 64}|9|huddle-control", px=30_000)  # another owner took it
        for peer in peers:
            await peer.expect_close()
            await peer.close()
        assert huddles.mesh.stats["mesh_leases_lost_total"] == 1
        assert (await redis.get(lease_key)).decode() == f"{'c' * 64}|9|huddle-control"  # untouched
        await wait_until(lambda: len(huddles.rooms) == 0, what="room reclaimed")


async def test_redis_down_refuses_joins_and_closes_owned_rooms(
    tmp_path: Path, alice: Identity, bob: Identity
) -> None:
    async with own_redis(tmp_path / "redis") as server:
        async with meshed(tmp_path, server.url, "test-mesh-outage") as (a, b):
            assert a.relay.huddles.mesh is not None
            a.relay.huddles.mesh.renew_s = 0.1
            cid = await make_channel(a, ChannelSpec(alice, members=[bob]))
            owned = await join(a, alice, cid)
            assert owned.joined is not None and owned.joined["type"] == "joined"
            await server.stop()
            await owned.expect_close()  # renewal fails: fail closed, no second owner can appear
            await owned.close()
            assert await refused(a, alice, cid) == REJECTED
            assert await refused(b, bob, cid) == REJECTED
            await server.start()
            await asyncio.sleep(0.1)
            back = await join(b, bob, cid)  # rooms recover once Redis answers
            assert back.joined is not None and back.joined["type"] == "joined"
            await back.close()


def test_settings_carry_the_spec_lease_times(tmp_path: Path) -> None:
    from buzz.relay.huddle.settings import HuddleSettings

    settings = HuddleSettings.from_env("w", {}, replicated=True, mesh=True)
    assert (settings.lease_ttl_s, settings.lease_renew_s) == (30.0, 10.0)
    assert replace(settings, lease_renew_s=1.0).lease_renew_s == 1.0
