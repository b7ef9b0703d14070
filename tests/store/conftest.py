"""The `store` fixture: every test in tests/store runs on SQLite and on PostgreSQL."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from buzz.store.postgres import PostgresStore
from buzz.store.sqlbase import SqlStore
from buzz.store.sqlite import SqliteStore
from tests.support.pg import temp_database


@contextlib.asynccontextmanager
async def opened_store(backend: str, sqlite_path: Path) -> AsyncIterator[SqlStore]:
    """An opened store on a fresh database of `backend`: the SQLite file `sqlite_path`, or a new
    PostgreSQL database dropped on exit."""
    if backend == "sqlite":
        sqlite = SqliteStore(sqlite_path)
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


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SqlStore]:
    """An opened store on a fresh database: a SQLite file in tmp_path, or a new PostgreSQL
    database dropped after the test."""
    async with opened_store(request.param, tmp_path / "relay.sqlite3") as opened:
        yield opened
