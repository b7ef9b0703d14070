"""Blob metadata, uploaders, references and `db` chunks (media.md §9.3, §10, §11, §12), shared
by both backends: the `_txn` functions and `MediaStoreMixin`, the `SqlStore` methods over them.

A reference counts while its event is **live**: stored, not deleted or superseded, and not in a
deleted channel (`LIVE_REF`). Deleting an event therefore needs no step here; the collection
(`collect_txn`) removes the references of dead events with the blob (decision 194).

Locks (PostgreSQL; SQLite has one writer): an insert referencing a blob takes its row `FOR
SHARE` (`put_refs_txn`), a collection takes it `FOR UPDATE` and then looks for live references
in a new statement, so whichever commits first wins and a committed reference is always seen.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

from buzz.core.stored import StoredEvent
from buzz.store.base import BlobRow, MediaBlobMissing, PutMediaRefs, Reader
from buzz.store.clauses import EVENT_COLUMNS, readable_channel
from buzz.store.dialect import Conn, Params
from buzz.store.reads import event_from_row

BLOB_COLUMNS = tuple(f.name for f in fields(BlobRow))
LIVE_REF = (
    "EXISTS (SELECT 1 FROM media_refs r JOIN events e ON e.id = r.event_id"
    " LEFT JOIN channels c ON c.id = e.channel_id"
    " WHERE r.sha256 = b.sha256 AND e.deleted_at IS NULL AND (e.channel_id IS NULL OR c.deleted_at IS NULL))"
)


def _row(values: Sequence[Any]) -> BlobRow:
    row = dict(zip(BLOB_COLUMNS, values, strict=True))
    row["has_thumb"] = bool(row["has_thumb"])
    return BlobRow(**row)


def _lock(conn: Conn, mode: str) -> str:
    return f" FOR {mode}" if conn.dialect.name == "postgres" else ""


async def blob_txn(conn: Conn, sha256: str) -> BlobRow | None:
    p = Params(conn.dialect)
    rows = await conn.fetch(
        f"SELECT {', '.join(BLOB_COLUMNS)} FROM media_blobs WHERE sha256 = {p.add(sha256)}", p.values
    )
    return _row(rows[0]) if rows else None


async def put_blob_txn(
    conn: Conn, row: BlobRow, pubkey: str, now: int, chunk_files: Sequence[tuple[str, str]], chunk_bytes: int
) -> tuple[BlobRow, int]:
    """media.md §4.1 item 11: the metadata row (with the `db` chunks read from `chunk_files`,
    (key, path) pairs) when new, else `last_upload_at` = now; the uploader row. Returns the
    stored row and this uploader's `uploaded_at`."""
    p = Params(conn.dialect)
    values = {**{c: getattr(row, c) for c in BLOB_COLUMNS}, "has_thumb": int(row.has_thumb)}
    values["created_at"] = values["last_upload_at"] = now
    marks = ", ".join(p.add(values[c]) for c in BLOB_COLUMNS)
    inserted = await conn.fetch(
        f"INSERT INTO media_blobs ({', '.join(BLOB_COLUMNS)}) VALUES ({marks})"
        " ON CONFLICT (sha256) DO NOTHING RETURNING sha256",
        p.values,
    )
    if inserted:
        for key, path in chunk_files:
            await _write_chunks(conn, key, Path(path), chunk_bytes)
    else:
        p = Params(conn.dialect)
        await conn.execute(
            f"UPDATE media_blobs SET last_upload_at = {p.add(now)} WHERE sha256 = {p.add(row.sha256)}",
            p.values,
        )
    p = Params(conn.dialect)
    await conn.execute(
        "INSERT INTO media_uploaders (sha256, pubkey, uploaded_at)"
        f" VALUES ({p.add(row.sha256)}, {p.add(pubkey)}, {p.add(now)}) ON CONFLICT (sha256, pubkey) DO NOTHING",
        p.values,
    )
    stored = await blob_txn(conn, row.sha256)
    assert stored is not None
    return stored, await uploaded_at_txn(conn, row.sha256, pubkey) or now


