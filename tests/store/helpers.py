"""Builders for store tests: fixed identities, signed and verified envelopes, channels."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from buzz.core.channel_id import new_channel_id
from buzz.core.event import Event
from buzz.core.filters import Filter
from buzz.core.keys import public_key
from buzz.core.stored import StoredEvent, verify_stored
from buzz.store.base import (
    Channel,
    CreateChannel,
    DeleteChannel,
    Effect,
    EventStore,
    InsertOutcome,
    PutMember,
    Reader,
    RemoveMember,
    Visibility,
)

T0 = 1_700_000_000
_nonce = itertools.count()
STORED, DUPLICATE = InsertOutcome.STORED, InsertOutcome.DUPLICATE
SUPERSEDED, DELETED = InsertOutcome.SUPERSEDED, InsertOutcome.DELETED  # never served (issue 25 item 4)


@dataclass(frozen=True)
class Who:
    secret: str
    pubkey: str

    @classmethod
    def of(cls, secret: str) -> Who:
        return cls(secret, public_key(secret))


ALICE, BOB, CAROL = Who.of("11" * 32), Who.of("22" * 32), Who.of("33" * 32)


def make(
    kind: int = 1,
    content: str = "",
    tags: Iterable[Sequence[str]] = (),
    created_at: int = T0,
    who: Who = ALICE,
    channel: str | None = None,
    received_at: int | None = None,
) -> StoredEvent:
    """A signed event wrapped by the real verifier, with its derived channel."""
    event = Event.create(who.secret, kind, content, tags, created_at)
    return verify_stored(event, received_at).with_channel(channel)


def flt(**fields: Any) -> Filter:
    """A parsed filter; tag keys are spelled `tag_x` (e.g. `tag_t=["a"]` for `#t`)."""
    obj = {("#" + k[4:] if k.startswith("tag_") else k): v for k, v in fields.items()}
    return Filter.parse(obj)


def ids(events: Iterable[StoredEvent]) -> list[str]:
    return [s.event.id for s in events]


def by_id(*events: StoredEvent) -> list[StoredEvent]:
    """Events sorted by id ascending (the tie order)."""
    return sorted(events, key=lambda s: s.event.id)


async def insert_all(store: EventStore, *events: StoredEvent) -> list[InsertOutcome]:
    return [await store.insert(e) for e in events]


async def query_ids(store: EventStore, *filters: Filter, reader: Reader = None, **kw: Any) -> list[str]:
    return ids(await store.query(list(filters), reader, **kw))


async def create_channel(
    store: EventStore, visibility: Visibility = "open", owner: Who = ALICE, members: Iterable[Who] = ()
) -> str:
    """A channel created by a kind 9007 of `owner` (who becomes owner), plus `members`."""
    channel_id = new_channel_id()
    create = make(9007, tags=[["h", channel_id], ["name", "general"]], who=owner, channel=channel_id)
    channel = Channel(channel_id, "general", visibility, owner.pubkey, T0)
    effects: list[Effect] = [CreateChannel(channel), PutMember(channel_id, owner.pubkey, "owner")]
    assert await store.insert(create, effects) is STORED
    for member in members:
        await add_member(store, channel_id, member, by=owner)
    return channel_id


async def add_member(store: EventStore, channel_id: str, member: Who, by: Who = ALICE) -> None:
    tags = [["h", channel_id], ["p", member.pubkey]]
    put = make(9000, str(next(_nonce)), tags, who=by, channel=channel_id)
    assert await store.insert(put, [PutMember(channel_id, member.pubkey, invited_by=by.pubkey)]) is STORED


async def remove_member(store: EventStore, channel_id: str, member: Who, by: Who = ALICE) -> None:
    tags = [["h", channel_id], ["p", member.pubkey]]
    rm = make(9001, str(next(_nonce)), tags, who=by, channel=channel_id)
    assert await store.insert(rm, [RemoveMember(channel_id, member.pubkey, removed_by=by.pubkey)]) is STORED


async def delete_channel(store: EventStore, channel_id: str, by: Who = ALICE) -> None:
    delete = make(9008, tags=[["h", channel_id]], who=by, channel=channel_id)
    assert await store.insert(delete, [DeleteChannel(channel_id)]) is STORED
