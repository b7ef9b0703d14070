"""Failover (huddle.md §9.3–§9.5; issue 15 step 4) with real `buzz relay serve` processes on one
PostgreSQL and one Redis, BUZZ_MESH=on: kill -9 of the owner replica mid-huddle. Its lease
expires (TTL 30 s), the surviving replica closes the clients it was forwarding for, they rejoin
and the survivor takes the room with a higher generation; they hear each other again, and
envelopes stamped with the dead owner's generation are dropped, never delivered."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from redis.asyncio import Redis

from buzz.core.mesh_envelope import FANOUT, INGRESS, NO_PEER, Envelope
from buzz.core.mesh_lease import lease_keys, parse_lease
from buzz.relay.huddle.mesh_link import media_channel
from tests.huddle.support import ChannelSpec, frame, join, make_channel
from tests.replicas.conftest import served_pair
from tests.support.relay import Identity

pytestmark = [pytest.mark.redis, pytest.mark.postgres]

FAILOVER_BOUND_S = 30 + 5 + 10  # TTL, one ingress check, slack for a loaded machine


async def test_kill_9_of_the_owner_moves_the_room_to_the_survivor(
    tmp_path: Path, redis: Redis, workspace_id: str, alice: Identity, bob: Identity, carol: Identity
) -> None:
    async with served_pair(tmp_path, workspace_id, mesh=True) as (a, b, ra, rb):
        cid = await make_channel(ra, ChannelSpec(alice, members=[bob, carol]))
        lease_key, generation_key = lease_keys(cid, workspace_id)
        on_a = await join(ra, alice, cid)  # A owns the room
        first = parse_lease(await redis.get(lease_key))
        assert first is not None and first.generation == 1
        pb, pc = await join(rb, bob, cid), await join(rb, carol, cid)  # both remote, via A
        await pb.ws.send_bytes(frame(1, b"\x78via-a"))
        assert await pc.recv_binary(10) == bytes((pb.joined["peer_index"],)) + frame(1, b"\x78via-a")  # type: ignore[index]

        a.proc.send_signal(signal.SIGKILL)
        await a.proc.wait()
        for peer in (pb, pc):  # B closes them once the dead owner's lease is gone
            await peer.expect_close(FAILOVER_BOUND_S)
            await peer.close()
        await on_a.close()

        pb, pc = await join(rb, bob, cid), await join(rb, carol, cid)
        assert pb.joined is not None and pb.joined["type"] == "joined", pb.joined
        assert pc.joined is not None and pc.joined["type"] == "joined", pc.joined
        second = parse_lease(await redis.get(lease_key))
        assert second is not None and second.generation == 2 and second.owner != first.owner
        assert await redis.get(generation_key) == b"2"

        # the dead owner's generation, injected both ways at the new owner: dropped
        bi, ci = pb.joined["peer_index"], pc.joined["peer_index"]
        stale_out = Envelope(FANOUT, cid, 1, first.owner, first.owner, 0, ci, bi, frame(7, b"\x78old"))
        stale_in = Envelope(INGRESS, cid, 1, second.owner, first.owner, 0, NO_PEER, bi, frame(8, b"\x78old"))
        await redis.publish(media_channel(second.owner), stale_out.pack())
        await redis.publish(media_channel(second.owner), stale_in.pack())
        await pb.ws.send_bytes(frame(9, b"\x78live"))
        assert await pc.recv_binary(10) == bytes((bi,)) + frame(9, b"\x78live")  # the next is live
        await pc.ws.send_bytes(frame(10, b"\x78back"))
        assert await pb.recv_binary(10) == bytes((ci,)) + frame(10, b"\x78back")
        for peer in (pb, pc):
            with pytest.raises(TimeoutError):
                await peer.recv_binary(0.3)
            await peer.close()
        assert await b.stop() == 0
