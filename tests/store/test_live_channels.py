"""`live_channels`: the rows the start-up state repair compares (issue 9 item 5), both backends."""

from __future__ import annotations

from buzz.store.sqlbase import SqlStore
from tests.store.helpers import ALICE, BOB, CAROL, add_member, create_channel, delete_channel, remove_member


async def test_live_channels_with_active_members(store: SqlStore) -> None:
    kept = await create_channel(store, "private", members=[BOB, CAROL])
    await remove_member(store, kept, CAROL)
    gone = await create_channel(store, members=[BOB])
    await delete_channel(store, gone)
    other = await create_channel(store, owner=BOB)
    await add_member(store, other, ALICE, by=BOB)
    live = await store.live_channels()
    got = {channel.id: {(m.pubkey, m.role) for m in members} for channel, members in live}
    assert got == {
        kept: {(ALICE.pubkey, "owner"), (BOB.pubkey, "member")},
        other: {(BOB.pubkey, "owner"), (ALICE.pubkey, "member")},
    }
    assert [c.id for c, _ in live] == sorted(got)
    for channel, members in live:  # the same rows, in the same order, as one channel's read
        assert channel == await store.get_channel(channel.id)
        assert members == await store.active_members(channel.id)
