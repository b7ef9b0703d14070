"""A hung Redis (SIGSTOP, socket open) must not stall a connection (issue 9 item 6).

Redis calls a request waits on (presence write and read) fail closed with an `error:` answer
after the short request timeout, and the same connection keeps serving other messages.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from buzz.client.relay_client import RelayError
from buzz.core.event import Event
from tests.replicas.own_redis import own_redis
from tests.support.pg import temp_database
from tests.support.relay import Identity, relay_on
from tests.workspace.helpers import accepted, create_channel, drain, live

pytestmark = [pytest.mark.redis, pytest.mark.postgres]

UNAVAILABLE = "error: presence unavailable: Redis did not answer"


async def test_hung_redis_fails_presence_closed_and_serves_the_rest(
    tmp_path: Path, workspace_id: str, alice: Identity
) -> None:
    async with (
        own_redis(tmp_path / "redis") as redis,
        temp_database() as dsn,
        relay_on(tmp_path / "relay", dsn, redis_url=redis.url, workspace_id=workspace_id) as running,
        running.client(alice) as client,
    ):
        channel = await create_channel(client, alice)
        presence = {"kinds": [20001], "authors": [alice.pubkey]}
        t = int(time.time())
        await accepted(client, Event.create(alice.secret, 20001, "online", created_at=t - 1))
        assert len(await client.query([presence])) == 1
        redis.hang()
        try:
            # Pipelined on one connection: the presence refusal does not hold up what follows.
            status = Event.create(alice.secret, 20001, "busy", created_at=t)
            note = Event.create(alice.secret, 9, "still here", [["h", channel]])
            answers = await asyncio.gather(client.publish(status), client.publish(note))
            assert [(a.accepted, a.message) for a in answers] == [(False, UNAVAILABLE), (True, "")]
            with pytest.raises(RelayError) as refused:
                await client.query([presence])
            assert refused.value.message == UNAVAILABLE
            sub = await live(client, {"kinds": [9], "#h": [channel]})  # a REQ naming a channel
            assert note.id in [e.id for e in drain(sub)]  # its stored phase
            later = Event.create(alice.secret, 9, "live", [["h", channel]])
            await accepted(client, later)
            assert (await sub.next()).id == later.id
            assert [e.id for e in await client.query([{"ids": [note.id]}])] == [note.id]
        finally:
            redis.resume()
        await accepted(client, Event.create(alice.secret, 20001, "back", created_at=t + 1))
