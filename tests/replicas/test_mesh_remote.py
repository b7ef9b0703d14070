"""Remote peers across two replicas (huddle.md §9.6–§9.8; issue 15 step 3): real relays on one
PostgreSQL and one Redis with BUZZ_MESH on. Three peers, two on the owner A and one on B: every
peer hears every other with the author's peer_index, nobody hears themselves, all three hold the
same roster, and `left` reaches everyone; envelopes with a stale generation are dropped."""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio import Redis

from buzz.core.mesh_envelope import FANOUT, INGRESS, NO_PEER, Envelope
from buzz.core.mesh_lease import lease_keys
from buzz.relay.huddle.mesh_link import media_channel
from tests.huddle.support import AudioPeer, ChannelSpec, frame, join, make_channel, sees_left, texts_until
from tests.replicas.conftest import meshed, redis_url
from tests.replicas.helpers import runtime, wait_until
from tests.support.relay import Identity

pytestmark = [pytest.mark.redis, pytest.mark.postgres]


async def binaries(peer: AudioPeer, want: int) -> list[bytes]:
    return [await peer.recv_binary(10) for _ in range(want)]


async def test_three_peers_on_two_replicas_hear_each_other(
    tmp_path, redis: Redis, workspace_id: str, alice: Identity, bob: Identity, carol: Identity
) -> None:
    async with meshed(tmp_path, redis_url(), workspace_id) as (a, b):
        cid = await make_channel(a, ChannelSpec(alice, members=[bob, carol]))
        pa = await join(a, alice, cid)  # owner: A
        pb = await join(b, bob, cid)  # remote, through A
        pc = await join(a, carol, cid)
        joins = [pa.joined, pb.joined, pc.joined]
        assert [j["type"] for j in joins] == ["joined"] * 3, joins  # type: ignore[index]
        assert [j["peer_index"] for j in joins] == [0, 1, 2]  # type: ignore[index]
        # the rosters after the third join, as each peer sees it
        last_a = (await texts_until(pa, 2, "joined"))[-1]
        last_b = (await texts_until(pb, 1, "joined"))[-1]
        roster = [{"pubkey": p.pubkey, "peer_index": i} for i, p in enumerate((alice, bob, carol))]
        assert last_a["peers"] == last_b["peers"] == pc.joined["peers"] == roster  # type: ignore[index]
        assert last_a["revision"] == last_b["revision"] == pc.joined["revision"] == 3  # type: ignore[index]

        payloads = {0: frame(10, b"\x78alice"), 1: frame(20, b"\x78bob"), 2: frame(30, b"\x78carol")}
        peers = {0: pa, 1: pb, 2: pc}
        for index, peer in peers.items():
            await peer.ws.send_bytes(payloads[index])
        for index, peer in peers.items():
            got = sorted(await binaries(peer, 2))
            expected = sorted(bytes((i,)) + payloads[i] for i in peers if i != index)
            assert got == expected, f"peer {index} got {got}"  # the others' frames, none of its own
        await asyncio.sleep(0.3)
        for peer in peers.values():
            with pytest.raises(TimeoutError):
                await peer.recv_binary(0.2)  # exactly one copy each, no echo

        await pb.ws.send_str('{"type":"leave"}')  # the remote peer leaves: `left` on A
        await pb.close()
        await sees_left([pa, pc], bob.pubkey, 1)
        pb2 = await join(b, bob, cid)  # back on B; then a local peer on A leaves: `left` reaches B
        assert pb2.joined is not None and pb2.joined["peer_index"] == 1
        await pc.ws.send_str('{"type":"leave"}')
        await pc.close()
        await sees_left([pb2], carol.pubkey, 2)
        for peer in (pa, pb2):
            await peer.close()
        await wait_until(
            lambda: len(a.relay.huddles.rooms) == len(b.relay.huddles.rooms) == 0, what="rooms gone"
        )
        assert await redis.get(lease_keys(cid, workspace_id)[0]) is None


async def test_stale_and_forged_envelopes_are_dropped(
    tmp_path, redis: Redis, workspace_id: str, alice: Identity, bob: Identity
) -> None:
    async with meshed(tmp_path, redis_url(), workspace_id) as (a, b):
        cid = await make_channel(a, ChannelSpec(alice, members=[bob]))
        pa = await join(a, alice, cid)
        pb = await join(b, bob, cid)
        await pa.ws.send_bytes(frame(1, b"\x78live"))  # a real frame sets B's floor at generation 1
        assert await pb.recv_binary(10) == b"\x00" + frame(1, b"\x78live")
        ra, rb = runtime(a), runtime(b)
        stale = Envelope(FANOUT, cid, 0, ra, ra, 0, 1, 0, frame(2, b"\x78stale"))  # below the floor
        forged = Envelope(FANOUT, cid, 1, ra, rb, 0, 1, 0, frame(3, b"\x78forged"))  # sender ≠ owner
        echo = Envelope(FANOUT, cid, 1, ra, ra, 0, 1, 1, frame(4, b"\x78echo"))  # target = author
        unknown = Envelope(INGRESS, cid, 1, ra, "d" * 64, 0, NO_PEER, 1, frame(5, b"\x78ghost"))
        await redis.publish(media_channel(rb), stale.pack())
        await redis.publish(media_channel(rb), forged.pack())
        await redis.publish(media_channel(rb), echo.pack())
        await redis.publish(media_channel(ra), unknown.pack())  # unregistered sender at the owner
        await redis.publish(media_channel(rb), b"\x01\x02short")
        await pa.ws.send_bytes(frame(6, b"\x78after"))
        assert await pb.recv_binary(10) == b"\x00" + frame(6, b"\x78after")  # only live frames
        with pytest.raises(TimeoutError):
            await pa.recv_binary(0.3)
        counters = b.relay.huddles.stats.counters
        metrics = b.relay.telemetry.metrics.render().decode()  # the same counts on /metrics
        assert 'buzz_huddle_mesh_total{what="stale"} 1.0' in metrics
        assert 'buzz_huddle_mesh_total{what="malformed"} 1.0' in metrics
        assert counters["mesh_envelopes_stale_total"] == 1
        assert counters["mesh_envelopes_unregistered_total"] == 2
        assert counters["mesh_envelopes_malformed_total"] == 1
        assert a.relay.huddles.stats.counters["mesh_envelopes_unregistered_total"] == 1
        for peer in (pa, pb):
            await peer.close()
