"""`buzz admin backup` and `buzz admin restore`: a relay's data directory in one archive
(`buzz.store.archive`: manifest, SQLite snapshot, relay key, the blob files under `media/`) and
back, checked at both ends.

Blobs (media.md §10.2 `files` store) go in as `media/<sha256[0:2]>/<sha256>` and its
`.thumb.jpg`: with SQLite, exactly the blobs of the snapshot's `media_blobs` rows (hard-linked
beside the snapshot right after it, so a collection running meanwhile cannot take them away);
with PostgreSQL, every blob file of the data directory (with the `db` store the bytes are rows of
the database, in its `pg_dump`). A file listed by the snapshot but already gone (collected
between the two steps) is counted in `media_missing` and left out.

Backup never overwrites a file and writes the archive with mode 0600 (it holds the relay's
secret key). Restore only fills a new or empty data directory: it extracts into a private
folder beside it, checks every file against the manifest, the key against the relay pubkey it
names and the database (`PRAGMA quick_check`, row counts) against the counts it recorded, and
only then moves that folder into place, so a failed restore leaves nothing behind. With
PostgreSQL the archive holds what lives outside the database (the key, blob files) and the
database is the operator's `pg_dump` / `pg_restore`, whose command lines are printed
(docs/decisions.md 130).
"""

from __future__ import annotations

import datetime
import hashlib
import os
import shutil
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

from buzz import __version__
from buzz.client.errors import UserError, WorkspaceError
from buzz.core.keys import is_hex, public_key
from buzz.relay.operator.relay_key import KEY_FILE
from buzz.store import SQLITE_FILENAME
from buzz.store.archive import ArchiveError, Manifest, Member, Source, read_archive, write_archive
from buzz.store.backup import (
    check_destination,
    pg_dump_command,
    pg_restore_command,
    sqlite_check,
    sqlite_counts,
    sqlite_snapshot,
    sqlite_standalone,
)

MEDIA_DIR = "media"  # the blob files of the `files` store (buzz.media.blobs.FileBlobs)
SQLITE_MAGIC = b"SQLite format 3\x00"  # a plain database file: what `admin backup` wrote before archives
NO_KEY = (
    "{dir} holds no {key}: a relay started with BUZZ_RELAY_PRIVATE_KEY keeps its key in its "
    "environment; keep that secret with this backup, or the restored relay gets a new pubkey"
)


def backup(data_dir: Path, db: str | None, sqlite_file: Path | None, dest: Path) -> dict[str, Any]:
    """Write the archive `dest`; returns what `buzz admin backup` prints. Raises UserError for
    a bad destination or a missing database, WorkspaceError when the copy fails."""
    try:
        check_destination(dest)
    except (FileExistsError, NotADirectoryError, PermissionError) as exc:
        raise UserError(str(exc)) from None
    key_path = data_dir / KEY_FILE
    pubkey = _relay_pubkey(key_path) if key_path.is_file() else None
    keys = [Source(KEY_FILE, key_path, 0o600)] if pubkey is not None else []
    now = int(time.time())
    try:
        if sqlite_file is None:
            dump = _dump_path(dest)
            manifest = Manifest("postgresql", now, __version__, pubkey, None, dump.name)
            media, missing = _media_files(data_dir, None)
            written = write_archive(dest, manifest, [*keys, *media])
            shown = _shown(written, dest, None)
            shown["database"] = "not in the archive: run `command` to dump it beside the archive"
            shown["command"] = pg_dump_command(db or "", dump)
        else:
            if not sqlite_file.is_file():
                raise UserError(f"no SQLite database at {sqlite_file}: pass the relay's --data-dir (or --db)")
            with tempfile.TemporaryDirectory(dir=dest.parent, prefix=".buzz-backup-") as work:
                snapshot = Path(work) / SQLITE_FILENAME
                sqlite_snapshot(sqlite_file, snapshot)
                media, missing = _media_files(data_dir, snapshot, Path(work))
                manifest = Manifest("sqlite", now, __version__, pubkey, sqlite_counts(snapshot))
                sources = [Source(SQLITE_FILENAME, snapshot, 0o600), *keys, *media]
                written = write_archive(dest, manifest, sources)
            shown = _shown(written, dest, sqlite_file)
    except (sqlite3.Error, OSError) as exc:  # the partial archive was removed
        raise WorkspaceError(f"backup failed: {exc}") from None
    if missing:
        shown["media_missing"] = missing
    if pubkey is None:
        shown["warning"] = NO_KEY.format(dir=data_dir, key=KEY_FILE)
    return shown