async def _write_chunks(conn: Conn, key: str, path: Path, chunk_bytes: int) -> None:
    with path.open("rb") as fh:
        seq = 0
        while piece := fh.read(chunk_bytes):
            p = Params(conn.dialect)
            await conn.execute(
                f"INSERT INTO media_chunks (key, seq, data) VALUES ({p.add(key)}, {p.add(seq)}, {p.add_raw(piece)})",
                p.values,
            )
            seq += 1


async def uploaded_at_txn(conn: Conn, sha256: str, pubkey: str) -> int | None:
    p = Params(conn.dialect)
    rows = await conn.fetch(
        f"SELECT uploaded_at FROM media_uploaders WHERE sha256 = {p.add(sha256)} AND pubkey = {p.add(pubkey)}",
        p.values,
    )
    return int(rows[0][0]) if rows else None


async def usage_txn(conn: Conn, pubkey: str | None) -> int:
    """Bytes of the blobs `pubkey` holds (every blob when None)."""
    p = Params(conn.dialect)
    if pubkey is None:
        rows = await conn.fetch("SELECT COALESCE(SUM(size), 0) FROM media_blobs")
    else:
        rows = await conn.fetch(
            "SELECT COALESCE(SUM(b.size), 0) FROM media_uploaders u JOIN media_blobs b ON b.sha256 = u.sha256"
            f" WHERE u.pubkey = {p.add(pubkey)}",
            p.values,
        )
    return int(rows[0][0])


async def readable_refs_txn(conn: Conn, sha256: str, reader: Reader, limit: int) -> list[StoredEvent]:
    """Live events referencing the blob whose channel (if any) `reader` may read (relay.md
    §4.3 item 1); the per-event sets of §5.3 are the caller's."""
    p = Params(conn.dialect)
    sql = (
        f"SELECT {EVENT_COLUMNS} FROM media_refs r JOIN events e ON e.id = r.event_id"
        f" WHERE r.sha256 = {p.add(sha256)} AND e.deleted_at IS NULL AND (e.channel_id IS NULL OR"
        f" e.channel_id IN (SELECT c.id FROM channels c WHERE {readable_channel(reader, p)}))"
        f" ORDER BY e.channel_id IS NOT NULL, e.created_at DESC LIMIT {int(limit)}"
    )
    return [event_from_row(row, conn.dialect) for row in await conn.fetch(sql, p.values)]


async def put_refs_txn(conn: Conn, effect: PutMediaRefs) -> None:
    """The PutMediaRefs effect, inside the event's insert transaction."""
    for sha256 in effect.hashes:
        p = Params(conn.dialect)
        found = await conn.fetch(
            f"SELECT 1 FROM media_blobs WHERE sha256 = {p.add(sha256)}{_lock(conn, 'SHARE')}", p.values
        )
        if not found:
            raise MediaBlobMissing(sha256)
        p = Params(conn.dialect)
        await conn.execute(
            f"INSERT INTO media_refs (sha256, event_id) VALUES ({p.add(sha256)}, {p.add(effect.event_id)})"
            " ON CONFLICT (sha256, event_id) DO NOTHING",
            p.values,
        )


async def chunks_txn(conn: Conn, key: str, first: int, last: int) -> list[bytes]:
    """The `db` chunks `first`..`last` (inclusive) of `key`, in order."""
    p = Params(conn.dialect)
    rows = await conn.fetch(
        f"SELECT data FROM media_chunks WHERE key = {p.add(key)} AND seq >= {p.add(first)}"
        f" AND seq <= {p.add(last)} ORDER BY seq",
        p.values,
    )
    return [bytes(row[0]) for row in rows]


async def collectable_txn(conn: Conn, cutoff: int, limit: int) -> list[str]:
    """media.md §12 item 1: blobs without a live reference last uploaded before `cutoff`."""
    p = Params(conn.dialect)
    rows = await conn.fetch(
        f"SELECT b.sha256 FROM media_blobs b WHERE b.last_upload_at < {p.add(cutoff)} AND NOT {LIVE_REF}"
        f" ORDER BY b.last_upload_at LIMIT {int(limit)}",
        p.values,
    )
    return [row[0] for row in rows]


