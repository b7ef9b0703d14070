"""A join routed to an owner replica that just died is answered before the client gives up
(issue 24 item 17: after kill -9 of the owner, a rejoin through the survivor waited up to 15 s
for an answer that could not come, against the client's 5 s bound after `auth`; 22.6 s of
silence in all).

Real `buzz relay serve` processes on one PostgreSQL and one Redis, BUZZ_MESH=on. A owns the
room; A is killed; the room's lease names A until its TTL runs out, so B routes a new join to
A. B's `register_peer` reaches no subscriber (`PUBLISH` answers 0: nobody listens on A's
channel any more), and B answers `huddle_owner_unreachable` (retry with backoff, huddle.md §4.3)
at once. The client here waits only as long as a client of the spec does (CLIENT_JOINED_TIMEOUT).
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from redis.asyncio import Redis

from buzz.core.huddle_wire import CLIENT_JOINED_TIMEOUT
from buzz.core.mesh_lease import lease_keys, parse_lease
from tests.huddle.support import AudioPeer, ChannelSpec, join, make_channel
from tests.replicas.conftest import served_pair
from tests.support.relay import Identity

pytestmark = [pytest.mark.redis, pytest.mark.postgres]

UNREACHABLE = {
    "type": "error",
    "code": "huddle_owner_unreachable",
    "message": "could not reach the huddle owner",
}


async def test_a_join_routed_to_a_dead_owner_is_answered_within_the_client_bound(
    tmp_path: Path, redis: Redis, workspace_id: str, alice: Identity, bob: Identity
) -> None:
    async with served_pair(tmp_path, workspace_id, mesh=True) as (a, b, ra, rb):
        cid = await make_channel(ra, ChannelSpec(alice, members=[bob]))
        on_a = await join(ra, alice, cid)  # A owns the room
        assert on_a.joined is not None and on_a.joined["type"] == "joined", on_a.joined
        owner = parse_lease(await redis.get(lease_keys(cid, workspace_id)[0]))
        assert owner is not None

        a.proc.send_signal(signal.SIGKILL)
        await a.proc.wait()
        await on_a.close()
        for _ in range(2):  # each attempt, as a client retrying with backoff makes them
            peer = await AudioPeer.connect(rb, cid)
            await peer.send_auth(rb, bob, await peer.challenge(), 2)
            answer = await peer.recv_json(CLIENT_JOINED_TIMEOUT)  # what a client waits, no more
            assert answer == UNREACHABLE
            assert await peer.expect_close() == []
            await peer.close()
        # the dead owner's lease is still there: the answer came from the transport, not a TTL
        assert parse_lease(await redis.get(lease_keys(cid, workspace_id)[0])) == owner
        assert await b.stop() == 0
