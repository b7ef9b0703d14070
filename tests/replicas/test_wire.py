"""relay.md §12.4 items 1, 3 and 5 as seen from Redis itself: topic names, payloads, and which
topics a replica subscribes to (reference counts, 500 ms debounce, exact names)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
import pytest
from redis.asyncio import Redis

from buzz.core.event import Event
from tests.replicas.conftest import redis_url, replica_pair
from tests.replicas.helpers import subscribers, wait_until
from tests.support.relay import Identity, RunningRelay
from tests.workspace.helpers import accepted, create_channel, live, message, put_user

pytestmark = [pytest.mark.redis, pytest.mark.postgres]

Pair = tuple[RunningRelay, RunningRelay]


async def _collect(pubsub, until, timeout: float = 5.0) -> list[tuple[str, dict]]:
    """(topic, payload) messages until `until(messages)` holds."""
    out: list[tuple[str, dict]] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not until(out):
        assert loop.time() < deadline, f"timed out; got {out}"
        msg = await pubsub.get_message(ignore_subscribe_messages=True, timeout=0.1)
        if msg is not None:
            out.append((msg["channel"].decode(), orjson.loads(msg["data"])))
    return out


async def test_payloads_on_channel_global_and_control_topics(
    replicas: Pair, redis: Redis, workspace_id: str, alice: Identity, bob: Identity
) -> None:
    a, _ = replicas
    prefix = f"buzz:{workspace_id}"
    pubsub = redis.pubsub()
    try:
        async with a.client(alice) as on_a:
            channel = await create_channel(on_a, alice, "private")
            await pubsub.subscribe(f"{prefix}:global", f"{prefix}:control", f"{prefix}:channel:{channel}")
            await put_user(on_a, alice, channel, bob.pubkey)
            sent = await message(on_a, alice, channel, "wire")
            note = Event.create(alice.secret, 1, "global")
            await accepted(on_a, note)
            await accepted(on_a, Event.create(alice.secret, 9001, "", [["h", channel], ["p", bob.pubkey]]))

            def done(got: list[tuple[str, dict]]) -> bool:
                return any(t == f"{prefix}:control" and p.get("pubkey") == bob.pubkey for t, p in got)

            got = await _collect(pubsub, done)
    finally:
        await pubsub.aclose()
    assert (f"{prefix}:channel:{channel}", {"v": 1, "channel_id": channel, "event": sent.to_dict()}) in got
    assert (f"{prefix}:global", {"v": 1, "channel_id": None, "event": note.to_dict()}) in got
    notices = [p["event"] for t, p in got if t == f"{prefix}:global" and p["event"]["kind"] == 44100]
    assert [e["tags"] for e in notices] == [[["p", bob.pubkey], ["h", channel]]]  # global, p-gated
    control = [p for t, p in got if t == f"{prefix}:control"]
    assert {"v": 1, "type": "access_changed", "channel_id": channel, "pubkey": None} in control  # 9000
    assert control[-1] == {"v": 1, "type": "access_changed", "channel_id": channel, "pubkey": bob.pubkey}
    state = [p for t, p in got if t.endswith(channel) and p["event"]["kind"] in (39000, 39001, 39002)]
    assert state and all(p["channel_id"] == channel for p in state)  # relay-signed state travels too


async def test_channel_topic_follows_local_h_filters_with_a_debounce(
    replicas: Pair, redis: Redis, workspace_id: str, alice: Identity, bob: Identity
) -> None:
    a, b = replicas
    prefix = f"buzz:{workspace_id}"
    assert await subscribers(redis, f"{prefix}:global") == 2  # both replicas
    assert await subscribers(redis, f"{prefix}:control") == 2
    async with a.client(alice) as on_a, b.client(bob) as on_b:
        channel = await create_channel(on_a, alice, "open")
        topic = f"{prefix}:channel:{channel}"
        assert await subscribers(redis, topic) == 0  # nobody names it yet
        first = await live(on_b, {"#h": [channel]})
        second = await live(on_b, {"#h": [channel], "kinds": [9]}, {"#h": [channel, "not-a-uuid"]})
        assert await subscribers(redis, topic) == 1  # confirmed before EOSE; one per replica
        assert b.relay.bus.refs.count(channel) == 2  # type: ignore[union-attr]
        await first.close()
        await asyncio.sleep(0.7)
        assert await subscribers(redis, topic) == 1  # one filter still names it
        await second.close()
        await asyncio.sleep(0.2)
        assert await subscribers(redis, topic) == 1  # inside the 500 ms debounce
        again = await live(on_b, {"#h": [channel]})  # re-acquired during the debounce
        await asyncio.sleep(0.7)
        assert await subscribers(redis, topic) == 1
        await again.close()
        await asyncio.sleep(0.2)
        assert await subscribers(redis, topic) == 1
        await wait_until(lambda: b.relay.bus.refs.wanted == frozenset(), 2, "the debounce")  # type: ignore[union-attr]
        for _ in range(50):
            if await subscribers(redis, topic) == 0:
                break
            await asyncio.sleep(0.02)
        assert await subscribers(redis, topic) == 0
        names = [n.decode() for n in await redis.pubsub_channels(f"{prefix}:*")]
        assert sorted(names) == [f"{prefix}:control", f"{prefix}:global"]  # exact names only
        listeners = [
            c for c in await redis.client_list() if c["name"] == f"buzz-relay-listener:{workspace_id}"
        ]
        assert [(c["sub"], c["psub"]) for c in listeners] == [("2", "0"), ("2", "0")]  # no patterns


async def test_any_workspace_id_makes_valid_topics_and_connections(
    tmp_path: Path, redis: Redis, workspace_id: str, alice: Identity, bob: Identity
) -> None:
    """BUZZ_WORKSPACE_ID is free text: a space ends up in topic names, never breaks CLIENT SETNAME."""
    spaced = f"{workspace_id} two words"
    async with replica_pair(tmp_path, redis_url(), spaced) as (a, b):
        assert a.relay.bus is not None and a.relay.bus.connected
        assert await subscribers(redis, f"buzz:{spaced}:global") == 2
        async with a.client(alice) as on_a, b.client(bob) as on_b:
            remote = await live(on_b, {"kinds": [1]})
            note = Event.create(alice.secret, 1, "spaced")
            await accepted(on_a, note)
            assert (await remote.next()).id == note.id