async def collect_txn(conn: Conn, sha256: str, cutoff: int) -> BlobRow | None:
    """media.md §12 item 2: delete the blob (metadata, uploaders, references of dead events,
    chunks) when it is still collectable at this moment; the deleted row, else None."""
    p = Params(conn.dialect)
    locked = await conn.fetch(
        f"SELECT {', '.join(BLOB_COLUMNS)} FROM media_blobs WHERE sha256 = {p.add(sha256)}{_lock(conn, 'UPDATE')}",
        p.values,
    )
    if not locked:
        return None
    row = _row(locked[0])
    p = Params(conn.dialect)
    still = await conn.fetch(
        f"SELECT 1 FROM media_blobs b WHERE b.sha256 = {p.add(sha256)} AND b.last_upload_at < {p.add(cutoff)}"
        f" AND NOT {LIVE_REF}",
        p.values,
    )
    if not still:
        return None
    for sql in (
        "DELETE FROM media_refs WHERE sha256 = {0}",
        "DELETE FROM media_uploaders WHERE sha256 = {0}",
        "DELETE FROM media_chunks WHERE key = {0} OR key = {0} || '.thumb.jpg'",
        "DELETE FROM media_blobs WHERE sha256 = {0}",
    ):
        p = Params(conn.dialect)
        await conn.execute(sql.format(p.add(sha256)), p.values)
    return row


async def known_txn(conn: Conn, hashes: list[str]) -> frozenset[str]:
    if not hashes:
        return frozenset()
    p = Params(conn.dialect)
    rows = await conn.fetch(
        f"SELECT sha256 FROM media_blobs WHERE {p.in_list('sha256', hashes, 'text')}", p.values
    )
    return frozenset(row[0] for row in rows)


class MediaStoreMixin:
    """The media methods of `SqlStore` (the backends' `_write` / `_read` / `_point_read`)."""

    _write: Any
    _read: Any
    _point_read: Any

    async def media_blob(self, sha256: str) -> BlobRow | None:
        """The blob's metadata row, or None."""
        return await self._point_read(blob_txn, sha256)

    async def media_put(
        self,
        row: BlobRow,
        pubkey: str,
        now: int,
        chunk_files: Iterable[tuple[str, str]] = (),
        chunk_bytes: int = 1 << 20,
    ) -> tuple[BlobRow, int]:
        """Store a verified upload (media.md §4.1 item 11): see `put_blob_txn`."""
        return await self._write(put_blob_txn, row, pubkey, now, tuple(chunk_files), chunk_bytes)

    async def media_uploaded_at(self, sha256: str, pubkey: str) -> int | None:
        """When `pubkey` became an uploader of the blob, or None when it is not one."""
        return await self._point_read(uploaded_at_txn, sha256, pubkey)

    async def media_usage(self, pubkey: str | None) -> int:
        """Bytes held by `pubkey` (media.md §11 item 1), or by everyone when None (item 2)."""
        return await self._read(usage_txn, pubkey)

    async def media_readable_refs(self, sha256: str, reader: Reader, limit: int) -> list[StoredEvent]:
        """At most `limit` live referencing events in channels `reader` may read (or global)."""
        return await self._read(readable_refs_txn, sha256, reader, limit)

    async def media_chunks(self, key: str, first: int, last: int) -> list[bytes]:
        return await self._read(chunks_txn, key, first, last)

    async def media_collectable(self, cutoff: int, limit: int = 1000) -> list[str]:
        return await self._read(collectable_txn, cutoff, limit)

    async def media_collect(self, sha256: str, cutoff: int) -> BlobRow | None:
        """Delete one collectable blob in one transaction; its row when deleted, else None."""
        return await self._write(collect_txn, sha256, cutoff)

    async def media_known(self, hashes: Iterable[str]) -> frozenset[str]:
        """Which of `hashes` have a metadata row (the orphan-file scan, media.md §10.2 item 3)."""
        return await self._read(known_txn, sorted(set(hashes)))