def restore(archive: Path, data_dir: Path, db: str | None, sqlite_file: Path | None) -> dict[str, Any]:
    """Restore `archive` into the new or empty `data_dir`; returns what `buzz admin restore`
    prints. Raises UserError for a missing archive, a target that is not empty, a backend
    mismatch or an archive that fails its checks; WorkspaceError for a write failure."""
    if not archive.is_file():
        raise UserError(f"no backup archive at {archive}")
    _check_target(data_dir)
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=data_dir.parent, prefix=f".{data_dir.name}.restoring-"))
    try:
        legacy = _is_plain_sqlite(archive)
        manifest = _legacy(archive, staging) if legacy else read_archive(archive, staging)
        _check_backend(manifest, db, sqlite_file, data_dir)
        _check_key(manifest, staging)
        counts = _check_database(manifest, staging)
        _check_target(data_dir)  # again, right before the move
        os.replace(staging, data_dir)  # creates it, or replaces the empty directory
    except ArchiveError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise UserError(f"cannot restore {archive}: {exc}") from None
    except (sqlite3.Error, OSError) as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise WorkspaceError(f"restore failed: {exc}") from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    shown: dict[str, Any] = {
        "restored": str(data_dir),
        "archive": str(archive),
        "backend": manifest.backend,
        "created_at": _when(manifest.created_at),
        "relay_pubkey": manifest.relay_pubkey,
        "counts": counts,
        "files": [m.path for m in manifest.files if not m.path.startswith(MEDIA_DIR + "/")],
        "media_files": sum(m.path.startswith(MEDIA_DIR + "/") for m in manifest.files),
    }
    if manifest.backend == "postgresql":
        dump = archive.parent / (manifest.pg_dump_file or "")
        shown["command"] = pg_restore_command(db or "", dump)
        shown["next"] = (
            f"run `command` into an empty database, then: buzz relay serve --data-dir {data_dir} --db …"
        )
    else:
        shown["next"] = f"buzz relay serve --data-dir {data_dir}"
    if legacy:
        shown["warning"] = (
            f"a plain SQLite copy made by an older buzz: it holds no relay key, so the relay gets a new "
            f"pubkey unless you put its old {KEY_FILE} in {data_dir} (or set BUZZ_RELAY_PRIVATE_KEY)"
        )
    return shown


# -- backup helpers --------------------------------------------------------------------------
def _relay_pubkey(key_path: Path) -> str:
    value = key_path.read_text().strip().lower()
    if not is_hex(value, 64):
        raise UserError(f"{key_path} does not hold a 64-hex secret key")
    return public_key(value)


def _dump_path(dest: Path) -> Path:
    """Where the printed pg_dump command writes: beside the archive, `<name>.pgdump`."""
    name = dest.name
    for suffix in (".tar.gz", ".tgz", ".tar"):
        if name.endswith(suffix) and len(name) > len(suffix):
            name = name[: -len(suffix)]
            break
    return dest.with_name(name + ".pgdump")


def _shown(manifest: Manifest, dest: Path, source: Path | None) -> dict[str, Any]:
    shown: dict[str, Any] = {"backend": manifest.backend}
    if source is not None:
        shown["source"] = str(source)
    shown |= {
        "file": str(dest),
        "bytes": dest.stat().st_size,
        "format": f"{manifest.format} v{manifest.version}",
        "relay_pubkey": manifest.relay_pubkey,
        "counts": dict(manifest.counts) if manifest.counts is not None else None,
        "files": [m.path for m in manifest.files if not m.path.startswith(MEDIA_DIR + "/")],
        "media_files": sum(m.path.startswith(MEDIA_DIR + "/") for m in manifest.files),
    }
    return shown


def _media_files(data_dir: Path, snapshot: Path | None, work: Path | None = None) -> tuple[list[Source], int]:
    """The blob files to archive and how many the snapshot names that are gone (module doc)."""
    root = data_dir / MEDIA_DIR
    if snapshot is None:
        found = (
            sorted(p for p in root.glob("??/*") if p.is_file() and len(p.parent.name) == 2)
            if root.is_dir()
            else []
        )
        return [Source(p.relative_to(data_dir).as_posix(), p, 0o600) for p in found], 0
    db = sqlite3.connect(f"file:{snapshot}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT sha256, has_thumb FROM media_blobs ORDER BY sha256").fetchall()
    except sqlite3.OperationalError:  # a database from before files: no blobs
        rows = []
    finally:
        db.close()
    sources, missing = [], 0
    for sha256, has_thumb in rows:
        for name in (sha256, *((sha256 + ".thumb.jpg",) if has_thumb else ())):
            rel = f"{MEDIA_DIR}/{sha256[:2]}/{name}"
            kept = _keep(data_dir / rel, work)
            if kept is None:
                missing += 1
                continue
            sources.append(Source(rel, kept, 0o600))
    return sources, missing


