"""What differs between SQLite and PostgreSQL, behind one small object (style.md §4).

The shared SQL (`buzz.store.clauses`, `reads`, `writes`) never asks which driver runs it; it
asks the dialect for a placeholder, an IN-list, a text encoding, the search join and the
per-key lock. Both backends hand the shared SQL a `Conn`.

Differences answered here:

| question                  | SQLite                            | PostgreSQL                              |
|---------------------------|-----------------------------------|-----------------------------------------|
| placeholder n             | `?n`                              | `$n`                                    |
| `col IN values`           | `col IN (?1, ?2, …)`; more than   | `col = ANY($1::type[])` (one parameter; |
|                           |                                   | one value: `col = $1::type`)            |
|                           | 32 values: one JSON parameter     |                                         |
|                           | read by `json_each`               |                                         |
| a list as a table         | `json_each(?1)`                   | `unnest($1::type[])`                    |
| byte-exact text columns   | TEXT                              | bytea (text cannot hold U+0000)         |
| full-text search (§11)    | FTS5 `events_fts`, bm25           | `event_search.tsv` (GIN), ts_rank       |
| `#h` window               | ordered scan per channel (one     | ordered scan per channel (LATERAL)      |
|                           | subquery each, ≤ 16) + the rest   | + the rest                              |
| bulk insert (`copy_rows`) | executemany                       | binary COPY                             |
| per-key write lock (§13.3)| none: one writer connection       | `pg_advisory_xact_lock(<key hash>)`     |
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal, Protocol

from buzz.store import schema

SqlType = Literal["text", "int", "utf8"]
"""`text` ASCII keys (ids, pubkeys, names); `int`; `utf8` byte-exact client text (content,
`d`, tag values), stored as bytea on PostgreSQL."""


class Conn(Protocol):
    """A connection (inside a transaction for writes) as the shared SQL sees it."""

    dialect: Dialect

    async def fetch(self, sql: str, args: Sequence[object] = ()) -> Sequence[Sequence[Any]]: ...

    async def fetch_bounded(
        self, sql: str, args: Sequence[object], max_bytes: int, size_of: Callable[[Sequence[Any]], int]
    ) -> tuple[Sequence[Sequence[Any]], bool]:
        """`fetch`, stopped at the first row that brings the sum of `size_of` past `max_bytes`
        (that row included): the rows and whether rows were left unread. Rows are read from the
        database a few at a time, so at most about `max_bytes` is held (issue 24 item 11)."""
        ...

    async def execute(self, sql: str, args: Sequence[object] = ()) -> None: ...

    async def executemany(self, sql: str, rows: Sequence[Sequence[object]]) -> None: ...

    async def insert(self, sql: str, args: Sequence[object] = ()) -> object | None:
        """Run one `INSERT … ON CONFLICT … DO NOTHING` into `events`: the new row's key (SQLite
        `seq`, PostgreSQL `id`: what `search_index_sql` takes), None when nothing was inserted."""
        ...

    async def index_search(self, key: object, text: str) -> None:
        """Add the searchable `text` of the row `key` (from `insert`) to the search index, no
        later than this transaction's commit (SQLite defers it to the end of the group commit)."""
        ...

    async def insert_new_events(self, rows: Sequence[Sequence[object]]) -> list[object]:
        """Insert `events` rows (the columns of `writes.ROW_COLUMNS`) whose ids are new: the
        caller checked, a known id is a driver error. Returns each row's key, as `insert` does."""
        ...

    async def copy_rows(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
        """Append `rows` to `table` in one bulk operation; no row may clash with a key (the
        caller checked). Nothing happens for no rows."""
        ...

    async def index_search_many(self, rows: Sequence[tuple[object, str]]) -> None:
        """`index_search` for each (row key, text), in one bulk operation where the driver has one."""
        ...


FETCH_CHUNK_MAX = 256  # rows a bounded fetch asks for at once


class BoundedRows:
    """The rows of a bounded fetch (`Conn.fetch_bounded`), read chunk by chunk until their
    sizes pass `max_bytes`; the row that passes it is kept and ends the read."""

    def __init__(self, max_bytes: int, size_of: Callable[[Sequence[Any]], int]) -> None:
        self.rows: list[Sequence[Any]] = []
        self.used = 0
        self._max_bytes = max_bytes
        self._size_of = size_of

    def next_chunk(self) -> int:
        """How many rows to ask the cursor for next: as many as the rows read so far say fit
        in what is left (16 before any), so one chunk overshoots the bound by a few rows at
        most, and small rows still come in bulk."""
        if not self.rows:
            return 16
        left = self._max_bytes - self.used
        return max(1, min(FETCH_CHUNK_MAX, left * len(self.rows) // max(self.used, 1)))

    def take(self, chunk: Iterable[Sequence[Any]]) -> bool:
        """Add `chunk`'s rows; True once the bound is passed (the rest of the chunk is dropped)."""
        for row in chunk:
            self.rows.append(row)
            self.used += self._size_of(row)
            if self.used > self._max_bytes:
                return True
        return False


class Params:
    """Collects positional parameters and hands back the dialect's placeholder for each."""

    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect
        self.values: list[object] = []

    def add(self, value: object, sqltype: SqlType = "text") -> str:
        """Append one value; returns its placeholder (`?n` / `$n`)."""
        self.values.append(self.dialect.encode(value, sqltype))
        return self.dialect.placeholder(len(self.values))

    def add_raw(self, value: object) -> str:
        self.values.append(value)
        return self.dialect.placeholder(len(self.values))

    def in_list(self, expr: str, values: Iterable[Any], sqltype: SqlType) -> str:
        """`expr` equals one of `values` (non-empty; callers skip empty lists first)."""
        return self.dialect.in_list(self, expr, sorted(values), sqltype)

    def table(self, values: Iterable[str], alias: str) -> str:
        """A FROM item of one row per text value (non-empty), its column `{alias}.value`.

        One parameter however many values: a filter list as long as a frame allows must not
        run into a statement's limit on parameters or expression depth (issue 9 item 4)."""
        return self.dialect.values_table(self, sorted(values), alias)


class Dialect(ABC):
    """The base lists every question; the two instances below answer them."""

    name: str
    schema: tuple[str, ...]
    greatest: str
    key_lock_sql: str | None
    bulk_sql: tuple[str, ...]
    """Run first by `bulk.insert_many_txn`, in its transaction."""
    search_index_sql: str  # parameters: (the row key `Conn.insert` returned, searchable text)
    h_by_channel_max: int
    """Read a non-search `#h` filter of at most this many channels as one ordered scan per
    channel plus the few events whose h tag names a channel other than their own
    (`clauses.select_page`), instead of one OR (which reads and sorts whole channels)."""
    lateral: bool  # LATERAL joins (PostgreSQL); SQLite writes one subquery per channel out
    bool_or: str  # the aggregate "any row true"

    @abstractmethod
    def placeholder(self, n: int) -> str: ...

    def marks(self, count: int) -> str:
        """The placeholders of parameters 1..`count`, comma-separated (a VALUES list)."""
        return ", ".join(self.placeholder(n) for n in range(1, count + 1))

    def encode(self, value: object, sqltype: SqlType) -> object:
        return value

    def decode_utf8(self, value: Any) -> str:
        return str(value)

    @abstractmethod
    def in_list(self, params: Params, expr: str, values: Sequence[object], sqltype: SqlType) -> str: ...

    @abstractmethod
    def values_table(self, params: Params, values: Sequence[str], alias: str) -> str: ...

    @abstractmethod
    def search_from(self, ref: str, clause: str) -> str:
        """`FROM … WHERE …` of the events `e` matching `clause` whose text matches the searched
        text `ref` (placeholder), with what `search_order` needs."""

    @abstractmethod
    def search_order(self, ref: str) -> str:
        """ORDER BY fragment: most relevant first."""

    @abstractmethod
    def search_arg(self, terms: Sequence[str]) -> str:
        """The value bound to `ref` for these terms (every term a whole token, AND)."""


_SQLITE_INLINE_MAX = 32  # above this an IN list is one JSON parameter (SQLite caps parameters)


class SqliteDialect(Dialect):
    name = "sqlite"
    schema = schema.SQLITE
    greatest = "max"
    key_lock_sql = None  # the single writer connection serializes every write (relay.md §13.1)
    # A batch of 10^5 events dirties pages all over the id-keyed indexes (events, event_tags):
    # with the default 2 MiB cache they spill to the WAL and are read back again and again
    # (2× the time at 400k events). The writer connection keeps the larger bound (memory is
    # taken only as pages are read) until the store closes. No lock: one writer connection.
    bulk_sql = ("PRAGMA cache_size = -262144",)  # KiB: 256 MiB
    search_index_sql = "INSERT INTO events_fts (rowid, content) VALUES (?1, ?2)"
    # Decision 86's OR read both indexes of a channel and sorted them: 123 ms a page at 1M
    # events. Past 16 channels the written-out subqueries cost more than the OR (decision 101).
    h_by_channel_max = 16
    lateral = False
    bool_or = "max"

    def placeholder(self, n: int) -> str:
        return f"?{n}"

    def in_list(self, params: Params, expr: str, values: Sequence[object], sqltype: SqlType) -> str:
        # json_each cuts a string at U+0000, so such values stay separate parameters.
        inline = (
            [v for v in values if isinstance(v, str) and "\0" in v]
            if len(values) > _SQLITE_INLINE_MAX
            else values
        )
        parts = []
        if inline:
            parts.append(f"{expr} IN ({', '.join(params.add(v, sqltype) for v in inline)})")
        if len(inline) < len(values):
            rest = [v for v in values if not (isinstance(v, str) and "\0" in v)]
            parts.append(f"{expr} IN (SELECT value FROM json_each({params.add_raw(json.dumps(rest))}))")
        return parts[0] if len(parts) == 1 else f"({parts[0]} OR {parts[1]})"

    def values_table(self, params: Params, values: Sequence[str], alias: str) -> str:
        return f"json_each({params.add_raw(json.dumps(list(values)))}) AS {alias}"

    def search_from(self, ref: str, clause: str) -> str:
        return f"FROM events e JOIN events_fts ON events_fts.rowid = e.seq WHERE {clause} AND events_fts MATCH {ref}"

    def search_order(self, ref: str) -> str:
        return "bm25(events_fts)"  # lower is more relevant

    def search_arg(self, terms: Sequence[str]) -> str:
        # Each term an FTS5 string (relay.md §11 item 3): operators and punctuation stay literal.
        return " ".join('"' + t.replace('"', '""') + '"' for t in terms)


_PG_ARRAY = {"text": "text", "int": "bigint", "utf8": "bytea"}


class PostgresDialect(Dialect):
    name = "postgres"
    schema = schema.POSTGRES
    greatest = "GREATEST"
    key_lock_sql = "SELECT pg_advisory_xact_lock($1)"
    # Holds off other writers of `events` until the commit, so the batch's "no such id / key"
    # checks stay true: it conflicts with every INSERT/UPDATE's ROW EXCLUSIVE, not with reads.
    bulk_sql = ("LOCK TABLE events IN SHARE ROW EXCLUSIVE MODE",)
    search_index_sql = "INSERT INTO event_search (event_id, tsv) VALUES ($1, to_tsvector('simple', $2))"
    # A `#h` filter as one OR of the tag set and the channel column cannot walk any index in
    # time order: PostgreSQL read every event of the kind and sorted them (decision 91).
    h_by_channel_max = 1 << 30  # every `#h` filter: one LATERAL however many channels
    lateral = True
    bool_or = "bool_or"

    def placeholder(self, n: int) -> str:
        return f"${n}"

    def encode(self, value: object, sqltype: SqlType) -> object:
        return value.encode() if sqltype == "utf8" and isinstance(value, str) else value

    def decode_utf8(self, value: Any) -> str:
        return bytes(value).decode()

    def in_list(self, params: Params, expr: str, values: Sequence[object], sqltype: SqlType) -> str:
        if len(values) == 1:
            # One value as a plain equality: `= ANY(array)` cannot walk an index in its order, so
            # `{"authors":[a],"kinds":[k]}` read every event of the author by time over the
            # whole table, or all of them and sorted (decision 354).
            return f"{expr} = {params.add_raw(self.encode(values[0], sqltype))}::{_PG_ARRAY[sqltype]}"
        ref = params.add_raw([self.encode(v, sqltype) for v in values])
        return f"{expr} = ANY({ref}::{_PG_ARRAY[sqltype]}[])"

    def values_table(self, params: Params, values: Sequence[str], alias: str) -> str:
        return f"unnest({params.add_raw(list(values))}::text[]) AS {alias}(value)"

    def search_from(self, ref: str, clause: str) -> str:
        # The matches from the GIN index alone (OFFSET 0: planned apart, so nothing asks it for
        # rank order), then one key lookup per match (LIMIT 1 keeps the lateral subquery a
        # lookup). A cached generic plan cannot estimate `@@` on a parameter: it otherwise
        # hash-joined the hits with a scan of every event, or read the whole search table in
        # rank order (decision 91).
        query = f"plainto_tsquery('simple', {ref})"
        return (
            f"FROM (SELECT s.event_id, ts_rank(s.tsv, {query}) AS rank"
            f" FROM event_search s WHERE s.tsv @@ {query} OFFSET 0) AS s"
            f" CROSS JOIN LATERAL (SELECT e.* FROM events e WHERE e.id = s.event_id AND {clause} LIMIT 1) AS e"
        )

    def search_order(self, ref: str) -> str:
        return "s.rank DESC"

    def search_arg(self, terms: Sequence[str]) -> str:
        return " ".join(terms)


SQLITE = SqliteDialect()
POSTGRES = PostgresDialect()
