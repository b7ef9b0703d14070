"""Builders and assertions shared by the workspace tests (real relay, real WebSocket).

`refused` is the house rule for bad input: the exact `OK false` message, the store unchanged
(every workspace table compared row by row), and the connection still answering.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from buzz.client import RelayClient
from buzz.client.relay_client import PublishResult, Subscription
from buzz.core.channel_id import new_channel_id
from buzz.core.event import Event
from buzz.store.dialect import Conn
from tests.support.deadline import scaled
from tests.support.relay import Identity, RunningRelay

# Every table the workspace writes, with the columns that identify its state.
_TABLES = {
    "events": "id, deleted_at, channel_id",
    "channels": "id, name, about, visibility, channel_type, topic, purpose, ttl_seconds, archived_at, deleted_at",
    "channel_members": "channel_id, pubkey, role, removed_at",
    "reactions": "author, target_id, event_id",
    "event_threads": "event_id, root_id, parent_id, depth",
    "dm_channels": "participants, channel_id",
    "dm_hidden": "channel_id, pubkey",
    "jobs": "id, state, last_seq, disposition, updated_at",
}


async def _dump_txn(conn: Conn) -> dict[str, list[tuple[Any, ...]]]:
    out = {}
    for table, columns in _TABLES.items():
        rows = await conn.fetch(f"SELECT {columns} FROM {table}")
        out[table] = sorted((tuple(row) for row in rows), key=repr)
    return out


async def snapshot(running: RunningRelay) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the workspace tables (for "the store is unchanged" assertions)."""
    return await running.relay.store._read(_dump_txn)  # type: ignore[attr-defined]


async def accepted(client: RelayClient, event: Event) -> PublishResult:
    """Publish and require `OK true` (any message)."""
    result = await client.publish(event)
    assert result.accepted, result.message
    return result


async def refused(running: RunningRelay, client: RelayClient, event: Event, message: str) -> None:
    """`OK false <message>` exactly; the store is unchanged; the connection survives."""
    before = await snapshot(running)
    result = await client.publish(event)
    assert (result.accepted, result.message) == (False, message)
    assert await snapshot(running) == before
    assert await client.count([{"ids": [event.id]}]) == 0  # still connected, nothing stored


async def create_channel(
    client: RelayClient, who: Identity, visibility: str = "open", *extra: Sequence[str], name: str = "general"
) -> str:
    """A kind 9007 by `who` (who becomes owner); returns the new channel id."""
    channel_id = new_channel_id()
    tags = [["h", channel_id], ["name", name], ["visibility", visibility], *map(list, extra)]
    await accepted(client, Event.create(who.secret, 9007, "", tags))
    return channel_id


async def put_user(
    client: RelayClient, who: Identity, channel_id: str, target: str, role: str | None = None
) -> None:
    tags = [["h", channel_id], ["p", target]] + ([["role", role]] if role else [])
    await accepted(client, Event.create(who.secret, 9000, "", tags))


async def message(
    client: RelayClient, who: Identity, channel_id: str, content: str, *tags: Sequence[str]
) -> Event:
    """A kind 9 in the channel, accepted."""
    event = Event.create(who.secret, 9, content, [["h", channel_id], *map(list, tags)])
    await accepted(client, event)
    return event


async def ids(client: RelayClient, *filters: dict[str, Any]) -> set[str]:
    return {e.id for e in await client.query(list(filters))}


async def settle(*clients: RelayClient) -> None:
    """A round trip on each connection: every live event sent before it has been routed."""
    for client in clients:
        await client.count([{"kinds": [1], "authors": ["0" * 64]}])


def drain(sub: Subscription) -> list[Event]:
    """Events already delivered to `sub` (without waiting)."""
    out = []
    while not sub.queue.empty():
        item = sub.queue.get_nowait()
        if item is not None:
            out.append(item)
    return out


async def live(client: RelayClient, *filters: dict[str, Any]) -> Subscription:
    """A live subscription whose stored phase is over (EOSE received)."""
    sub = await client.subscribe(list(filters))
    await asyncio.wait_for(sub.eose.wait(), scaled(5))
    assert sub.closed_reason is None, sub.closed_reason
    return sub
