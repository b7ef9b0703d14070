"""Writes: idempotence, the replacement tie rule, deletions (relay.md §2.4, §3.1, §10, §13.3)."""

from __future__ import annotations

import asyncio
import random

import pytest

from buzz.core.event import Event
from buzz.core.stored import StoredEvent, UnverifiedEnvelope
from buzz.store.base import (
    Channel,
    ChannelExists,
    CreateChannel,
    DeleteAddress,
    EventStore,
    SoftDelete,
    StoreError,
)
from tests.store.helpers import (
    ALICE,
    BOB,
    DELETED,
    DUPLICATE,
    STORED,
    SUPERSEDED,
    T0,
    by_id,
    create_channel,
    flt,
    insert_all,
    make,
    query_ids,
)


async def test_read_back_is_verified_with_received_at_and_channel(store: EventStore) -> None:
    """relay.md §2.4 item 2, §18 item 7."""
    channel = await create_channel(store)
    sent = make(9, "hello", [["h", channel]], channel=channel, received_at=T0 + 5)
    assert await store.insert(sent) is STORED
    got = await store.get(sent.event.id)
    assert got is not None
    assert got.verified is True
    assert got.event == sent.event
    assert (got.received_at, got.channel_id) == (T0 + 5, channel)
    [queried] = await store.query([flt(ids=[sent.event.id])], ALICE.pubkey)
    assert queried.verified and queried.channel_id == channel and queried.event == sent.event


async def test_content_and_tags_round_trip_byte_exact(store: EventStore) -> None:
    text = 'quote " backslash \\ nl \n nul \0 emoji 🐝 \u2028 é'
    sent = make(1, text, [["t", "nul\0in tag"], ["x", "a", "b", "c"], ["long-name", "v"]])
    await store.insert(sent)
    got = await store.get(sent.event.id)
    assert got is not None and got.event == sent.event
    assert await query_ids(store, flt(tag_t=["nul\0in tag"])) == [sent.event.id]


async def test_unverified_envelope_refused(store: EventStore) -> None:
    """relay.md §2.4 item 3, §18 item 6."""
    event = Event.create(ALICE.secret, 1, "x", created_at=T0)
    with pytest.raises(UnverifiedEnvelope):
        await store.insert(StoredEvent(event))
    assert await store.get(event.id, include_deleted=True) is None


async def test_ephemeral_kind_refused(store: EventStore) -> None:
    """relay.md §3.1 item 6."""
    with pytest.raises(ValueError):
        await store.insert(make(20002))


async def test_known_id_is_duplicate(store: EventStore) -> None:
    """relay.md §13.3 item 1."""
    note = make(1, "once")
    assert await insert_all(store, note, note) == [STORED, DUPLICATE]
    assert await store.count([flt()], None) == 1


async def test_duplicate_applies_no_effect(store: EventStore) -> None:
    target, other = make(1, "target"), make(1, "other")
    await insert_all(store, target, other)
    assert await store.insert(other, [SoftDelete(target.event.id)]) is DUPLICATE
    assert await store.get(target.event.id) is not None


@pytest.mark.parametrize("kind", [0, 10002, 30023])
async def test_newer_version_wins_older_loses(store: EventStore, kind: int) -> None:
    """relay.md §3.1 item 4, §18 item 9."""
    tags = [["d", "slug"]]
    old, new, older = (make(kind, str(t), tags, created_at=T0 + t) for t in (1, 2, 0))
    assert await insert_all(store, old, new, older) == [STORED, STORED, SUPERSEDED]
    assert await query_ids(store, flt(kinds=[kind])) == [new.event.id]
    assert await store.get(old.event.id) is None
    superseded = await store.get(old.event.id, include_deleted=True)
    assert superseded is not None and superseded.event == old.event
    assert await store.insert(old) is SUPERSEDED  # a superseded version is never revived
    assert await store.insert(new) is DUPLICATE  # the served version again


@pytest.mark.parametrize("kind", [0, 30023])
@pytest.mark.parametrize("low_first", [True, False], ids=["low-first", "high-first"])
async def test_equal_created_at_keeps_lowest_id(store: EventStore, kind: int, low_first: bool) -> None:
    """relay.md §3.1 item 4, §18 item 10: whatever the arrival order."""
    low, high = by_id(make(kind, "a", [["d", "x"]]), make(kind, "b", [["d", "x"]]))
    outcomes = await insert_all(store, *((low, high) if low_first else (high, low)))
    assert outcomes == ([STORED, SUPERSEDED] if low_first else [STORED, STORED])
    assert await query_ids(store, flt(kinds=[kind])) == [low.event.id]


async def test_concurrent_versions_settle_on_the_winner(store: EventStore) -> None:
    """relay.md §13.3 item 2: the per-key lock keeps one live version, the tie-rule winner."""
    versions = [make(0, f"v{i}", created_at=T0 + i % 3) for i in range(12)]
    random.Random(7).shuffle(versions)
    await asyncio.gather(*(store.insert(v) for v in versions))
    newest = [v for v in versions if v.event.created_at == T0 + 2]
    assert await query_ids(store, flt(kinds=[0])) == [by_id(*newest)[0].event.id]


