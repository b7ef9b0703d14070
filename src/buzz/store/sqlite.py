"""SQLite backend (relay.md §13.1 item 1): one writer thread with group commit, reader threads.

The shared `_txn` functions are coroutines so PostgreSQL can await asyncpg; here they run on
plain `sqlite3` connections whose methods never suspend, so each whole transaction runs
synchronously inside a worker thread (`run_inline`): one thread hop per transaction instead of
one per statement, and the event loop is never blocked.

Writes are serialized through one writer thread (the single writer is also the per-key lock of
relay.md §13.3 item 2). Writes that queue up while a commit is in flight are committed together
(group commit): one failing write rolls back alone (the batch is then run again with a
SAVEPOINT around each write), and the batch shares one `COMMIT` (one fsync with `synchronous=FULL`). A caller's answer is given
only after that COMMIT returned: `OK true` means durable and queryable.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from buzz.store import schema
from buzz.store.base import ReadTimeout, StoreError
from buzz.store.dialect import SQLITE, BoundedRows, Dialect
from buzz.store.sqlbase import P, SqlStore, T, TxnFn
from buzz.store.sqlite_checkpoint import Checkpointer
from buzz.store.writes import ROW_COLUMNS

BUSY_TIMEOUT_MS = 5000  # relay.md §13.1: at least 5 s
MAX_BATCH = 256  # writes per group commit
MEMO_ENTRIES = 4096  # point-read answers kept while the database is unchanged
# A timed read looks at the clock every this many SQLite VM instructions (well under 1 ms).
PROGRESS_STEPS = 10_000
SEARCH_BATCH_CHARS = 1 << 20  # deferred search text written in one statement, at most
# The batch's search rows as one JSON array of [rowid, text] pairs (`_SyncConn.flush_search`).
_SEARCH_BATCH_SQL = (
    "INSERT INTO events_fts (rowid, content) SELECT value ->> 0, value ->> 1 FROM json_each(?1)"
)
_PRAGMAS = (
    f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}",
    "PRAGMA foreign_keys = ON",
    "PRAGMA synchronous = FULL",
)


def run_inline(coro: Coroutine[Any, Any, T]) -> T:
    """Drive a coroutine that never suspends to completion, synchronously.

    Raises RuntimeError if it does suspend (it awaited real I/O, which a sqlite3 `Conn` never does).
    """
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coro.close()
    raise RuntimeError("a SQLite transaction function suspended; it must only await Conn methods")


class _SyncConn:
    """`Conn` over a plain sqlite3 connection: the coroutine methods complete without suspending."""

    dialect: Dialect = SQLITE

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        # Search rows of this transaction, written by `flush_search` just before it commits.
        self.search_rows: list[tuple[object, str]] = []
        self._search_chars = 0

    async def fetch(self, sql: str, args: Sequence[object] = ()) -> Sequence[Sequence[Any]]:
        return self._conn.execute(sql, args).fetchall()

    async def fetch_bounded(
        self, sql: str, args: Sequence[object], max_bytes: int, size_of: Callable[[Sequence[Any]], int]
    ) -> tuple[Sequence[Sequence[Any]], bool]:
        cursor = self._conn.execute(sql, args)
        bounded = BoundedRows(max_bytes, size_of)
        try:
            while chunk := cursor.fetchmany(bounded.next_chunk()):
                if bounded.take(chunk):
                    return bounded.rows, True
            return bounded.rows, False
        finally:
            cursor.close()

    async def execute(self, sql: str, args: Sequence[object] = ()) -> None:
        self._conn.execute(sql, args)

    async def executemany(self, sql: str, rows: Sequence[Sequence[object]]) -> None:
        self._conn.executemany(sql, rows)

    async def insert(self, sql: str, args: Sequence[object] = ()) -> object | None:
        # rowcount and lastrowid instead of RETURNING: a statement step and a row fetch fewer.
        cursor = self._conn.execute(sql, args)
        return cursor.lastrowid if cursor.rowcount == 1 else None

    async def index_search(self, key: object, text: str) -> None:
        # Deferred: FTS5 writes its pending rows out as a new segment at the start of every
        # later statement that opens a statement journal (a reaction's insert does), so rows
        # added one by one between the other inserts of a group commit cost a segment each.
        # Written early past SEARCH_BATCH_CHARS, so that the JSON copy of a batch stays small.
        self.search_rows.append((key, text))
        self._search_chars += len(text)
        if self._search_chars > SEARCH_BATCH_CHARS:
            self.flush_search()

    async def insert_new_events(self, rows: Sequence[Sequence[object]]) -> list[object]:
        # Explicit `seq` values past the largest: the one writer connection holds the write
        # lock, so nobody else takes them, and executemany reports no rowid of its own.
        start = self._conn.execute("SELECT COALESCE(MAX(seq), 0) FROM events").fetchone()[0] + 1
        keys = list(range(start, start + len(rows)))
        self._conn.executemany(
            f"INSERT INTO events (seq, {ROW_COLUMNS}) VALUES ({SQLITE.marks(11)})",
            [(seq, *row) for seq, row in zip(keys, rows, strict=True)],
        )
        return list(keys)

    async def copy_rows(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
        if rows:
            sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({SQLITE.marks(len(columns))})"
            self._conn.executemany(sql, rows)

    async def index_search_many(self, rows: Sequence[tuple[object, str]]) -> None:
        for key, text in rows:
            await self.index_search(key, text)

    def flush_search(self, *, one_by_one: bool = False) -> None:
        """Write the deferred search rows: one statement for the whole batch (FTS5 keeps them
        pending until the commit), or each alone (`one_by_one`, a write in its own SAVEPOINT)."""
        rows, self.search_rows = self.search_rows, []
        self._search_chars = 0
        if not rows:
            return
        if one_by_one:
            self._conn.executemany(SQLITE.search_index_sql, rows)
        else:
            self._conn.execute(_SEARCH_BATCH_SQL, (orjson.dumps(rows).decode(),))


@dataclass
class _Write:
    fn: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    future: asyncio.Future[Any]
    loop: asyncio.AbstractEventLoop = field(repr=False, default=None)  # type: ignore[assignment]


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    for pragma in _PRAGMAS:
        conn.execute(pragma)
    return conn


class SqliteStore(SqlStore):
    """The EventStore on a SQLite file (WAL, foreign_keys=ON, busy_timeout 5 s, synchronous=FULL).

    `path` is the database file (its folder is created); `readers` the number of read
    connections (each on its own thread). Call `open()` before use and `close()` at the end.
    """

    dialect: Dialect = SQLITE

    def __init__(self, path: str | Path, *, readers: int = 4) -> None:
        if readers < 1:
            raise ValueError("readers must be at least 1")
        self.path = Path(path)
        self._reader_count = readers
        self._writer: sqlite3.Connection | None = None
        # Each item is the writes one event-loop pass queued (`_write`), in call order.
        self._writes: queue.SimpleQueue[list[_Write] | None] = queue.SimpleQueue()
        self._pending: list[_Write] = []
        self._pending_loop: asyncio.AbstractEventLoop | None = None
        self._pending_lock = threading.Lock()
        self._writer_thread: threading.Thread | None = None
        self._checkpointer: Checkpointer | None = None
        self._readers: queue.SimpleQueue[sqlite3.Connection] = queue.SimpleQueue()
        self._all_readers: list[sqlite3.Connection] = []
        self._read_pool: ThreadPoolExecutor | None = None
        # The admission lane (`_admission_read`): its own connection and thread, so an AUTH's
        # ban-list read never queues behind the readers' long reads.
        self._admission_reader: sqlite3.Connection | None = None
        self._admission_pool: ThreadPoolExecutor | None = None
        # Point reads on the event loop's own thread (`_point_read`); the lock keeps a second
        # thread (another loop) off it, and that thread takes the pool instead.
        self._inline_reader: sqlite3.Connection | None = None
        self._inline_lock = threading.Lock()
        # Answers of point reads while the database is unchanged: `PRAGMA data_version` on the
        # inline connection moves whenever any other connection (our writer, another process)
        # commits, and then the memo is dropped, so a hit is exactly what the read would return.
        self._memo: dict[tuple[Any, ...], Any] = {}
        self._memo_version: int | None = None

    async def open(self) -> None:
        """Open the writer, switch to WAL, create the schema, then open the readers.

        Raises StoreError when the file cannot be opened or WAL cannot be enabled.
        """
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(None, self._open_sync)
        except (sqlite3.Error, OSError) as exc:
            await self.close()
            raise StoreError(f"cannot open {self.path}: {exc}") from exc
        self._writer_thread = threading.Thread(target=self._writer_loop, name="sqlite-writer", daemon=True)
        self._writer_thread.start()
        self._read_pool = ThreadPoolExecutor(self._reader_count, thread_name_prefix="sqlite-reader")
        self._admission_pool = ThreadPoolExecutor(1, thread_name_prefix="sqlite-admission")

    def _open_sync(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._writer = _connect(self.path)
        mode = self._writer.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if mode != "wal":
            raise StoreError(f"{self.path}: cannot enable WAL journal mode")
        self._writer.execute("PRAGMA wal_autocheckpoint = 0")  # the Checkpointer's thread does it
        self._writer.execute("BEGIN IMMEDIATE")
        try:
            for statement in SQLITE.schema:
                self._writer.execute(statement)
            columns = {row[1] for row in self._writer.execute("PRAGMA table_info(event_tags)")}
            if "in_channel" not in columns:  # a file made before the column (schema.py)
                self._writer.execute("ALTER TABLE event_tags ADD COLUMN in_channel INTEGER")
            self._writer.execute(schema.TAG_ELSEWHERE_INDEX)  # after the column, new file or old
            self._writer.execute("COMMIT")
        except BaseException:
            self._writer.execute("ROLLBACK")
            raise
        for _ in range(self._reader_count):
            reader = _connect(self.path)
            reader.execute("PRAGMA query_only = ON")
            self._all_readers.append(reader)
            self._readers.put(reader)
        admission = _connect(self.path)
        admission.execute("PRAGMA query_only = ON")
        self._admission_reader = admission
        inline = _connect(self.path)
        inline.execute("PRAGMA query_only = ON")
        # Never wait for a lock on the loop: a busy read goes to the pool, which waits.
        inline.execute("PRAGMA busy_timeout = 0")
        self._inline_reader = inline
        self._checkpointer = Checkpointer(self.path, _connect)

    async def close(self) -> None:
        """Stop the writer thread after the queued writes, close every connection; idempotent."""
        thread, self._writer_thread = self._writer_thread, None
        if thread is not None:
            self._flush_pending()
            self._writes.put(None)
            await asyncio.get_running_loop().run_in_executor(None, thread.join)
        checkpointer, self._checkpointer = self._checkpointer, None
        if checkpointer is not None:
            await asyncio.get_running_loop().run_in_executor(None, checkpointer.close)
        pool, self._read_pool = self._read_pool, None
        if pool is not None:
            pool.shutdown(wait=True)
        lane, self._admission_pool = self._admission_pool, None
        if lane is not None:
            lane.shutdown(wait=True)
        admission, self._admission_reader = self._admission_reader, None
        if admission is not None:
            admission.close()
        readers, self._all_readers = self._all_readers, []
        for reader in readers:
            reader.close()
        inline, self._inline_reader = self._inline_reader, None
        if inline is not None:
            with self._inline_lock:
                inline.close()
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()  # the last close checkpoints the WAL

    # -- writes ----------------------------------------------------------------------------
    async def _write(self, fn: TxnFn[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        # Not shielded: cancelling the caller cancels only this future; the write still commits
        # (the writer thread never looks at it) and `_settle` skips a future that is done.
        return await self._write_soon(fn, *args, **kwargs)

    def _write_soon(self, fn: TxnFn[P, T], *args: P.args, **kwargs: P.kwargs) -> asyncio.Future[T]:
        # Queued here, synchronously: no task, and call order is queue order.
        if self._writer_thread is None:
            raise StoreError("store is not open")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        item = _Write(fn, args, kwargs, future, loop)
        # The writes of one loop pass reach the writer together, at the end of the pass (one
        # wake-up of its thread; the first write of a pass no longer commits alone while the
        # rest of the pass queues behind its fsync). Order is call order either way.
        with self._pending_lock:  # another thread's loop may write too
            if self._pending_loop is not loop:
                self._flush_pending_locked()
                self._pending_loop = loop
            self._pending.append(item)
            first = len(self._pending) == 1
        if first:
            loop.call_soon(self._flush_pending)
        return future

    def _flush_pending(self) -> None:
        with self._pending_lock:
            self._flush_pending_locked()

    def _flush_pending_locked(self) -> None:
        pending, self._pending = self._pending, []
        if pending:
            self._writes.put(pending)

    def _writer_loop(self) -> None:
        carry: list[_Write] = []
        stop = False
        while carry or not stop:
            if not carry:
                first = self._writes.get()
                if first is None:
                    return
                carry = first
            while len(carry) < MAX_BATCH and not stop:
                try:
                    more = self._writes.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    stop = True
                else:
                    carry.extend(more)
            batch, carry = carry[:MAX_BATCH], carry[MAX_BATCH:]
            self._commit_batch(batch)

    def _commit_batch(self, batch: list[_Write]) -> None:
        writer = self._writer
        assert writer is not None
        try:
            # Optimistic pass without a SAVEPOINT per write (two statements fewer each): when
            # a write fails, the whole transaction is rolled back and the batch is run again
            # with one SAVEPOINT per write, so that write alone fails, as before.
            results = self._run_batch(writer, batch, isolate=False)
            if results is None:
                if writer.in_transaction:  # some errors end the transaction themselves
                    writer.execute("ROLLBACK")
                results = self._run_batch(writer, batch, isolate=True)
            assert results is not None
            writer.execute("COMMIT")
            if self._checkpointer is not None:
                self._checkpointer.committed()
        except sqlite3.Error as exc:
            with contextlib.suppress(sqlite3.Error):
                if writer.in_transaction:
                    writer.execute("ROLLBACK")
            err = StoreError(f"sqlite write failed: {exc}")
            results = [(item, False, err) for item in batch]
        # One wake-up of each waiting event loop per batch, not one per write.
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[_Write, bool, Any]]] = {}
        for result in results:
            by_loop.setdefault(result[0].loop, []).append(result)
        for loop, settled in by_loop.items():
            loop.call_soon_threadsafe(_settle_all, settled)

    @staticmethod
    def _run_batch(
        writer: sqlite3.Connection, batch: list[_Write], *, isolate: bool
    ) -> list[tuple[_Write, bool, Any]] | None:
        """Run every write of `batch` in one open transaction. Without `isolate`, None at the
        first failure (the caller rolls back); with it, each write in its own SAVEPOINT."""
        writer.execute("BEGIN IMMEDIATE")
        conn = _SyncConn(writer)
        results: list[tuple[_Write, bool, Any]] = []
        for item in batch:
            if not isolate:
                try:
                    results.append((item, True, run_inline(item.fn(conn, *item.args, **item.kwargs))))
                except BaseException:
                    return None
                continue
            writer.execute("SAVEPOINT w")
            try:
                value = run_inline(item.fn(conn, *item.args, **item.kwargs))
                conn.flush_search(one_by_one=True)
                writer.execute("RELEASE w")
                results.append((item, True, value))
            except BaseException as exc:  # this write alone rolls back
                conn.search_rows.clear()
                writer.execute("ROLLBACK TO w")
                writer.execute("RELEASE w")
                results.append((item, False, _store_error(exc)))
        if not isolate:
            try:
                conn.flush_search()
            except BaseException:
                return None
        return results

    # -- reads -----------------------------------------------------------------------------
    async def _read(self, fn: TxnFn[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        pool = self._read_pool
        if pool is None:
            raise StoreError("store is not open")
        return await asyncio.get_running_loop().run_in_executor(pool, self._read_sync, fn, args, kwargs)

    async def _timed_read(self, seconds: float, fn: TxnFn[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        pool = self._read_pool
        if pool is None:
            raise StoreError("store is not open")
        return await asyncio.get_running_loop().run_in_executor(
            pool, self._read_sync, fn, args, kwargs, seconds
        )

    async def _admission_read(self, fn: TxnFn[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        return await self._inline_read(fn, args, kwargs, memo=False, lane=True)

    async def _point_read(self, fn: TxnFn[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        return await self._inline_read(fn, args, kwargs, memo=True)

    async def _small_read(self, fn: TxnFn[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        # A small REQ's answer is not memoized: its rows are what the memo would hold longest.
        return await self._inline_read(fn, args, kwargs, memo=False)

    async def _inline_read(
        self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], *, memo: bool, lane: bool = False
    ) -> Any:
        # One B-tree probe in WAL mode costs less than the hop to a reader thread and back
        # (two thread switches and a future, ~50–100 µs under load); readers never wait for
        # the writer in WAL, and a lock we would have to wait for (busy_timeout 0 here) sends
        # the read to the pool, whose connections wait as before.
        inline = self._inline_reader
        if inline is not None and self._read_pool is not None and self._inline_lock.acquire(blocking=False):
            try:
                if self._inline_reader is inline:
                    if memo:
                        return self._memo_read(inline, fn, args, kwargs)
                    return run_inline(fn(_SyncConn(inline), *args, **kwargs))
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc):
                    raise StoreError(f"sqlite read failed: {exc}") from exc
            except sqlite3.Error as exc:
                raise StoreError(f"sqlite read failed: {exc}") from exc
            finally:
                self._inline_lock.release()
        if lane:  # the admission lane's own thread, not the readers' pool
            pool = self._admission_pool
            if pool is None:
                raise StoreError("store is not open")
            return await asyncio.get_running_loop().run_in_executor(
                pool, self._admission_sync, fn, args, kwargs
            )
        return await self._read(fn, *args, **kwargs)

    def _admission_sync(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        conn = self._admission_reader
        if conn is None:
            raise StoreError("store is not open")
        try:
            return run_inline(fn(_SyncConn(conn), *args, **kwargs))
        except sqlite3.Error as exc:
            raise StoreError(f"sqlite read failed: {exc}") from exc

    def _memo_read(
        self, inline: sqlite3.Connection, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        version = inline.execute("PRAGMA data_version").fetchone()[0]
        if version != self._memo_version or len(self._memo) >= MEMO_ENTRIES:
            self._memo.clear()
            self._memo_version = version
        key = (fn, args, tuple(kwargs.items())) if kwargs else (fn, args)
        try:
            return self._memo[key]
        except KeyError:
            pass
        value = run_inline(fn(_SyncConn(inline), *args, **kwargs))
        self._memo[key] = value
        return value

    def _read_sync(
        self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], seconds: float | None = None
    ) -> Any:
        reader = self._readers.get()
        stopped = False
        if seconds is not None:
            deadline = time.monotonic() + seconds

            def past_deadline() -> int:
                nonlocal stopped
                stopped = time.monotonic() > deadline
                return int(stopped)  # non-zero interrupts the statement

            reader.set_progress_handler(past_deadline, PROGRESS_STEPS)
        try:
            return run_inline(fn(_SyncConn(reader), *args, **kwargs))
        except sqlite3.Error as exc:
            if stopped:
                raise ReadTimeout(seconds or 0) from None
            raise StoreError(f"sqlite read failed: {exc}") from exc
        finally:
            if seconds is not None:
                reader.set_progress_handler(None, 0)
            self._readers.put(reader)


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "locked" in str(exc) or "busy" in str(exc)


def _store_error(exc: BaseException) -> BaseException:
    if isinstance(exc, sqlite3.Error):
        return StoreError(f"sqlite write failed: {exc}")
    return exc


def _settle_all(settled: list[tuple[_Write, bool, Any]]) -> None:
    for item, ok, value in settled:
        _settle(item.future, ok, value)


def _settle(future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if future.done():
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)
