"""The owner of a huddle room drops a remote seat that lost access (issue: hardening; relay.md
§4.7, §7.3 item 2.3; huddle.md §9.6). Replicas A (owner) and B (ingress) on one PostgreSQL and
one Redis, BUZZ_MESH on. Bob's socket is on B; B is made deaf to the change (its bus, or its
ban watch, is stopped), so only the owner can act: it sends `goodbye` on bob's control stream,
B ends bob's socket with the error a rejoin would get and a 1008 close, and everyone else, on
both replicas, gets the owner's `left`."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from buzz.core.event import Event
from buzz.relay.auth import banwatch
from tests.huddle.support import (
    BAN_POLL_WAIT_S,
    NOT_A_MEMBER,
    NOT_RELAY_MEMBER,
    ChannelSpec,
    frame,
    make_channel,
    refused,
    sees_left,
)
from tests.replicas.conftest import meshed, redis_url
from tests.replicas.helpers import seated_across
from tests.support.relay import Identity

pytestmark = [pytest.mark.redis, pytest.mark.postgres]


async def test_the_owner_drops_a_remote_seat_removed_from_the_channel(
    tmp_path, redis: Redis, workspace_id: str, alice: Identity, bob: Identity, carol: Identity
) -> None:
    async with meshed(tmp_path, redis_url(), workspace_id) as (a, b):
        cid = await make_channel(a, ChannelSpec(alice, members=[bob, carol]))
        pa, pb, pc = await seated_across(a, b, cid, alice, bob, carol)
        bob_index = pb.joined["peer_index"]  # type: ignore[index]
        assert b.relay.bus is not None
        await b.relay.bus.stop()  # B hears no access change from now on

        async with a.client(alice) as owner:
            removal = Event.create(alice.secret, 9001, "", [["h", cid], ["p", bob.pubkey]])
            result = await owner.publish(removal)
            assert result.accepted, result.message

        texts = await pb.expect_close(10)
        assert texts[-1] == NOT_A_MEMBER, texts
        assert pb.close_frame == (1008, "channel access revoked")
        await sees_left([pa, pc], bob.pubkey, bob_index)
        slot = a.relay.huddles.rooms.get(workspace_id, cid)
        assert slot is not None and bob.pubkey not in {p.pubkey for p in slot.room.peers.values()}
        assert a.relay.huddles.stats.counters["mesh_seats_dropped_total"] == 1
        assert await refused(b, bob, cid) == NOT_A_MEMBER  # B's join reads the store itself
        await pc.ws.send_bytes(frame(5, b"\x78carol"))  # the others still hear each other
        assert await pa.recv_binary(10) == bytes((pc.joined["peer_index"],)) + frame(5, b"\x78carol")  # type: ignore[index]
        for peer in (pa, pb, pc):
            await peer.close()


async def test_the_owner_drops_a_remote_seat_whose_key_is_banned(
    tmp_path, redis: Redis, workspace_id: str, alice: Identity, bob: Identity, carol: Identity
) -> None:
    async with meshed(tmp_path, redis_url(), workspace_id) as (a, b):
        cid = await make_channel(a, ChannelSpec(alice, members=[bob, carol]))
        pa, pb, pc = await seated_across(a, b, cid, alice, bob, carol)
        bob_index = pb.joined["peer_index"]  # type: ignore[index]
        await banwatch.stop(b.relay._ban_watch)  # only the owner's watch runs
        b.relay._ban_watch = None

        await a.relay.store.ban(bob.pubkey, "spam")  # type: ignore[attr-defined]

        texts = await pb.expect_close(BAN_POLL_WAIT_S)
        assert texts[-1] == NOT_RELAY_MEMBER, texts
        assert pb.close_frame == (1008, "blocked")
        await sees_left([pa, pc], bob.pubkey, bob_index)
        slot = a.relay.huddles.rooms.get(workspace_id, cid)
        assert slot is not None and bob.pubkey not in {p.pubkey for p in slot.room.peers.values()}
        assert await refused(b, bob, cid) == NOT_RELAY_MEMBER
        for peer in (pa, pb, pc):
            await peer.close()