def _keep(path: Path, work: Path | None) -> Path | None:
    """`path`, hard-linked into `work` when it can be (same file system); None when it is gone."""
    if work is None:
        return path if path.is_file() else None
    link = work / "media" / path.name
    link.parent.mkdir(exist_ok=True)
    try:
        os.link(path, link)
        return link
    except FileNotFoundError:
        return None
    except OSError:  # another file system: archive it from where it is
        return path if path.is_file() else None


# -- restore helpers -------------------------------------------------------------------------
def _check_target(data_dir: Path) -> None:
    if not data_dir.exists():
        return
    if not data_dir.is_dir():
        raise UserError(f"cannot restore into {data_dir}: it is a file, not a directory")
    entries = sorted(p.name for p in data_dir.iterdir())
    if entries:
        shown = ", ".join(entries[:3]) + (", …" if len(entries) > 3 else "")
        raise UserError(
            f"cannot restore into {data_dir}: it is not empty ({shown}); restore into a new or empty "
            "data directory (--data-dir)"
        )


def _is_plain_sqlite(archive: Path) -> bool:
    with open(archive, "rb") as fh:
        return fh.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC


def _legacy(archive: Path, staging: Path) -> Manifest:
    """A bare SQLite file (what `admin backup` wrote before archives) seen as an archive
    without a key: copied in, its counts are what it holds."""
    copy = staging / SQLITE_FILENAME
    shutil.copyfile(archive, copy)
    copy.chmod(0o600)
    sqlite_standalone(copy)
    counts = sqlite_counts(copy)
    member = Member(SQLITE_FILENAME, copy.stat().st_size, hashlib.sha256(copy.read_bytes()).hexdigest())
    return Manifest("sqlite", int(archive.stat().st_mtime), "", None, counts, None, (member,))


def _check_backend(manifest: Manifest, db: str | None, sqlite_file: Path | None, data_dir: Path) -> None:
    if manifest.backend == "postgresql":
        if sqlite_file is not None:
            raise UserError(
                "this archive is from a PostgreSQL relay: give --db postgresql://… naming the new, "
                "empty database to load its pg_dump into"
            )
        return
    if sqlite_file is None:
        raise UserError(
            f"this archive holds a SQLite database: restore it without --db {db!r}, into --data-dir"
        )
    if sqlite_file != data_dir / SQLITE_FILENAME:
        raise UserError(
            f"restore puts the database at {data_dir / SQLITE_FILENAME}: run it without --db (a relay "
            "started with that --data-dir and no --db uses it)"
        )


def _check_key(manifest: Manifest, staging: Path) -> None:
    has_key = manifest.member(KEY_FILE) is not None
    if has_key != (manifest.relay_pubkey is not None):
        raise ArchiveError(f"the manifest's relay_pubkey and its {KEY_FILE} disagree")
    if not has_key:
        return
    value = (staging / KEY_FILE).read_text().strip().lower()
    if not is_hex(value, 64) or public_key(value) != manifest.relay_pubkey:
        raise ArchiveError(f"{KEY_FILE} is not the secret key of relay {manifest.relay_pubkey}")


def _check_database(manifest: Manifest, staging: Path) -> dict[str, int] | None:
    if manifest.backend != "sqlite":
        return None
    if manifest.member(SQLITE_FILENAME) is None:
        raise ArchiveError(f"a SQLite archive without {SQLITE_FILENAME}")
    database = staging / SQLITE_FILENAME
    problem = sqlite_check(database)
    if problem is not None:
        raise ArchiveError(f"{SQLITE_FILENAME} fails SQLite's quick_check: {problem}")
    counts = sqlite_counts(database)
    if manifest.counts is not None and counts != dict(manifest.counts):
        raise ArchiveError(f"{SQLITE_FILENAME} holds {counts}, the manifest recorded {dict(manifest.counts)}")
    return counts


def _when(ts: int) -> str:
    return datetime.datetime.fromtimestamp(ts, datetime.UTC).isoformat(timespec="seconds")
