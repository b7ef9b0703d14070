"""Registrations the ingress replica gives up on never hold a seat at the owner (huddle.md
§9.6; the leak `bench/huddle.py --replicas 2` found). Real `buzz relay serve` processes on one
PostgreSQL and one Redis, BUZZ_MESH=on. The owner A is stopped (SIGSTOP), so no answer to
`register_peer` can come; 25 clients join through B and go away right after their `auth`. B gives
each registration up and tells A. A is resumed: it grants every queued registration and frees
each seat again, so the room is empty of ghosts: a join through B sees only the real peers, and
25 fresh joins fill the room."""

from __future__ import annotations

import asyncio
import re
import signal
import urllib.request
from pathlib import Path

import orjson
import pytest
from redis.asyncio import Redis

from buzz.core.mesh_lease import lease_keys, parse_lease
from buzz.relay.huddle.mesh_link import ctl_channel
from tests.huddle.support import AudioPeer, ChannelSpec, join, make_channel, texts_until
from tests.operator.support import free_port
from tests.replicas.conftest import meshed, redis_url, served_pair
from tests.replicas.helpers import runtime, wait_until
from tests.support.relay import Identity, RunningRelay

pytestmark = [pytest.mark.redis, pytest.mark.postgres]

SEATS = 25  # MAX_PEERS_PER_ROOM (§5.3)


def abandoned(metrics_url: str) -> int:
    """B's `buzz_huddle_mesh_total{what="registrations_abandoned"}` (0 before the first)."""
    with urllib.request.urlopen(metrics_url, timeout=5) as answer:
        text = answer.read().decode()
    found = re.search(r'buzz_huddle_mesh_total\{what="registrations_abandoned"\} (\d+)', text)
    return int(found.group(1)) if found else 0


async def gone_after_auth(relay: RunningRelay, who: Identity, cid: str) -> None:
    """A client that sends its `auth` and closes before any answer."""
    peer = await AudioPeer.connect(relay, cid)
    await peer.send_auth(relay, who, await peer.challenge(), 2)
    await peer.close()


async def test_abandoned_registrations_leave_no_ghost_seats(
    tmp_path: Path, redis: Redis, workspace_id: str, alice: Identity
) -> None:
    people = [Identity.new() for _ in range(SEATS)]
    metrics_port = free_port()
    metrics_bind = ("--metrics-bind", f"127.0.0.1:{metrics_port}")
    async with served_pair(tmp_path, workspace_id, mesh=True, b_args=metrics_bind) as (a, _b, ra, rb):
        metrics = f"http://127.0.0.1:{metrics_port}/metrics"
        cid = await make_channel(ra, ChannelSpec(alice, members=people))
        on_a = await join(ra, alice, cid)  # A owns the room
        assert on_a.joined is not None and on_a.joined["type"] == "joined", on_a.joined
        lease = parse_lease(await redis.get(lease_keys(cid, workspace_id)[0]))
        assert lease is not None
        peers: list[AudioPeer] = []
        a.proc.send_signal(signal.SIGSTOP)  # no answer from the owner from here on
        try:
            await asyncio.gather(*(gone_after_auth(rb, who, cid) for who in people))
            await wait_until(
                lambda: abandoned(metrics) == SEATS, timeout=60, what="B to give up every registration"
            )
        finally:
            a.proc.send_signal(signal.SIGCONT)
        # A now reads, in B's order: each given-up stream's hello, register_peer (granted:
        # the room has room for them all but one), unregister_peer; then this join's. Its
        # roster is A's room as it stands once every given-up seat has been handled.
        first = await join(rb, people[0], cid)
        peers.append(first)
        assert first.joined is not None and first.joined["type"] == "joined", first.joined
        assert {p["pubkey"] for p in first.joined["peers"]} == {alice.pubkey, people[0].pubkey}
        await on_a.ws.send_str('{"type":"leave"}')  # the room stays: people[0] holds it
        await on_a.close()
        for i, who in enumerate(people[1:], start=1):  # 24 more fresh joins, both replicas
            peer = await join(ra if i % 2 else rb, who, cid)
            peers.append(peer)
            assert peer.joined is not None and peer.joined["type"] == "joined", (i, peer.joined)
        last = peers[-1].joined
        assert last is not None
        assert sorted(p["pubkey"] for p in last["peers"]) == sorted(p.pubkey for p in people)
        assert parse_lease(await redis.get(lease_keys(cid, workspace_id)[0])) == lease  # one owner
        full = await join(rb, alice, cid)  # the cap still holds: the room is full of real seats
        assert full.joined is not None and full.joined.get("code") == "room_full", full.joined
        await full.close()
        for peer in peers:
            await peer.close()