async def test_addressable_versions_by_d_coexist(store: EventStore) -> None:
    """relay.md §3.1 items 1 and 3, §18 item 11: no d tag and `["d", ""]` share one key."""
    a1 = make(30023, "a1", [["d", "a"]], created_at=T0)
    b1 = make(30023, "b1", [["d", "b"]], created_at=T0)
    a2 = make(30023, "a2", [["d", "a"]], created_at=T0 + 1)
    bare = make(30023, "bare", created_at=T0)
    empty_d = make(30023, "empty", [["d", ""]], created_at=T0 + 1)
    other_author = make(30023, "bob", [["d", "a"]], created_at=T0, who=BOB)
    assert await insert_all(store, a1, b1, a2, bare, empty_d, other_author) == [STORED] * 6
    served = set(await query_ids(store, flt(kinds=[30023])))
    assert served == {a2.event.id, b1.event.id, empty_d.event.id, other_author.event.id}


async def test_kind5_e_deletion_then_resubmission_is_deleted(store: EventStore) -> None:
    """relay.md §10.1 items 4–5, §10.4."""
    target = make(1, "to delete")
    await store.insert(target)
    deletion = make(5, tags=[["e", target.event.id]], created_at=T0 + 1)
    assert await store.insert(deletion, [SoftDelete(target.event.id)]) is STORED
    assert await query_ids(store, flt()) == [deletion.event.id]
    assert await store.get(target.event.id) is None
    assert await store.insert(target) is DELETED
    assert await store.get(target.event.id) is None
    assert await store.get(target.event.id, include_deleted=True) is not None


async def test_deleted_replaceable_is_not_revived_by_older(store: EventStore) -> None:
    """relay.md §3.1 item 4, §18 item 99."""
    older, live = make(0, "v1", created_at=T0), make(0, "v2", created_at=T0 + 1)
    await insert_all(store, older, live)
    await store.insert(make(5, tags=[["e", live.event.id]], created_at=T0 + 2), [SoftDelete(live.event.id)])
    assert await store.insert(older) is SUPERSEDED  # the deleted v2 is still the newer version
    assert await store.insert(live) is DELETED
    assert await query_ids(store, flt(kinds=[0])) == []
    newer = make(0, "v3", created_at=T0 + 3)
    assert await store.insert(newer) is STORED
    assert await query_ids(store, flt(kinds=[0])) == [newer.event.id]


async def test_address_deletion_blocks_older_accepts_newer(store: EventStore) -> None:
    """relay.md §3.1 item 5, §10.1 item 4, §18 item 77."""
    v1 = make(30023, "v1", [["d", "post"]], created_at=T0 + 100)
    other_d = make(30023, "keep", [["d", "other"]], created_at=T0 + 100)
    await insert_all(store, v1, other_d)
    deletion = make(5, tags=[["a", f"30023:{ALICE.pubkey}:post"]], created_at=T0 + 200)
    effect = DeleteAddress(30023, ALICE.pubkey, "post", T0 + 200)
    assert await store.insert(deletion, [effect]) is STORED
    assert await query_ids(store, flt(kinds=[30023])) == [other_d.event.id]
    before = make(30023, "v2", [["d", "post"]], created_at=T0 + 150)
    at = make(30023, "v3", [["d", "post"]], created_at=T0 + 200)
    after = make(30023, "v4", [["d", "post"]], created_at=T0 + 201)
    assert await insert_all(store, before, at, after) == [DELETED, DELETED, STORED]
    assert await store.insert(v1) is DELETED
    assert await query_ids(store, flt(kinds=[30023])) == [after.event.id, other_d.event.id]


async def test_address_deletion_of_replaceable_ignores_d(store: EventStore) -> None:
    profile = make(0, "me", created_at=T0)
    await store.insert(profile)
    await store.insert(make(5, created_at=T0 + 5), [DeleteAddress(0, ALICE.pubkey, "", T0 + 5)])
    assert await query_ids(store, flt(kinds=[0])) == []
    assert await store.insert(make(0, "again", created_at=T0 + 4)) is DELETED
    assert await store.insert(make(0, "later", created_at=T0 + 6)) is STORED


async def test_channel_exists_rolls_back_the_insert(store: EventStore) -> None:
    """relay.md §4.5 (9007 on a taken id): nothing of the second transaction remains."""
    channel_id = await create_channel(store)
    again = make(9007, "again", [["h", channel_id], ["name", "x"]], channel=channel_id)
    channel = Channel(channel_id, "x", "private", ALICE.pubkey, T0)
    with pytest.raises(ChannelExists):
        await store.insert(again, [CreateChannel(channel)])
    assert await store.get(again.event.id, include_deleted=True) is None
    stored = await store.get_channel(channel_id)
    assert stored is not None and stored.visibility == "open"


async def test_event_in_unknown_channel_fails_and_rolls_back(store: EventStore) -> None:
    """events.channel_id references channels: a relay bug surfaces as StoreError, and the
    failed transaction leaves nothing behind (relay.md §8: no partial transaction)."""
    stray = make(9, "lost", [["h", "0f0f0f0f-0000-4000-8000-000000000000"]])
    with pytest.raises(StoreError):
        await store.insert(stray.with_channel("0f0f0f0f-0000-4000-8000-000000000000"))
    assert await store.get(stray.event.id, include_deleted=True) is None
    assert await store.insert(make(1, "still writable")) is STORED
