"""Huddle gates hold across replicas (issue 15): real relays on one PostgreSQL and one Redis with
BUZZ_MESH on. A non-member who dials replica B cannot join a private room owned by A (B checks
membership itself, before routing to the owner); a member removed on A is dropped from the room
on B (the access change crosses the bus, B's revocation closes the seat and unregisters it at A,
so A's peers get `left`), and cannot come back."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from buzz.core.event import Event
from buzz.core.mesh_lease import lease_keys
from tests.huddle.support import NOT_A_MEMBER, ChannelSpec, frame, join, make_channel, refused, sees_left
from tests.replicas.conftest import meshed, redis_url
from tests.replicas.helpers import runtime, seated_across
from tests.support.relay import Identity

pytestmark = [pytest.mark.redis, pytest.mark.postgres]


async def test_a_non_member_on_b_cannot_join_a_private_room_owned_by_a(
    tmp_path, redis: Redis, workspace_id: str, alice: Identity, bob: Identity
) -> None:
    mallory = Identity.new()  # authenticates fine, member of nothing
    async with meshed(tmp_path, redis_url(), workspace_id) as (a, b):
        cid = await make_channel(a, ChannelSpec(alice, members=[bob]))  # private by default
        pa = await join(a, alice, cid)  # A owns the room
        pb = await join(b, bob, cid)  # a member on B is routed to A
        assert pb.joined is not None and pb.joined["type"] == "joined", pb.joined
        lease_before = await redis.get(lease_keys(cid, workspace_id)[0])
        assert lease_before is not None and lease_before.decode().startswith(runtime(a))

        assert await refused(b, mallory, cid) == NOT_A_MEMBER  # on B …
        assert await refused(a, mallory, cid) == NOT_A_MEMBER  # … and on the owner alike

        # nothing reached the room: same roster, same lease, and audio still only between members
        slot = a.relay.huddles.rooms.get(workspace_id, cid)
        assert slot is not None
        assert sorted(p.pubkey for p in slot.room.peers.values()) == sorted([alice.pubkey, bob.pubkey])
        assert await redis.get(lease_keys(cid, workspace_id)[0]) == lease_before
        await pb.ws.send_bytes(frame(1, b"\x78bob"))
        assert await pa.recv_binary(10) == bytes((pb.joined["peer_index"],)) + frame(1, b"\x78bob")
        for peer in (pa, pb):
            await peer.close()


async def test_a_member_removed_on_a_is_dropped_from_the_room_on_b(
    tmp_path, redis: Redis, workspace_id: str, alice: Identity, bob: Identity, carol: Identity
) -> None:
    async with meshed(tmp_path, redis_url(), workspace_id) as (a, b):
        cid = await make_channel(a, ChannelSpec(alice, members=[bob, carol]))
        pa, pb, pc = await seated_across(a, b, cid, alice, bob, carol)  # owner A; bob, carol on B
        bob_index = pb.joined["peer_index"]  # type: ignore[index]

        async with a.client(alice) as owner:  # removed on A (kind 9001, relay.md §4.5)
            removal = Event.create(alice.secret, 9001, "", [["h", cid], ["p", bob.pubkey]])
            result = await owner.publish(removal)
            assert result.accepted, result.message

        texts = await pb.expect_close(10)  # B drops bob's seat: "not a member", then the close
        assert texts[-1] == NOT_A_MEMBER, texts
        await pb.close()
        await sees_left([pa, pc], bob.pubkey, bob_index)  # the owner's `left` on A and B alike
        slot = a.relay.huddles.rooms.get(workspace_id, cid)
        assert slot is not None and bob.pubkey not in {p.pubkey for p in slot.room.peers.values()}

        assert await refused(b, bob, cid) == NOT_A_MEMBER  # and bob cannot come back, on B or A
        assert await refused(a, bob, cid) == NOT_A_MEMBER
        await pc.ws.send_bytes(frame(5, b"\x78carol"))  # the others still hear each other
        assert await pa.recv_binary(10) == bytes((pc.joined["peer_index"],)) + frame(5, b"\x78carol")  # type: ignore[index]
        for peer in (pa, pc):
            await peer.close()
