"""Event storage: the `EventStore` interface and its SQLite and PostgreSQL backends.

`open_store` picks the backend from configuration (relay.md §13.1, §16); the returned store
is not open yet: `await store.open()` connects and creates the schema.
"""

from __future__ import annotations

from pathlib import Path

from buzz.store.base import EventStore

SQLITE_FILENAME = "relay.sqlite3"
_POSTGRES_SCHEMES = ("postgres://", "postgresql://")


def sqlite_path(url_or_path: str | None, data_dir: Path) -> Path | None:
    """The SQLite file `open_store` would use, or None for PostgreSQL (same rules, no checks)."""
    if url_or_path and url_or_path.startswith(_POSTGRES_SCHEMES):
        return None
    if not url_or_path:
        return Path(data_dir) / SQLITE_FILENAME
    if url_or_path.startswith("sqlite:///"):
        return Path(url_or_path.removeprefix("sqlite://"))
    return Path(url_or_path)


def check_database_url(url_or_path: str | None) -> None:
    """Raise ValueError for a URL whose scheme is neither SQLite nor PostgreSQL (relay.md §16)."""
    if not url_or_path or url_or_path.startswith(_POSTGRES_SCHEMES) or url_or_path.startswith("sqlite:///"):
        return
    if "://" in url_or_path:
        scheme = url_or_path.split("://", 1)[0]
        raise ValueError(f"unsupported database URL scheme '{scheme}' (use sqlite path or postgresql://)")


def open_store(url_or_path: str | None, data_dir: Path) -> EventStore:
    """The configured backend, not yet opened (relay.md §13.1).

    `postgres://…` or `postgresql://…` → PostgresStore; None or "" → SQLite at
    `<data_dir>/relay.sqlite3`; `sqlite:///<path>` or a plain file path → SQLite at that file.
    Raises ValueError for any other URL scheme (relay.md §16: unparsable URLs stop startup).
    """
    if url_or_path and url_or_path.startswith(_POSTGRES_SCHEMES):
        from buzz.store.postgres import PostgresStore

        return PostgresStore(url_or_path)
    from buzz.store.sqlite import SqliteStore

    if not url_or_path:
        return SqliteStore(Path(data_dir) / SQLITE_FILENAME)
    if url_or_path.startswith("sqlite:///"):
        return SqliteStore(Path(url_or_path.removeprefix("sqlite://")))
    check_database_url(url_or_path)
    return SqliteStore(Path(url_or_path))
