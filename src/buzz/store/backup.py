"""Backups for `buzz admin backup` and what the banner may print about a database URL.

SQLite: the online backup API (`sqlite3.Connection.backup`) copies a consistent snapshot page
by page while the relay keeps writing (WAL readers never block the writer). PostgreSQL: the
operator's `pg_dump` does it better than we could, so we only build its command line.
"""

from __future__ import annotations

import os
import shlex
import sqlite3
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

PAGES_PER_STEP = 1024  # pages copied per backup step: the relay's writer gets the lock between steps


def sqlite_backup(source: Path, dest: Path) -> int:
    """Copy the SQLite database `source` to the new file `dest`; returns its size in bytes.

    Raises FileNotFoundError when `source` is missing, FileExistsError when `dest` exists,
    NotADirectoryError when `dest`'s directory is missing or not a directory, PermissionError
    when it is not writable, sqlite3.Error on a database failure (a partial `dest` is removed).
    """
    if not source.is_file():
        raise FileNotFoundError(f"no SQLite database at {source}")
    if dest.exists():
        raise FileExistsError(f"{dest} already exists; choose a new file")
    folder = dest.parent
    if not folder.is_dir():
        raise NotADirectoryError(f"cannot write the backup to {dest}: directory {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise PermissionError(f"cannot write the backup to {dest}: directory {folder} is not writable")
    src = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
    try:
        dst = sqlite3.connect(dest)
        try:
            src.backup(dst, pages=PAGES_PER_STEP)
        finally:
            dst.close()
    except BaseException:
        dest.unlink(missing_ok=True)
        raise
    finally:
        src.close()
    return dest.stat().st_size


def redact_url(url: str) -> str:
    """`url` without its password (`postgresql://user:secret@host/db` → `postgresql://user@host/db`)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.hostname or ""
    if parts.port is not None:
        netloc = f"{netloc}:{parts.port}"
    if parts.username:
        netloc = f"{parts.username}@{netloc}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def describe_postgres(url: str) -> str:
    """`host[:port]/dbname` of a PostgreSQL URL, for the banner (never the password)."""
    parts = urlsplit(url)
    host = parts.hostname or "localhost"
    port = f":{parts.port}" if parts.port else ""
    return f"{host}{port}/{parts.path.lstrip('/') or '(default database)'}"


def pg_dump_command(url: str, dest: Path) -> str:
    """The shell command that backs up the PostgreSQL database at `url` into `dest` (custom
    format, restore with `pg_restore`). The password is left out: pg_dump reads PGPASSWORD or
    ~/.pgpass."""
    return shlex.join(["pg_dump", "--format=custom", f"--file={dest}", redact_url(url)])
