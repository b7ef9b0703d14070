"""A NIP-98 header used on one replica is refused on the other (issue 9 item 8, relay.md §15)."""

from __future__ import annotations

from pathlib import Path

from redis.asyncio import Redis

from buzz.core.event import Event
from tests.bridge.helpers import post, signed_headers
from tests.replicas.conftest import redis_url, replica_pair
from tests.support.relay import Identity


async def test_used_header_is_refused_by_the_other_replica(
    tmp_path: Path, redis: Redis, workspace_id: str
) -> None:
    alice = Identity.new()
    body = Event.create(alice.secret, 1, "once").to_json().encode()
    url = "http://relay.example.com/events"  # RELAY_URL's host: one u tag valid on both replicas
    headers = signed_headers(alice, url, body)
    async with replica_pair(tmp_path, redis_url(), workspace_id, relay_url="ws://relay.example.com") as (
        a,
        b,
    ):
        status, answer = await post(a, "/events", None, alice, headers=headers, raw=body)
        assert status == 200 and answer["accepted"] is True
        for replica in (b, a):
            status, answer = await post(replica, "/events", None, alice, headers=headers, raw=body)
            assert (status, answer) == (401, {"error": "NIP-98: event already used"})
