"""What differs between SQLite and PostgreSQL, behind one small object (style.md §4).

The shared SQL (`buzz.store.clauses`, `reads`, `writes`) never asks which driver runs it; it
asks the dialect for a placeholder, an IN-list, a text encoding, the search join and the
per-key lock. Both backends hand the shared SQL a `Conn`.

Differences answered here:

| question                  | SQLite                            | PostgreSQL                              |
|---------------------------|-----------------------------------|-----------------------------------------|
| placeholder n             | `?n`                              | `$n`                                    |
| `col IN values`           | `col IN (?1, ?2, …)`              | `col = ANY($1::type[])` (one parameter) |
| byte-exact text columns   | TEXT                              | bytea (text cannot hold U+0000)         |
| full-text search (§11)    | FTS5 `events_fts`, bm25           | `event_search.tsv`, ts_rank             |
| per-key write lock (§13.3)| none: one writer connection       | `pg_advisory_xact_lock(<key hash>)`     |
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from typing import Any, Literal, Protocol

from buzz.store import schema

SqlType = Literal["text", "int", "utf8"]
"""`text` ASCII keys (ids, pubkeys, names); `int`; `utf8` byte-exact client text (content,
`d`, tag values), stored as bytea on PostgreSQL."""


class Conn(Protocol):
    """A connection (inside a transaction for writes) as the shared SQL sees it."""

    dialect: Dialect

    async def fetch(self, sql: str, args: Sequence[object] = ()) -> Sequence[Sequence[Any]]: ...

    async def execute(self, sql: str, args: Sequence[object] = ()) -> None: ...

    async def executemany(self, sql: str, rows: Sequence[Sequence[object]]) -> None: ...


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


class Dialect(ABC):
    """The base lists every question; the two instances below answer them."""

    name: str
    schema: tuple[str, ...]
    greatest: str
    key_lock_sql: str | None
    search_join: str
    search_index_sql: str  # parameters: (event id, searchable text)

    @abstractmethod
    def placeholder(self, n: int) -> str: ...

    def encode(self, value: object, sqltype: SqlType) -> object:
        return value

    def decode_utf8(self, value: Any) -> str:
        return str(value)

    @abstractmethod
    def in_list(self, params: Params, expr: str, values: Sequence[object], sqltype: SqlType) -> str: ...

    @abstractmethod
    def search_match(self, ref: str) -> str:
        """WHERE fragment: the searched text `ref` (placeholder) matches the joined index."""

    @abstractmethod
    def search_order(self, ref: str) -> str:
        """ORDER BY fragment: most relevant first."""

    @abstractmethod
    def search_arg(self, terms: Sequence[str]) -> str:
        """The value bound to `ref` for these terms (every term a whole token, AND)."""


class SqliteDialect(Dialect):
    name = "sqlite"
    schema = schema.SQLITE
    greatest = "max"
    key_lock_sql = None  # the single writer connection serializes every write (relay.md §13.1)
    search_join = "JOIN events_fts ON events_fts.rowid = e.seq"
    search_index_sql = "INSERT INTO events_fts (rowid, content) SELECT seq, ?2 FROM events WHERE id = ?1"

    def placeholder(self, n: int) -> str:
        return f"?{n}"

    def in_list(self, params: Params, expr: str, values: Sequence[object], sqltype: SqlType) -> str:
        return f"{expr} IN ({', '.join(params.add(v, sqltype) for v in values)})"

    def search_match(self, ref: str) -> str:
        return f"events_fts MATCH {ref}"

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
    search_join = "JOIN event_search s ON s.event_id = e.id"
    search_index_sql = "INSERT INTO event_search (event_id, tsv) VALUES ($1, to_tsvector('simple', $2))"

    def placeholder(self, n: int) -> str:
        return f"${n}"

    def encode(self, value: object, sqltype: SqlType) -> object:
        return value.encode() if sqltype == "utf8" and isinstance(value, str) else value

    def decode_utf8(self, value: Any) -> str:
        return bytes(value).decode()

    def in_list(self, params: Params, expr: str, values: Sequence[object], sqltype: SqlType) -> str:
        ref = params.add_raw([self.encode(v, sqltype) for v in values])
        return f"{expr} = ANY({ref}::{_PG_ARRAY[sqltype]}[])"

    def search_match(self, ref: str) -> str:
        return f"s.tsv @@ plainto_tsquery('simple', {ref})"

    def search_order(self, ref: str) -> str:
        return f"ts_rank(s.tsv, plainto_tsquery('simple', {ref})) DESC"

    def search_arg(self, terms: Sequence[str]) -> str:
        return " ".join(terms)


SQLITE = SqliteDialect()
POSTGRES = PostgresDialect()
