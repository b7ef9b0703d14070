"""Channel rows and the stored read scope (relay.md §4.1, §4.3 item 1, §6.3 item 2)."""

from __future__ import annotations

from buzz.store.base import SYSTEM, EventStore, PutMember
from tests.store.helpers import (
    ALICE,
    BOB,
    CAROL,
    T0,
    add_member,
    create_channel,
    delete_channel,
    flt,
    make,
    query_ids,
    remove_member,
)


async def _message(store: EventStore, channel: str, content: str) -> str:
    event = make(9, content, [["h", channel]], channel=channel)
    await store.insert(event)
    return event.event.id


async def test_filter_without_h_covers_global_and_readable_channels(store: EventStore) -> None:
    """relay.md §6.3 item 2, §18 items 38, 40."""
    open_c = await create_channel(store, "open")
    private_c = await create_channel(store, "private", members=[BOB])
    in_open = await _message(store, open_c, "open")
    in_private = await _message(store, private_c, "private")
    note = make(1, "global")
    await store.insert(note)
    everything = {in_open, in_private, note.event.id}
    kinds = flt(kinds=[1, 9])
    assert set(await query_ids(store, kinds, reader=BOB.pubkey)) == everything
    assert set(await query_ids(store, kinds, reader=CAROL.pubkey)) == {in_open, note.event.id}
    assert set(await query_ids(store, kinds, reader=None)) == {in_open, note.event.id}
    assert set(await query_ids(store, kinds, reader=SYSTEM)) == everything
    assert await query_ids(store, flt(ids=[in_private]), reader=CAROL.pubkey) == []
    assert await store.count([kinds], CAROL.pubkey) == 2


async def test_removed_member_loses_and_readded_member_regains(store: EventStore) -> None:
    """relay.md §4.1 item 3: removal is soft; re-adding clears it."""
    private_c = await create_channel(store, "private", members=[BOB])
    message = await _message(store, private_c, "secret")
    await remove_member(store, private_c, BOB)
    assert await query_ids(store, flt(kinds=[9]), reader=BOB.pubkey) == []
    member = await store.get_member(private_c, BOB.pubkey)
    assert member is not None and not member.active and member.removed_by == ALICE.pubkey
    await add_member(store, private_c, BOB)
    assert await query_ids(store, flt(kinds=[9]), reader=BOB.pubkey) == [message]


async def test_deleted_channel_is_served_to_nobody(store: EventStore) -> None:
    """relay.md §4.1 item 2, §4.5 (9008), §18 item 53."""
    channel = await create_channel(store, "open", members=[BOB])
    message = await _message(store, channel, "bye")
    await delete_channel(store, channel)
    for reader in (ALICE.pubkey, BOB.pubkey, None):
        assert await query_ids(store, flt(kinds=[9]), reader=reader) == []
        assert await query_ids(store, flt(tag_h=[channel]), reader=reader) == []
    assert await query_ids(store, flt(ids=[message]), reader=SYSTEM) == [message]
    assert await store.get_channel(channel) is None
    deleted = await store.get_channel(channel, include_deleted=True)
    assert deleted is not None and deleted.deleted_at is not None


async def test_readable_channels(store: EventStore) -> None:
    """relay.md §4.3 item 1: exists, not deleted, open or an active member."""
    open_c = await create_channel(store, "open")
    private_c = await create_channel(store, "private", members=[BOB])
    deleted_c = await create_channel(store, "open")
    await delete_channel(store, deleted_c)
    unknown = "0f0f0f0f-0000-4000-8000-000000000000"
    asked = [open_c, private_c, deleted_c, unknown]
    assert await store.readable_channels(asked, BOB.pubkey) == {open_c, private_c}
    assert await store.readable_channels(asked, CAROL.pubkey) == {open_c}
    assert await store.readable_channels(asked, None) == {open_c}
    assert await store.readable_channels(asked, SYSTEM) == {open_c, private_c}
    assert await store.readable_channels([], BOB.pubkey) == frozenset()


async def test_channel_and_member_rows(store: EventStore) -> None:
    """relay.md §4.1 items 2–3."""
    channel_id = await create_channel(store, "private")
    channel = await store.get_channel(channel_id)
    assert channel is not None
    assert (channel.name, channel.visibility, channel.channel_type) == ("general", "private", "stream")
    assert (channel.created_by, channel.created_at, channel.ttl_seconds) == (ALICE.pubkey, T0, None)
    owner = await store.get_member(channel_id, ALICE.pubkey)
    assert owner is not None and owner.role == "owner" and owner.active
    assert await store.get_member(channel_id, BOB.pubkey) is None


async def test_put_member_role_none_keeps_the_role(store: EventStore) -> None:
    """relay.md §4.5 (9000): absent role → `member` for a new row, kept for an existing one."""
    channel_id = await create_channel(store, "open")
    join = make(9021, tags=[["h", channel_id]], who=BOB, channel=channel_id)
    await store.insert(join, [PutMember(channel_id, BOB.pubkey, joined_at=T0 + 1)])
    bob = await store.get_member(channel_id, BOB.pubkey)
    assert bob is not None and (bob.role, bob.joined_at, bob.invited_by) == ("member", T0 + 1, None)
    promote = make(9000, tags=[["h", channel_id], ["p", BOB.pubkey], ["role", "admin"]], channel=channel_id)
    await store.insert(promote, [PutMember(channel_id, BOB.pubkey, "admin", ALICE.pubkey, T0 + 2)])
    again = make(9000, "again", tags=[["h", channel_id], ["p", BOB.pubkey]], channel=channel_id)
    await store.insert(again, [PutMember(channel_id, BOB.pubkey, joined_at=T0 + 3)])
    bob = await store.get_member(channel_id, BOB.pubkey)
    assert bob is not None and (bob.role, bob.joined_at, bob.invited_by) == ("admin", T0 + 1, None)
