"""PostgreSQL group commit (issue 30 item 1, decision 260): one writer per store.

A transaction per write cost ~345 µs of event-loop time per event (pool acquire, BEGIN, the
statements, COMMIT, reset), each a round trip. Here the writes queued while the previous batch
was committing — in practice the writes of one or a few loop passes — are run in one
transaction on one connection, and a run of consecutive inserts is written by
`bulk.insert_items_txn` (one statement or COPY per table, decision 101). Every caller's future
is settled only after that COMMIT returned: an `OK true` is still durable and queryable.

The transaction first takes `events` in SHARE ROW EXCLUSIVE mode: other replicas' writers wait
for the commit, which is what keeps the bulk path's "no such id / key" checks true, and gives
every writer one lock order (the table, then a key's advisory lock), so two replicas' batches
cannot deadlock on each other's keys. Readers are not held up.

When any write of the optimistic pass raises, the transaction is rolled back and the batch is
run again with a SAVEPOINT around each write, each insert by `insert_txn` alone: that write
alone fails, with the error it raised, as with a transaction of its own (the SQLite writer does
the same, decision 86).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import asyncpg

from buzz.store.base import StoreError
from buzz.store.bulk import Item, insert_items_txn
from buzz.store.dialect import POSTGRES, Conn
from buzz.store.writes import insert_txn

MAX_BATCH = 512  # writes per transaction
_LOCK_SQL = POSTGRES.bulk_sql


@dataclass(slots=True)
class Write:
    fn: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    future: asyncio.Future[Any]


class GroupWriter:
    """The writes of one store, committed in batches by one task on the loop that made it.

    `acquire` lends a pool connection as an async context manager; `wrap` makes the `Conn`
    the transaction functions take; `errors` are the driver's, mapped to StoreError."""

    def __init__(
        self,
        acquire: Callable[[], Any],
        wrap: Callable[[asyncpg.Connection], Conn],
        errors: tuple[type[BaseException], ...],
    ) -> None:
        self._acquire = acquire
        self._wrap = wrap
        self._errors = errors
        self._queue: list[Write] = []
        self._task: asyncio.Task[None] | None = None
        self.batches = 0  # committed transactions (tests read it to see writes share one)

    def submit(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> asyncio.Future[Any]:
        """Queue a write now (call order is commit order); its future settles after the commit."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._queue.append(Write(fn, args, kwargs, future))
        if self._task is None:
            # Started now, first run at the end of this loop pass: the pass's later writes join.
            self._task = loop.create_task(self._drain())
        return future

    async def drained(self) -> None:
        """Wait until every write queued so far is settled."""
        while self._task is not None:
            await asyncio.shield(self._task)

    async def _drain(self) -> None:
        try:
            while self._queue:
                batch, self._queue = self._queue[:MAX_BATCH], self._queue[MAX_BATCH:]
                await self._commit(batch)
        finally:
            self._task = None

    async def _commit(self, batch: list[Write]) -> None:
        try:
            results = await self._run(batch, isolate=False)
        except BaseException as exc:
            if isinstance(exc, asyncio.CancelledError):
                _fail(batch, StoreError("postgres write cancelled: the store is closing"))
                raise
            try:
                results = await self._run(batch, isolate=True)
            except Exception as retry_exc:  # the connection or the COMMIT failed: nothing stored
                _fail(batch, self._store_error(retry_exc))
                return
        self.batches += 1
        for item, ok, value in results:
            if item.future.done():  # the caller was cancelled; the write committed anyway
                continue
            if ok:
                item.future.set_result(value)
            else:
                item.future.set_exception(value)

    async def _run(self, batch: list[Write], *, isolate: bool) -> list[tuple[Write, bool, Any]]:
        """Every write of `batch` in one transaction; without `isolate` the first error
        propagates (the transaction rolls back), with it each write has its own SAVEPOINT."""
        async with self._acquire() as raw, raw.transaction():
            conn = self._wrap(raw)
            for sql in _LOCK_SQL:
                await conn.execute(sql)
            if isolate:
                return [await self._isolated(raw, conn, item) for item in batch]
            results: list[tuple[Write, bool, Any]] = []
            i = 0
            while i < len(batch):
                j = i
                while j < len(batch) and batch[j].fn is insert_txn:
                    j += 1
                if j - i > 1:  # consecutive inserts: one statement per table (decision 101)
                    run = batch[i:j]
                    items: list[Item] = [(w.args[0], w.args[1]) for w in run]
                    outcomes = await insert_items_txn(conn, items, max(w.args[2] for w in run))
                    results += [(w, True, o) for w, o in zip(run, outcomes, strict=True)]
                    i = j
                    continue
                item = batch[i]
                results.append((item, True, await item.fn(conn, *item.args, **item.kwargs)))
                i += 1
            return results

    async def _isolated(self, raw: asyncpg.Connection, conn: Conn, item: Write) -> tuple[Write, bool, Any]:
        try:
            async with raw.transaction():  # nested: a SAVEPOINT
                return item, True, await item.fn(conn, *item.args, **item.kwargs)
        except self._errors as exc:
            if raw.is_closed():
                raise
            return item, False, self._store_error(exc)
        except Exception as exc:  # the write's own refusal (ChannelExists, ValueError …)
            return item, False, exc

    def _store_error(self, exc: BaseException) -> BaseException:
        if isinstance(exc, self._errors):
            return StoreError(f"postgres write failed: {exc}")
        return exc


def _fail(batch: list[Write], exc: BaseException) -> None:
    for item in batch:
        if not item.future.done():
            item.future.set_exception(exc)
