"""Waiting and asserting helpers for the replica tests (real relays, real Redis)."""

from __future__ import annotations

import asyncio
import time

from redis.asyncio import Redis

from buzz.client.relay_client import Subscription
from buzz.core.event import Event
from tests.huddle.support import AudioPeer, join
from tests.support.deadline import wait_until  # noqa: F401  (re-exported to the replica tests)
from tests.support.relay import Identity, RunningRelay
from tests.workspace.helpers import drain

QUIET_S = 0.3  # how long "nothing more arrives" is watched


async def next_of_kind(sub: Subscription, kind: int, timeout: float = 5.0) -> Event:
    """The next event of `kind` on `sub`, skipping others (e.g. relay-emitted state)."""
    while True:
        event = await sub.next(timeout)
        if event.kind == kind:
            return event


async def nothing_more(*subs: Subscription) -> None:
    """No further event reaches any of `subs` within QUIET_S."""
    await asyncio.sleep(QUIET_S)
    for sub in subs:
        extra = drain(sub)
        assert extra == [], f"{sub.sub_id} got {[e.id for e in extra]}"


async def closed(sub: Subscription, timeout: float = 5.0) -> str:
    """Wait for the relay's CLOSED on `sub`; returns its reason. Events before it are skipped."""
    deadline = time.monotonic() + timeout
    while sub.closed_reason is None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"{sub.sub_id} was not closed")
        try:
            await asyncio.wait_for(sub.queue.get(), remaining)
        except TimeoutError:
            continue
    return sub.closed_reason


async def subscribers(redis: Redis, topic: str) -> int:
    """PUBSUB NUMSUB of `topic`: how many connections (replicas) subscribe to it."""
    return dict(await redis.pubsub_numsub(topic)).get(topic.encode(), 0)


def runtime(running: RunningRelay) -> str:
    """The mesh runtime id of an in-process replica (its lease owner name)."""
    mesh = running.relay.huddles.mesh
    assert mesh is not None
    return mesh.runtime_id


async def seated_across(a: RunningRelay, b: RunningRelay, cid: str, *who: Identity) -> list[AudioPeer]:
    """`who[0]` joins on A (so A owns the room), then each of the others on B (through A)."""
    peers = [await join(a, who[0], cid)] + [await join(b, w, cid) for w in who[1:]]
    assert [p.joined["type"] for p in peers] == ["joined"] * len(peers)  # type: ignore[index]
    return peers
