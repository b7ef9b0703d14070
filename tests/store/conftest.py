"""The `store` fixture: every test in tests/store runs on SQLite and on PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from buzz.store.postgres import PostgresStore
from buzz.store.sqlbase import SqlStore
from buzz.store.sqlite import SqliteStore
from tests.support.pg import temp_database


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SqlStore]:
    """An opened store on a fresh database: a SQLite file in tmp_path, or a new PostgreSQL
    database dropped after the test."""
    if request.param == "sqlite":
        sqlite = SqliteStore(tmp_path / "relay.sqlite3")
        await sqlite.open()
        try:
            yield sqlite
        finally:
            await sqlite.close()
        return
    async with temp_database() as dsn:
        pg = PostgresStore(dsn)
        await pg.open()
        try:
            yield pg
        finally:
            await pg.close()
