"""The end of a huddle and the drain of a replica under the mesh (huddle.md §5.8, §9.5; issue 15):

- a TTL huddle whose last participant was remote still ends on its owner: the channel is
  archived and one relay-signed 48103 names that participant in the lifecycle parent;
- SIGTERM of the owner replica (real `buzz relay serve` processes) drains it: its clients get a
  clear close, the remote replica's clients are told too, the lease is released at once (not left
  to expire), and the other replica takes the room over immediately; nothing ends.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from redis.asyncio import Redis

from buzz.core.event import Event
from buzz.core.mesh_lease import lease_keys, parse_lease
from tests.huddle.support import ChannelSpec, frame, join, make_channel, refused
from tests.operator.support import lines_with
from tests.replicas.conftest import meshed, redis_url, served_pair
from tests.replicas.helpers import next_of_kind, runtime, wait_until
from tests.support.deadline import scaled
from tests.support.relay import Identity, RunningRelay

pytestmark = [pytest.mark.redis, pytest.mark.postgres]

LIFECYCLE = [48101, 48102, 48103]
DRAINING = {"type": "error", "code": "huddle_relay_draining", "message": "relay is draining; reconnect"}


async def ttl_huddle(running: RunningRelay, starter: Identity, member: Identity) -> tuple[str, str]:
    """(parent, huddle): a private parent with `member`, a TTL huddle channel linked by 48100."""
    parent = await make_channel(running, ChannelSpec(starter, members=[member]))
    huddle = await make_channel(running, ChannelSpec(starter, ttl=3600))
    async with running.client(starter) as c:
        body = json.dumps({"ephemeral_channel_id": huddle})
        assert (await c.publish(Event.create(starter.secret, 48100, body, [["h", parent]]))).accepted
    return parent, huddle


async def test_a_ttl_huddle_ends_on_its_owner_when_the_last_peer_was_remote(
    tmp_path: Path, redis: Redis, workspace_id: str, alice: Identity, bob: Identity
) -> None:
    async with meshed(tmp_path, redis_url(), workspace_id) as (a, b):
        parent, huddle = await ttl_huddle(a, alice, bob)
        async with a.client(alice) as watcher:
            sub = await watcher.subscribe([{"kinds": LIFECYCLE, "#h": [parent]}])
            await asyncio.wait_for(sub.eose.wait(), scaled(5))
            pa = await join(a, alice, huddle, parent=parent)  # owner A
            pb = await join(b, bob, huddle, parent=parent)  # remote, through A
            assert [p.joined["type"] for p in (pa, pb)] == ["joined", "joined"]  # type: ignore[index]
            await pa.ws.send_str('{"type":"leave"}')  # the local peer leaves first
            await pa.expect_close()
            await pb.ws.send_str('{"type":"leave"}')  # the last peer is remote
            await pb.expect_close()

            ended = await next_of_kind(sub, 48103, timeout=10)
            assert ended.pubkey == a.relay.pubkey  # relay-signed, by the owner
            assert ended.tag_values("p") == [bob.pubkey] and ended.tag_values("h") == [parent]
            assert json.loads(ended.content) == {"ephemeral_channel_id": huddle}
            channel = await a.relay.store.get_channel(huddle)
            assert channel is not None and channel.archived_at is not None
            stored = await watcher.query([{"kinds": [48103], "#h": [parent]}])
            assert [e.id for e in stored] == [ended.id]  # exactly one end
        lease_key = lease_keys(huddle, workspace_id)[0]
        await wait_until(lambda: len(a.relay.huddles.rooms) == len(b.relay.huddles.rooms) == 0, what="rooms")
        assert await redis.get(lease_key) is None
        not_member = {"type": "error", "message": "not a member"}
        assert await refused(b, bob, huddle, parent=parent) == not_member  # archived: gone for good
        for peer in (pa, pb):
            await peer.close()


async def test_a_draining_replica_refuses_new_joins(
    tmp_path: Path, redis: Redis, workspace_id: str, alice: Identity, bob: Identity
) -> None:
    async with meshed(tmp_path, redis_url(), workspace_id) as (a, b):
        cid = await make_channel(a, ChannelSpec(alice, members=[bob]))
        pa = await join(a, alice, cid)
        pb = await join(b, bob, cid)
        await a.relay.huddles.drain()
        texts = await pa.expect_close()
        assert pa.close_frame == (1012, "relay draining; reconnect"), (texts, pa.close_frame)
        await pb.expect_close()  # B was told (goodbye draining) and closed its client
        assert await redis.get(lease_keys(cid, workspace_id)[0]) is None  # released, not expiring
        assert await refused(a, alice, cid) == DRAINING
        back = await join(b, bob, cid)  # B takes the room at once
        assert back.joined is not None and back.joined["type"] == "joined", back.joined
        assert (await redis.get(lease_keys(cid, workspace_id)[0])).decode().startswith(runtime(b))
        for peer in (pa, pb, back):
            await peer.close()


async def test_sigterm_of_the_owner_drains_and_the_other_replica_takes_over_at_once(
    tmp_path: Path, redis: Redis, workspace_id: str, alice: Identity, bob: Identity, carol: Identity
) -> None:
    async with served_pair(tmp_path, workspace_id, mesh=True) as (a, b, ra, rb):
        cid = await make_channel(ra, ChannelSpec(alice, members=[bob, carol]))
        lease_key, _ = lease_keys(cid, workspace_id)
        pa, pc = await join(ra, alice, cid), await join(ra, carol, cid)  # A owns the room
        pb = await join(rb, bob, cid)
        first = parse_lease(await redis.get(lease_key))
        assert first is not None and first.generation == 1

        assert await a.stop() == 0  # SIGTERM: drain, exit 0
        for peer in (pa, pc):
            texts = await peer.expect_close()
            assert peer.close_frame == (1012, "relay draining; reconnect"), (texts, peer.close_frame)
        await pb.expect_close()  # B closed its client when A said goodbye
        assert await redis.get(lease_key) is None  # released, not left to expire (TTL 30 s)
        assert "huddle owner lease" not in a.log_text()  # drained, not lost
        log = a.log_text()  # the operator sees the drain: what it moved, that it finished, the end
        steps = [
            lines_with(log, "relay stopping signal=SIGTERM", "huddle_sockets=2 huddles=drain"),
            lines_with(log, "huddle drain started owned_rooms=1 remote_peers=1 sockets=2"),
            lines_with(log, "huddle drain done duration_s=", "sockets_left=0"),
            lines_with(log, "relay stopped duration_s="),
        ]
        assert all(len(found) == 1 for found in steps), log
        order = [log.splitlines().index(found[0]) for found in steps]
        assert order == sorted(order), log

        pb2, pa2 = await join(rb, bob, cid), await join(rb, alice, cid)  # at once, on B
        assert pb2.joined is not None and pb2.joined["type"] == "joined", pb2.joined
        assert pa2.joined is not None and pa2.joined["type"] == "joined", pa2.joined
        second = parse_lease(await redis.get(lease_key))
        assert second is not None and second.generation == 2 and second.owner != first.owner
        await pb2.ws.send_bytes(frame(3, b"\x78again"))
        assert await pa2.recv_binary(10) == bytes((pb2.joined["peer_index"],)) + frame(3, b"\x78again")
        async with rb.client(alice) as c:  # nothing ended: no 48103 for the drain
            assert await c.query([{"kinds": [48103], "#h": [cid]}]) == []
        for peer in (pa, pb, pc, pa2, pb2):
            await peer.close()
        assert await b.stop() == 0


async def test_a_draining_ingress_replica_does_not_end_the_room_for_its_last_peer(
    tmp_path: Path, redis: Redis, workspace_id: str, alice: Identity, bob: Identity
) -> None:
    async with meshed(tmp_path, redis_url(), workspace_id) as (a, b):
        parent, huddle = await ttl_huddle(a, alice, bob)
        pa = await join(a, alice, huddle, parent=parent)  # owner A
        pb = await join(b, bob, huddle, parent=parent)  # remote
        await pa.ws.send_str('{"type":"leave"}')
        await pa.expect_close()  # bob, on B, is now the room's only peer
        await b.relay.huddles.drain()
        await pb.expect_close()
        assert pb.close_frame == (1012, "relay draining; reconnect"), pb.close_frame
        await wait_until(lambda: len(a.relay.huddles.rooms) == 0, what="the owner room reclaimed")
        channel = await a.relay.store.get_channel(huddle)
        assert channel is not None and channel.archived_at is None  # moving, not leaving: no end
        async with a.client(alice) as c:
            assert await c.query([{"kinds": [48103], "#h": [parent]}]) == []
        back = await join(a, bob, huddle, parent=parent)  # bob reconnects elsewhere: still open
        assert back.joined is not None and back.joined["type"] == "joined", back.joined
        for peer in (pa, pb, back):
            await peer.close()