async def test_a_torn_down_remote_client_frees_its_seat_at_the_owner(
    tmp_path: Path, redis: Redis, workspace_id: str, alice: Identity, bob: Identity, carol: Identity
) -> None:
    """B closes a joined client because the owner's deltas skipped a revision (§9.6 ingress
    step 4: it rejoins). The seat goes at the owner at once (`left` to the others), without
    ending the room; in process, so the test can name the stream and forge the gap."""
    async with meshed(tmp_path, redis_url(), workspace_id) as (a, b):
        cid = await make_channel(a, ChannelSpec(alice, members=[bob, carol]))
        pa = await join(a, alice, cid)  # owner: A
        pb = await join(b, bob, cid)  # remote, through A
        assert pb.joined is not None and pb.joined["type"] == "joined", pb.joined
        hub = b.relay.huddles.remote
        assert hub is not None
        (stream,) = hub.ingress_streams.values()
        gap = {
            "t": "roster_delta",
            "revision": stream.revision + 2,
            "joined": {"pubkey": carol.pubkey, "peer_index": 7},
            "fenced": {"session_id": cid, "generation": stream.lease.generation, "owner": stream.lease.owner},
        }
        await redis.publish(ctl_channel(runtime(b)), orjson.dumps({"s": stream.stream, "m": gap}))
        await pb.expect_close(10)
        assert pb.close_frame == (1012, "huddle owner gone")
        await pb.close()
        left = (await texts_until(pa, 1, "left"))[0]  # the owner let the seat go
        assert (left["pubkey"], left["peer_index"]) == (bob.pubkey, 1)
        pc = await join(b, carol, cid)  # after B's unregister in B's order: no ghost of bob
        assert pc.joined is not None and pc.joined["type"] == "joined", pc.joined
        assert [p["pubkey"] for p in pc.joined["peers"]] == [alice.pubkey, carol.pubkey]
        for peer in (pa, pc):
            await peer.close()


async def full_roster(peer: AudioPeer, seats: int) -> list[str]:
    """Read until this peer's roster holds `seats` peers (its `joined`, then v2 `joined`s with
    the complete roster); fails on a close. Returns the pubkeys."""
    body = peer.joined
    assert body is not None and body["type"] == "joined", body
    while len(body["peers"]) < seats:
        (body,) = await texts_until(peer, 1, "joined")
    return sorted(p["pubkey"] for p in body["peers"])


async def test_simultaneous_joins_through_the_ingress_all_get_in(
    tmp_path: Path, redis: Redis, workspace_id: str, alice: Identity
) -> None:
    """24 joins at once through B while the owner A holds one seat: every one is admitted, none
    is torn down (a `roster_delta` arriving between the owner's answer and the mirror admission
    is kept, not lost into a revision gap), and every peer ends with the same 25 seats."""
    people = [Identity.new() for _ in range(SEATS - 1)]
    async with meshed(tmp_path, redis_url(), workspace_id) as (a, b):
        cid = await make_channel(a, ChannelSpec(alice, members=people))
        pa = await join(a, alice, cid)
        remote = await asyncio.gather(*(join(b, who, cid) for who in people))
        everyone = sorted([alice.pubkey, *(p.pubkey for p in people)])
        for peer in [pa, *remote]:
            assert await full_roster(peer, SEATS) == everyone
        assert b.relay.huddles.stats.counters["mesh_registrations_abandoned_total"] == 0
        for peer in [pa, *remote]:
            await peer.close()
