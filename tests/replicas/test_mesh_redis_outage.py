"""Redis stopped, then restarted, under the mesh (huddle.md §9.5, §9.8, §9.10 (e); issue 15).

Two tenants (workspaces `w1` and `w2`, each two replicas on its own PostgreSQL database) share
one redis-server that this test launches itself on a free port (the machine's shared Redis is
never stopped). Tenant 1 has two rooms, tenant 2 one room whose channel id is the same UUID as
tenant 1's first room: the envelope names no community, so this is where a leak would show.
Each room has peers on both replicas of its tenant. Every binary frame any client receives is
recorded for the whole test; frames carry `<tenant>/<room>/<peer>` so each can be traced.

1. All rooms live: everyone hears exactly their own room's other peers.
2. Redis killed: every room's sockets are closed (owners lose their lease; ingress replicas see
   the owner unreachable), and joins are refused with `join_rejected` on all four replicas.
3. Redis back on the same port: joins succeed again and every room works, through the mesh.
At no point did any client receive a frame from another room or another tenant, or its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import aiohttp
import pytest
from redis.asyncio import Redis

from buzz.relay.huddle.mesh_link import ctl_channel
from tests.huddle.support import AudioPeer, ChannelSpec, frame, join, make_channel, pong, refused
from tests.replicas.conftest import meshed
from tests.replicas.helpers import runtime, subscribers, wait_until
from tests.replicas.own_redis import own_redis
from tests.support.relay import Identity, RunningRelay

pytestmark = [pytest.mark.redis, pytest.mark.postgres]

REJECTED = {"type": "error", "code": "join_rejected", "message": "huddle join rejected"}
PREFIX = 9  # [author index][8-byte v2 header]


@contextlib.asynccontextmanager
async def tenant(
    tmp_path: Path, url: str, workspace: str
) -> AsyncIterator[tuple[RunningRelay, RunningRelay]]:
    async with meshed(tmp_path / workspace, url, workspace) as (a, b):
        for r in (a, b):  # fast failure detection: renew and ingress checks every 0.1–0.2 s
            assert r.relay.huddles.mesh is not None and r.relay.huddles.remote is not None
            r.relay.huddles.mesh.renew_s = 0.1
            r.relay.huddles.remote.ping_s = 0.2
        yield a, b


async def wait_until_async(count: Callable[[], Awaitable[int]], timeout: float, what: str) -> None:
    async with asyncio.timeout(timeout):
        while await count() < 1:
            await asyncio.sleep(0.05)
    assert await count() >= 1, what


class Recorder:
    """Every binary frame each client socket receives, by the client's own label."""

    def __init__(self) -> None:
        self.got: dict[str, list[bytes]] = {}
        self.tasks: list[asyncio.Task[None]] = []

    def watch(self, label: str, peer: AudioPeer) -> None:
        self.got.setdefault(label, [])

        async def run() -> None:
            async for msg in peer.ws:
                if msg.type == aiohttp.WSMsgType.BINARY:
                    self.got[label].append(bytes(msg.data)[PREFIX:])
                elif msg.type == aiohttp.WSMsgType.PING:
                    await pong(peer.ws, msg.data)

        self.tasks.append(asyncio.get_running_loop().create_task(run()))

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        for task in self.tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


async def test_redis_outage_no_cross_room_or_cross_tenant_audio_joins_refused_rooms_recover(
    tmp_path: Path,
) -> None:
    people = {
        name: Identity.new() for name in ("t1r1a", "t1r1b", "t1r1c", "t1r2a", "t1r2b", "t2r1a", "t2r1b")
    }
    shared_uuid = str(uuid.uuid4())  # tenant 1's room 1 and tenant 2's room 1: one channel id
    recorder = Recorder()
    async with own_redis(tmp_path / "redis") as server:
        async with (
            tenant(tmp_path, server.url, f"w1-{uuid.uuid4().hex[:8]}") as (a1, b1),
            tenant(tmp_path, server.url, f"w2-{uuid.uuid4().hex[:8]}") as (a2, b2),
        ):
            p = people
            r1 = await make_channel(
                a1, ChannelSpec(p["t1r1a"], [p["t1r1b"], p["t1r1c"]], channel_id=shared_uuid)
            )
            r2 = await make_channel(a1, ChannelSpec(p["t1r2a"], [p["t1r2b"]]))
            r3 = await make_channel(a2, ChannelSpec(p["t2r1a"], [p["t2r1b"]], channel_id=shared_uuid))
            # (label, replica, channel): owners first (A), then the remote peers on B
            seats = [
                ("t1r1a", a1, r1), ("t1r1b", b1, r1), ("t1r1c", b1, r1),
                ("t1r2a", b1, r2), ("t1r2b", a1, r2),  # room 2 is owned by B
                ("t2r1a", a2, r3), ("t2r1b", b2, r3),
            ]  # fmt: skip
            room_of = {label: label[:4] for label, _, _ in seats}

            async def all_join(round_: int) -> dict[str, AudioPeer]:
                peers = {}
                for label, replica, cid in seats:
                    peer = await join(replica, p[label], cid)
                    assert peer.joined is not None and peer.joined["type"] == "joined", (label, peer.joined)
                    recorder.watch(f"{label}#{round_}", peer)
                    peers[label] = peer
                return peers

            def tag(label: str, n: int) -> bytes:
                return frame(n, f"\x78{label}".encode())

            async def speak_and_check(peers: dict[str, AudioPeer], round_: int, n: int) -> None:
                for label, peer in peers.items():
                    await peer.ws.send_bytes(tag(label, n))
                for label in peers:  # each hears every other peer of its room, once
                    want = sorted(
                        f"\x78{o}".encode() for o in peers if o != label and room_of[o] == room_of[label]
                    )
                    key = f"{label}#{round_}"
                    await wait_until(
                        lambda key=key, want=want: sorted(f for f in recorder.got[key] if f in want) == want,
                        timeout=10,
                        what=f"{key} hears its room",
                    )

            peers = await all_join(1)
            await speak_and_check(peers, 1, 1)

            await server.stop()  # Redis gone
            for label, peer in peers.items():  # every room's sockets close: fail closed
                await wait_until(lambda peer=peer: peer.ws.closed, timeout=15, what=f"{label} closed")
            for label, replica, cid in seats:  # and nobody is let in while it is down
                assert await refused(replica, p[label], cid) == REJECTED, label
            for peer in peers.values():
                await peer.close()

            await server.start()  # Redis back, empty (no leases, generations from 1 again)
            # a replica whose mesh listener is not subscribed yet would answer nothing: its peers
            # would get huddle_owner_unreachable (and retry); wait until all four listen again
            client = Redis.from_url(server.url)
            try:
                for replica in (a1, b1, a2, b2):
                    channel = ctl_channel(runtime(replica))
                    await wait_until_async(lambda channel=channel: subscribers(client, channel), 15, channel)
            finally:
                await client.aclose()
            peers = await all_join(2)
            await speak_and_check(peers, 2, 2)
            await asyncio.sleep(0.3)  # anything late or duplicated would land now
            for peer in peers.values():
                await peer.close()
            await recorder.stop()

    # at no point: a frame from another room or tenant, one's own, or a second copy
    for key, frames in recorder.got.items():
        label = key.split("#")[0]
        for f in frames:
            author = f[1:].decode(errors="replace")
            assert room_of[author] == room_of[label], f"{key} heard {author}"
            assert author != label, f"{key} heard itself"
        assert len(frames) == len(set(frames)), f"{key} got a duplicate"
