"""PostgreSQL backend (relay.md §13.1 item 2): an asyncpg pool, READ COMMITTED transactions.

Writes are committed in batches by one writer per store (group commit, `pg_group`, decision
260); replaceable and addressable writes also serialize on `pg_advisory_xact_lock(<key hash>)`
taken by the shared insert transaction (relay.md §13.3 item 2), so several replicas may write
at once.
Schema creation holds a fixed advisory lock so replicas starting together do not race.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

import asyncpg

from buzz.store.base import ReadTimeout, StoreError, StoreUnreachable
from buzz.store.dialect import POSTGRES, BoundedRows, Conn, Dialect
from buzz.store.pg_group import GroupWriter
from buzz.store.sqlbase import P, SqlStore, T, TxnFn
from buzz.store.writes import ROW_COLUMNS

_ROW_COLUMN_NAMES = tuple(c.strip() for c in ROW_COLUMNS.split(","))
_SEARCH_MANY_SQL = (
    "INSERT INTO event_search (event_id, tsv)"
    " SELECT u.id, to_tsvector('simple', u.text) FROM unnest($1::text[], $2::text[]) AS u (id, text)"
)

_SCHEMA_LOCK_ID = 0x62757A7A  # "buzz"
ADMISSION_CONNECTIONS = 2  # the admission lane's pool: lookups of one index probe each
# JIT compilation pays off for long analytic queries only: past `jit_above_cost` (a cost that
# a window page's or a search's estimate reaches on a large store) it added ~60 ms of
# compilation to a query that runs in ~1 ms (decision 91).
_SESSION = {"jit": "off"}
# A member's read (REQ, COUNT, history: the timed lane) is planned for its own values on every
# run. asyncpg prepares each statement once per connection; after five runs PostgreSQL keeps a
# generic plan, made for an average author or channel, which for a busy one reads every row of
# it and sorts them (10× a custom plan at 1M events: decision 337). The setting is sent with the
# statement timeout the lane already sets (no round trip of its own) and ends with the read's
# transaction, so the write path and point reads keep their cached plans.
_CUSTOM_PLANS = "SET LOCAL plan_cache_mode = force_custom_plan"
_DRIVER_ERRORS = (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, asyncio.TimeoutError)


class _Connection(asyncpg.Connection):  # type: ignore[misc]
    """A pool connection released without the reset statement (decision 261).

    asyncpg's reset (`pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *; RESET ALL`) is one more
    round trip on every release, ~15 % of the relay's CPU per event when most point reads are
    one query each. This store leaves no session state behind: advisory locks are
    transaction-scoped, no LISTEN, no cursor outside a transaction, no SET. An open
    transaction is still rolled back on release (asyncpg does that before the query)."""

    def get_reset_query(self) -> str:
        return ""


class _LeaderGone(Exception):
    """The read a point read joined was cancelled: the joiner reads for itself."""


class _Stopped(Exception):
    """A timed read's budget ran out between two statements."""


