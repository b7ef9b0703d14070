"""Backend plumbing: open_store, SQLite pragmas (relay.md §13.1), reopening, health."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import asyncpg
import pytest

from buzz.store import open_store
from buzz.store.base import InsertOutcome, StoreError
from buzz.store.postgres import PostgresStore
from buzz.store.sqlbase import SqlStore
from buzz.store.sqlite import SqliteStore
from tests.store.helpers import flt, make, query_ids
from tests.support.pg import temp_database


def test_open_store_picks_the_backend(tmp_path: Path) -> None:
    """relay.md §13.1, §16."""
    for url in ("postgres://u@h/db", "postgresql://u@h/db"):
        pg = open_store(url, tmp_path)
        assert isinstance(pg, PostgresStore) and pg.dsn == url
    default = open_store(None, tmp_path)
    assert isinstance(default, SqliteStore) and default.path == tmp_path / "relay.sqlite3"
    assert isinstance(empty := open_store("", tmp_path), SqliteStore) and empty.path == default.path
    explicit = open_store(f"sqlite://{tmp_path}/x.db", tmp_path)
    assert isinstance(explicit, SqliteStore) and explicit.path == tmp_path / "x.db"
    with pytest.raises(ValueError, match="mysql"):
        open_store("mysql://h/db", tmp_path)


async def test_sqlite_runs_in_wal_with_required_pragmas(tmp_path: Path) -> None:
    """relay.md §13.1 item 1, §18 item 90."""
    store = SqliteStore(tmp_path / "data" / "relay.sqlite3")
    await store.open()
    try:
        writer = store._writer
        assert writer is not None
        pragma = {
            name: writer.execute(f"PRAGMA {name}").fetchone()[0]
            for name in ("journal_mode", "foreign_keys", "busy_timeout", "synchronous")
        }
        assert pragma == {"journal_mode": "wal", "foreign_keys": 1, "busy_timeout": 5000, "synchronous": 2}
    finally:
        await store.close()
    with sqlite3.connect(store.path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


async def _reopened(store: SqlStore) -> SqlStore:
    assert isinstance(store, SqliteStore | PostgresStore)
    fresh = SqliteStore(store.path) if isinstance(store, SqliteStore) else PostgresStore(store.dsn)
    await fresh.open()
    return fresh


async def test_rows_survive_reopen(store: SqlStore) -> None:
    """Insert is durable on return; opening again keeps the schema and the rows."""
    note = make(1, "durable")
    await store.insert(note)
    await store.close()
    again = await _reopened(store)
    try:
        assert await query_ids(again, flt()) == [note.event.id]
    finally:
        await again.close()


async def test_health_and_closed_store(store: SqlStore) -> None:
    assert await store.is_healthy()
    await store.close()
    assert not await store.is_healthy()
    with pytest.raises(StoreError):
        await store.query([flt()], None)
    with pytest.raises(StoreError):
        await store.insert(make(1))


async def test_reads_run_while_writes_proceed(store: SqlStore) -> None:
    notes = [make(1, str(i)) for i in range(40)]
    writes = asyncio.gather(*(store.insert(n) for n in notes))
    counts = await asyncio.gather(*(store.count([flt()], None) for _ in notes))
    assert set(await writes) == {InsertOutcome.STORED}
    assert all(0 <= n <= 40 for n in counts)
    assert await store.count([flt()], None) == 40


@pytest.mark.postgres
async def test_postgres_open_migrates_a_store_of_the_previous_schema() -> None:
    """A database made before decision 91 (channel index `events_by_channel_id`, a search index
    with a pending list) gets the ordered channel index and a search index without pending list
    at open, keeping its rows."""
    async with temp_database() as dsn:
        store = PostgresStore(dsn)
        await store.open()
        await store.insert(make(1, "kept words"))
        conn = await asyncpg.connect(dsn)
        try:
            await conn.execute(
                "DROP INDEX events_by_channel_time;"
                " CREATE INDEX events_by_channel_id ON events (channel_id, created_at) WHERE channel_id IS NOT NULL;"
                " ALTER INDEX event_search_tsv RESET (fastupdate)"
            )
            await store.close()
            again = PostgresStore(dsn)
            await again.open()
            try:
                names = {
                    r[0]
                    for r in await conn.fetch("SELECT indexname FROM pg_indexes WHERE tablename = 'events'")
                }
                assert "events_by_channel_time" in names and "events_by_channel_id" not in names
                options = await conn.fetchval(
                    "SELECT reloptions FROM pg_class WHERE relname = 'event_search_tsv'"
                )
                assert options == ["fastupdate=off"]
                assert len(await query_ids(again, flt(search="words"))) == 1
            finally:
                await again.close()
        finally:
            await conn.close()
