"""Point reads (channel row, member row, event by id) answer what the database holds right
now: SQLite serves them on the event loop and keeps answers while the file is unchanged,
so every commit (ours or another process's) must show in the next read."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from buzz.store.sqlbase import SqlStore
from buzz.store.sqlite import SqliteStore
from tests.store.helpers import (
    ALICE,
    BOB,
    STORED,
    add_member,
    create_channel,
    delete_channel,
    make,
    remove_member,
)


async def test_point_reads_follow_our_own_commits(store: SqlStore) -> None:
    channel_id = await create_channel(store)
    assert (await store.get_channel(channel_id)) is not None
    assert await store.get_member(channel_id, BOB.pubkey) is None
    await add_member(store, channel_id, BOB)
    member = await store.get_member(channel_id, BOB.pubkey)
    assert member is not None and member.removed_at is None
    await remove_member(store, channel_id, BOB)
    member = await store.get_member(channel_id, BOB.pubkey)
    assert member is not None and member.removed_at is not None

    note = make(1, "hello", who=ALICE)
    assert await store.get(note.event.id) is None
    assert await store.insert(note) is STORED
    got = await store.get(note.event.id)
    assert got is not None and got.event.id == note.event.id

    await delete_channel(store, channel_id)
    assert await store.get_channel(channel_id) is None
    deleted = await store.get_channel(channel_id, include_deleted=True)
    assert deleted is not None and deleted.deleted_at is not None


async def test_sqlite_point_reads_see_another_connections_commit(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "relay.sqlite3")
    await store.open()
    try:
        channel_id = await create_channel(store)
        before = await store.get_channel(channel_id)
        assert before is not None and before.archived_at is None
        assert await store.get_channel(channel_id) == before  # answered again, unchanged file
        other = sqlite3.connect(store.path, isolation_level=None)  # as another process would
        try:
            other.execute("UPDATE channels SET archived_at = 123 WHERE id = ?", (channel_id,))
        finally:
            other.close()
        after = await store.get_channel(channel_id)
        assert after is not None and after.archived_at == 123
    finally:
        await store.close()
