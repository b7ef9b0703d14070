"""Workspace tables and effects of the store (relay.md §4.5, §4.6 item 2, §4.8, §9 items 1 and 3,
§10.1 item 4), on SQLite and PostgreSQL through the `store` fixture."""

from __future__ import annotations

import pytest

from buzz.core.channel_id import new_channel_id
from buzz.core.errors import Duplicate
from buzz.store.base import (
    Channel,
    CreateChannel,
    DmExists,
    EventStore,
    PutMember,
    PutReaction,
    ReactionExists,
    RecordThread,
    RegisterDm,
    SetDmHidden,
    SoftDelete,
    UpdateChannel,
)
from tests.store.helpers import ALICE, BOB, CAROL, STORED, SUPERSEDED, T0, create_channel, make, remove_member


async def test_update_channel(store: EventStore) -> None:
    channel_id = await create_channel(store)
    changes = (
        ("name", "renamed"),
        ("topic", "t"),
        ("ttl_seconds", 60),
        ("archived_at", T0 + 5),
        ("visibility", "private"),
    )
    edit = make(9002, "1", [["h", channel_id]], channel=channel_id)
    assert await store.insert(edit, [UpdateChannel(channel_id, changes)]) is STORED
    row = await store.get_channel(channel_id)
    assert row is not None
    assert (row.name, row.topic, row.ttl_seconds, row.archived_at, row.visibility) == (
        "renamed",
        "t",
        60,
        T0 + 5,
        "private",
    )
    clear = make(9002, "2", [["h", channel_id]], channel=channel_id)
    await store.insert(clear, [UpdateChannel(channel_id, (("ttl_seconds", None), ("archived_at", None)))])
    row = await store.get_channel(channel_id)
    assert row is not None and (row.ttl_seconds, row.archived_at) == (None, None)
    with pytest.raises(ValueError):
        await store.insert(
            make(9002, "3", [["h", channel_id]], channel=channel_id),
            [UpdateChannel(channel_id, (("created_by", "x"),))],
        )


async def test_active_members(store: EventStore) -> None:
    channel_id = await create_channel(store, members=[BOB, CAROL])
    await remove_member(store, channel_id, BOB)
    members = await store.active_members(channel_id)
    assert sorted((m.pubkey, m.role) for m in members) == sorted(
        [(ALICE.pubkey, "owner"), (CAROL.pubkey, "member")]
    )
    assert [m.joined_at for m in members] == sorted(m.joined_at for m in members)
    assert await store.active_members(new_channel_id()) == []


async def test_thread_positions(store: EventStore) -> None:
    channel_id = await create_channel(store)
    root = make(9, "root", [["h", channel_id]], channel=channel_id)
    reply = make(9, "reply", [["h", channel_id], ["e", root.event.id, "", "reply"]], channel=channel_id)
    await store.insert(root)
    assert (
        await store.insert(reply, [RecordThread(reply.event.id, root.event.id, root.event.id, 1)]) is STORED
    )
    assert await store.get_thread(reply.event.id) == (root.event.id, 1)
    assert await store.get_thread(root.event.id) is None


async def test_reaction_index(store: EventStore) -> None:
    channel_id = await create_channel(store)
    target = make(9, "hi", [["h", channel_id]], channel=channel_id)
    await store.insert(target)
    first = make(7, "+", [["e", target.event.id]], channel=channel_id, who=BOB)
    second = make(7, "+", [["e", target.event.id], ["x", "2"]], channel=channel_id, who=BOB)
    assert (
        await store.insert(first, [PutReaction(first.event.id, BOB.pubkey, target.event.id, "+")]) is STORED
    )
    assert await store.has_reaction(BOB.pubkey, target.event.id, "+")
    with pytest.raises(ReactionExists) as err:
        await store.insert(second, [PutReaction(second.event.id, BOB.pubkey, target.event.id, "+")])
    assert isinstance(err.value, Duplicate) and str(err.value) == "duplicate: reaction already exists"
    assert await store.get(second.event.id, include_deleted=True) is None  # rolled back
    await store.insert(make(5, "", [["e", first.event.id]], who=BOB), [SoftDelete(first.event.id)])
    assert not await store.has_reaction(BOB.pubkey, target.event.id, "+")
    assert (
        await store.insert(second, [PutReaction(second.event.id, BOB.pubkey, target.event.id, "+")]) is STORED
    )


async def test_dm_sets_and_hidden(store: EventStore) -> None:
    channel_id = new_channel_id()
    participants = frozenset({ALICE.pubkey, BOB.pubkey})
    dm = Channel(channel_id, "", "private", ALICE.pubkey, T0, channel_type="dm")
    effects = [CreateChannel(dm), *[PutMember(channel_id, pk, "member") for pk in participants]]
    opened = make(41010, "", [["p", BOB.pubkey]], channel=channel_id)
    assert await store.insert(opened, [*effects, RegisterDm(channel_id, participants)]) is STORED
    assert await store.find_dm(participants) == channel_id
    assert await store.find_dm(frozenset({ALICE.pubkey})) is None
    other_id = new_channel_id()
    other = Channel(other_id, "", "private", BOB.pubkey, T0, channel_type="dm")
    racing = make(41010, "", [["p", ALICE.pubkey]], who=BOB, channel=other_id)
    with pytest.raises(DmExists):
        await store.insert(racing, [CreateChannel(other), RegisterDm(other_id, participants)])
    assert await store.get_channel(other_id) is None  # the losing DM was rolled back whole
    hide = make(41012, "", [["h", channel_id]], channel=channel_id)
    await store.insert(hide, [SetDmHidden(channel_id, ALICE.pubkey, True)])
    assert await store.is_dm_hidden(channel_id, ALICE.pubkey)
    assert not await store.is_dm_hidden(channel_id, BOB.pubkey)
    reopen = make(41010, "again", [["p", BOB.pubkey]], channel=channel_id)
    await store.insert(reopen, [SetDmHidden(channel_id, ALICE.pubkey, False)])
    assert not await store.is_dm_hidden(channel_id, ALICE.pubkey)


async def test_latest_created_at_counts_superseded_versions(store: EventStore) -> None:
    channel_id = await create_channel(store)
    assert await store.latest_created_at(39000, ALICE.pubkey, channel_id) is None
    old = make(39000, "", [["d", channel_id]], created_at=T0 + 10, channel=channel_id)
    new = make(39000, "", [["d", channel_id], ["name", "x"]], created_at=T0 + 20, channel=channel_id)
    assert [await store.insert(old), await store.insert(new)] == [STORED, STORED]
    assert await store.latest_created_at(39000, ALICE.pubkey, channel_id) == T0 + 20
    older = make(39000, "", [["d", channel_id], ["name", "y"]], created_at=T0 + 15, channel=channel_id)
    assert await store.insert(older) is SUPERSEDED
    assert await store.latest_created_at(39000, ALICE.pubkey, channel_id) == T0 + 20
