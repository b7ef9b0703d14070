"""The database side of `buzz admin backup` / `restore`, and what the banner may print about a
database URL.

SQLite: one consistent snapshot, copied in a single step of the online backup API. The step
reads in one transaction; in WAL mode the relay's writer never waits for it, and nothing the
writer commits meanwhile can restart it. (Copying N pages per step restarted the whole copy at
every commit between two steps: under a steady 85 events/s it never finished, issue 24 item
16.) PostgreSQL: the operator's `pg_dump` does it better than we could (consistent snapshots,
parallel dumps, their own restore), so we only build its command lines (docs/decisions.md 130).
"""

from __future__ import annotations

import os
import shlex
import sqlite3
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

# What `sqlite_counts` reports: a name → the statement that counts it. Restore compares them
# with the archive's manifest.
COUNTS: dict[str, str] = {
    "events": "SELECT COUNT(*) FROM events",
    "channels": "SELECT COUNT(*) FROM channels",
    "channel_members": "SELECT COUNT(*) FROM channel_members",
    "relay_members": "SELECT COUNT(*) FROM relay_members",
    "bans": "SELECT COUNT(*) FROM relay_bans",
}


def check_destination(dest: Path) -> None:
    """Raise FileExistsError when `dest` exists, NotADirectoryError when its folder is missing,
    PermissionError when that folder is not writable: a backup never overwrites anything."""
    if dest.exists():
        raise FileExistsError(f"{dest} already exists; choose a new file")
    folder = dest.parent
    if not folder.is_dir():
        raise NotADirectoryError(f"cannot write the backup to {dest}: directory {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise PermissionError(f"cannot write the backup to {dest}: directory {folder} is not writable")


def sqlite_snapshot(source: Path, dest: Path) -> int:
    """Copy the SQLite database `source`, consistent as of one moment, to the new file `dest`
    (a single file: rollback journal, no `-wal` beside it); returns its size in bytes.

    Raises FileNotFoundError when `source` is missing, FileExistsError when `dest` exists,
    sqlite3.Error on a database failure (a partial `dest` is removed).
    """
    if not source.is_file():
        raise FileNotFoundError(f"no SQLite database at {source}")
    if dest.exists():
        raise FileExistsError(f"{dest} already exists; choose a new file")
    src = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
    try:
        dst = sqlite3.connect(dest)
        try:
            src.backup(dst, pages=-1)  # every page in one step: one read transaction, no restart
            dst.execute("PRAGMA journal_mode = DELETE")  # the copy stands alone, WAL folded in
        finally:
            dst.close()
    except BaseException:
        for leftover in (dest, dest.with_name(dest.name + "-wal"), dest.with_name(dest.name + "-shm")):
            leftover.unlink(missing_ok=True)
        raise
    finally:
        src.close()
    return dest.stat().st_size


def sqlite_standalone(path: Path) -> None:
    """Turn the closed SQLite file `path` into one that stands alone (rollback journal): a
    WAL-mode file opened read-only would leave `-wal` and `-shm` files beside it."""
    db = sqlite3.connect(path)
    try:
        db.execute("PRAGMA journal_mode = DELETE")
    finally:
        db.close()


def sqlite_counts(path: Path) -> dict[str, int]:
    """Row counts of a SQLite database file (COUNTS), read-only."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return {name: int(db.execute(sql).fetchone()[0]) for name, sql in COUNTS.items()}
    finally:
        db.close()


def sqlite_check(path: Path) -> str | None:
    """None when `PRAGMA quick_check` finds `path` sound, else what it found (first lines)."""
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            rows = [str(r[0]) for r in db.execute("PRAGMA quick_check(5)")]
        finally:
            db.close()
    except sqlite3.Error as exc:
        return str(exc)
    return None if rows == ["ok"] else "; ".join(rows)


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


def pg_restore_command(url: str, dump: Path) -> str:
    """The shell command that loads the `pg_dump` file `dump` into the empty database at `url`
    (`createdb` it first); objects are owned by the user that runs it. No password, as above."""
    return shlex.join(["pg_restore", "--no-owner", f"--dbname={redact_url(url)}", str(dump)])