class _PgConn:
    """`Conn` over an asyncpg connection."""

    dialect: Dialect = POSTGRES

    def __init__(self, conn: asyncpg.Connection, deadline: float | None = None) -> None:
        self._conn = conn
        self._deadline = deadline  # loop time a timed read stops at (`PostgresStore._timed_read`)

    async def fetch(self, sql: str, args: Sequence[object] = ()) -> Sequence[Sequence[Any]]:
        await self._before_statement()
        rows: list[asyncpg.Record] = await self._conn.fetch(sql, *args)
        return rows

    async def _before_statement(self) -> None:
        if self._deadline is not None:
            # Each statement of a timed read gets what is left of its budget, so a read of
            # many pages stops at its deadline as one statement does.
            left_ms = int((self._deadline - asyncio.get_running_loop().time()) * 1000)
            if left_ms < 1:
                raise _Stopped
            await self._conn.execute(f"SET LOCAL statement_timeout = {left_ms}; {_CUSTOM_PLANS}")

    async def fetch_bounded(
        self, sql: str, args: Sequence[object], max_bytes: int, size_of: Callable[[Sequence[Any]], int]
    ) -> tuple[Sequence[Sequence[Any]], bool]:
        if not self._conn.is_in_transaction():  # a cursor needs one; only small reads have none
            return await self.fetch(sql, args), False
        await self._before_statement()
        bounded = BoundedRows(max_bytes, size_of)
        cursor = await self._conn.cursor(sql, *args)
        while chunk := await cursor.fetch(bounded.next_chunk()):
            if bounded.take(chunk):
                return bounded.rows, True
        return bounded.rows, False

    async def execute(self, sql: str, args: Sequence[object] = ()) -> None:
        await self._conn.execute(sql, *args)

    async def executemany(self, sql: str, rows: Sequence[Sequence[object]]) -> None:
        await self._conn.executemany(sql, rows)

    async def insert(self, sql: str, args: Sequence[object] = ()) -> object | None:
        key: object | None = await self._conn.fetchval(sql + " RETURNING id", *args)
        return key

    async def index_search(self, key: object, text: str) -> None:
        await self._conn.execute(POSTGRES.search_index_sql, key, text)

    async def insert_new_events(self, rows: Sequence[Sequence[object]]) -> list[object]:
        await self.copy_rows("events", _ROW_COLUMN_NAMES, rows)
        return [row[0] for row in rows]  # the key is the id

    async def copy_rows(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
        if rows:  # COPY … FROM STDIN (binary): one round trip, no statement per row
            await self._conn.copy_records_to_table(table, records=rows, columns=list(columns))

    async def index_search_many(self, rows: Sequence[tuple[object, str]]) -> None:
        if rows:  # to_tsvector runs in the server: one statement over two arrays
            keys, texts = zip(*rows, strict=True)
            await self._conn.execute(_SEARCH_MANY_SQL, list(keys), list(texts))


class PostgresStore(SqlStore):
    """The EventStore on PostgreSQL. `dsn` is a `postgres://` or `postgresql://` URL; the pool
    holds `min_size`..`max_size` connections. Call `open()` before use and `close()` at the end."""

    dialect: Dialect = POSTGRES

    def __init__(self, dsn: str, *, min_size: int = 1, max_size: int = 10) -> None:
        self.dsn = dsn
        self._min_size = min_size
        self._max_size = max_size
        self._pool: asyncpg.Pool | None = None
        self._writer: GroupWriter | None = None
        # Point reads on their way (`_point_read`): key → (writer generation, answer).
        self._flights: dict[tuple[Any, ...], tuple[int, asyncio.Future[Any]]] = {}
        # The admission lane (`_admission_read`): connections of its own, so an AUTH's ban-list
        # read never waits for a connection that long reads hold.
        self._admission_pool: asyncpg.Pool | None = None

    async def open(self) -> None:
        """Create the pool and the schema. Raises StoreUnreachable when the server cannot be reached,
        StoreError when it refuses the connection."""
        try:
            self._pool = await asyncpg.create_pool(
                self.dsn,
                min_size=self._min_size,
                max_size=self._max_size,
                server_settings=_SESSION,
                connection_class=_Connection,
            )
        except (TimeoutError, OSError) as exc:  # refused, unresolvable, timed out
            raise StoreUnreachable(f"cannot connect to PostgreSQL: {exc}") from exc
        except _DRIVER_ERRORS as exc:  # reached, but refused us (auth, missing database)
            raise StoreError(f"cannot connect to PostgreSQL: {exc}") from exc
        try:
            await self._write_now(_create_schema_txn)
            self._admission_pool = await asyncpg.create_pool(
                self.dsn, min_size=1, max_size=ADMISSION_CONNECTIONS, server_settings=_SESSION
            )
        except _DRIVER_ERRORS as exc:
            await self.close()
            raise StoreError(f"cannot connect to PostgreSQL: {exc}") from exc
        except StoreError:
            await self.close()
            raise
        self._writer = GroupWriter(self._pool.acquire, _PgConn, _DRIVER_ERRORS)

    async def close(self) -> None:
        """Commit the queued writes, then close the pools; idempotent."""
        writer, self._writer = self._writer, None
        if writer is not None:
            await writer.drained()
        for name in ("_admission_pool", "_pool"):
            pool = getattr(self, name)
            setattr(self, name, None)
            if pool is not None:
                await pool.close()

    def _require_pool(self) -> asyncpg.Pool:
        if self._pool is None:
            raise StoreError("store is not open")
        return self._pool

    async def _write(self, fn: TxnFn[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        # Not shielded: cancelling the caller cancels only its future; the writer still
        # commits the write and skips a future that is done.
        return await self._write_soon(fn, *args, **kwargs)

    def _write_soon(self, fn: TxnFn[P, T], *args: P.args, **kwargs: P.kwargs) -> asyncio.Future[T]:
        # Queued here, synchronously: call order is commit order, with no task per write.
        writer = self._writer
        if writer is None:
            raise StoreError("store is not open")
        return writer.submit(fn, args, kwargs)

    @property
    def group_commits(self) -> int:
        """Write transactions the group writer committed so far (for tests and benches)."""
        return 0 if self._writer is None else self._writer.batches

    async def _write_now(self, fn: TxnFn[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        pool = self._require_pool()
        try:
            async with pool.acquire() as conn, conn.transaction():
                return await fn(_PgConn(conn), *args, **kwargs)
        except _DRIVER_ERRORS as exc:
            raise StoreError(f"postgres write failed: {exc}") from exc

    async def _point_read(self, fn: TxnFn[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        # Single flight (decision 263): a point read asked again while the same read is on
        # its way, and no write of this store committed since it was sent, takes that read's
        # answer instead of a round trip of its own (the relay's ingest reads a channel row per
        # channel event: many at once name the same channel). A commit starts a new
        # generation, so a read asked after an `OK true` never joins one sent before it.
        writer = self._writer
        key = (fn, args, tuple(kwargs.items())) if kwargs else (fn, args)
        generation = -1 if writer is None else writer.batches
        flight = self._flights.get(key)
        if flight is not None and flight[0] == generation:
            try:
                return await asyncio.shield(flight[1])  # type: ignore[no-any-return]
            except _LeaderGone:
                return await self._read(fn, *args, **kwargs)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._flights[key] = (generation, future)
        try:
            value = await self._read(fn, *args, **kwargs)
        except BaseException as exc:
            future.set_exception(_LeaderGone() if isinstance(exc, asyncio.CancelledError) else exc)
            future.exception()  # retrieved: nobody may be waiting
            raise
        else:
            future.set_result(value)
            return value
        finally:
            if self._flights.get(key, (None, None))[1] is future:
                del self._flights[key]

    async def _read(self, fn: TxnFn[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        pool = self._require_pool()
        try:
            async with pool.acquire() as conn:
                return await fn(_PgConn(conn), *args, **kwargs)
        except _DRIVER_ERRORS as exc:
            raise StoreError(f"postgres read failed: {exc}") from exc

    async def _timed_read(self, seconds: float, fn: TxnFn[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        pool = self._require_pool()
        deadline = asyncio.get_running_loop().time() + seconds
        try:
            # A transaction, for SET LOCAL: the timeout ends with it, the connection goes back clean.
            async with pool.acquire() as conn, conn.transaction(readonly=True):
                return await fn(_PgConn(conn, deadline), *args, **kwargs)
        except (_Stopped, asyncpg.QueryCanceledError):
            raise ReadTimeout(seconds) from None
        except _DRIVER_ERRORS as exc:
            raise StoreError(f"postgres read failed: {exc}") from exc

    async def _admission_read(self, fn: TxnFn[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        pool = self._admission_pool
        if pool is None:
            raise StoreError("store is not open")
        try:
            async with pool.acquire() as conn:
                return await fn(_PgConn(conn), *args, **kwargs)
        except _DRIVER_ERRORS as exc:
            raise StoreError(f"postgres read failed: {exc}") from exc


async def _create_schema_txn(conn: Conn) -> None:
    await conn.fetch("SELECT pg_advisory_xact_lock($1)", [_SCHEMA_LOCK_ID])
    for statement in POSTGRES.schema:
        await conn.execute(statement)
