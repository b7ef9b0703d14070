"""SQLite backend (relay.md §13.1 item 1): one writer connection, a small pool of readers.

Every connection is an aiosqlite connection, so each statement runs on that connection's own
thread and never blocks the event loop. Writes take one asyncio lock around
`BEGIN IMMEDIATE … COMMIT` on the writer: the single writer is also the per-key lock of
relay.md §13.3 item 2. Readers run in WAL mode beside the writer and see each commit as soon
as it returns.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiosqlite

from buzz.store.base import StoreError
from buzz.store.dialect import SQLITE, Conn, Dialect
from buzz.store.sqlbase import P, SqlStore, T, TxnFn

BUSY_TIMEOUT_MS = 5000  # relay.md §13.1: at least 5 s
_PRAGMAS = (
    f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}",
    "PRAGMA foreign_keys = ON",
    "PRAGMA synchronous = FULL",
)


class _SqliteConn:
    """`Conn` over an aiosqlite connection: one thread hop per statement."""

    dialect: Dialect = SQLITE

    def __init__(self, conn: aiosqlite.Connection) -> None:
        self._conn = conn

    async def fetch(self, sql: str, args: Sequence[object] = ()) -> Sequence[Sequence[Any]]:
        return list(await self._conn.execute_fetchall(sql, args))

    async def execute(self, sql: str, args: Sequence[object] = ()) -> None:
        await self._conn.execute_fetchall(sql, args)

    async def executemany(self, sql: str, rows: Sequence[Sequence[object]]) -> None:
        cursor = await self._conn.executemany(sql, rows)
        await cursor.close()


class SqliteStore(SqlStore):
    """The EventStore on a SQLite file (WAL, foreign_keys=ON, busy_timeout 5 s, synchronous=FULL).

    `path` is the database file (its folder is created); `readers` the number of read
    connections. Call `open()` before use and `close()` at the end.
    """

    dialect: Dialect = SQLITE

    def __init__(self, path: str | Path, *, readers: int = 4) -> None:
        if readers < 1:
            raise ValueError("readers must be at least 1")
        self.path = Path(path)
        self._reader_count = readers
        self._writer: aiosqlite.Connection | None = None
        self._readers: asyncio.Queue[aiosqlite.Connection] = asyncio.Queue()
        self._all_readers: list[aiosqlite.Connection] = []
        self._write_lock = asyncio.Lock()

    async def open(self) -> None:
        """Open the writer, switch to WAL, create the schema, then open the readers.

        Raises StoreError when the file cannot be opened or WAL cannot be enabled.
        """
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._writer = await self._connect()
            rows = await self._writer.execute_fetchall("PRAGMA journal_mode = WAL")
            if next(iter(rows))[0] != "wal":
                raise StoreError(f"{self.path}: cannot enable WAL journal mode")
            await self._write(_create_schema_txn)
            for _ in range(self._reader_count):
                reader = await self._connect()
                await reader.execute("PRAGMA query_only = ON")
                self._all_readers.append(reader)
                self._readers.put_nowait(reader)
        except (sqlite3.Error, OSError) as exc:
            await self.close()
            raise StoreError(f"cannot open {self.path}: {exc}") from exc

    async def _connect(self) -> aiosqlite.Connection:
        conn = await aiosqlite.connect(self.path, isolation_level=None)
        for pragma in _PRAGMAS:
            await conn.execute(pragma)
        return conn

    async def close(self) -> None:
        """Close the readers, then the writer (the last close checkpoints the WAL)."""
        readers, self._all_readers = self._all_readers, []
        self._readers = asyncio.Queue()
        for reader in readers:
            await reader.close()
        writer, self._writer = self._writer, None
        if writer is not None:
            await writer.close()

    async def _write(self, fn: TxnFn[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        # Shielded: a cancelled caller must not cut a transaction in half.
        return await asyncio.shield(self._write_now(fn, *args, **kwargs))

    async def _write_now(self, fn: TxnFn[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        async with self._write_lock:
            writer = self._writer
            if writer is None:
                raise StoreError("store is not open")
            try:
                await writer.execute("BEGIN IMMEDIATE")
                try:
                    result = await fn(_SqliteConn(writer), *args, **kwargs)
                    await writer.execute("COMMIT")
                except BaseException:
                    if writer.in_transaction:
                        await writer.execute("ROLLBACK")
                    raise
            except sqlite3.Error as exc:
                raise StoreError(f"sqlite write failed: {exc}") from exc
            return result

    async def _read(self, fn: TxnFn[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        if not self._all_readers:
            raise StoreError("store is not open")
        reader = await self._readers.get()
        try:
            return await fn(_SqliteConn(reader), *args, **kwargs)
        except sqlite3.Error as exc:
            raise StoreError(f"sqlite read failed: {exc}") from exc
        finally:
            if reader in self._all_readers:  # not closed meanwhile
                self._readers.put_nowait(reader)


async def _create_schema_txn(conn: Conn) -> None:
    for statement in SQLITE.schema:
        await conn.execute(statement)
