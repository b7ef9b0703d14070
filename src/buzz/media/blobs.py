"""Where blob bytes live (media.md §10.2): files under the data directory, or PostgreSQL rows.

Both stores commit an upload with `commit` (bytes and metadata together, as the spec orders),
read with `read` (only the bytes of the asked range) and forget a collected blob with
`forget` (after the metadata's deletion committed).

`FileBlobs`: `<data>/media/<sha256[0:2]>/<sha256>` and `<sha256>.thumb.jpg`. An upload is
written under `<data>/media/tmp/`, renamed into place, then its metadata commits. A per-blob
lock orders an upload's rename-and-commit against a collection's delete-and-unlink in this
process, so a blob uploaded again while it is being collected keeps its file. `sweep` removes
temporary files older than TMP_MAX_AGE_S and blob files with no metadata row older than the
orphan grace (left by a crash between the two steps).

`DbBlobs`: `media_chunks` rows of DB_CHUNK_BYTES, written in the metadata's transaction.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Protocol
from weakref import WeakValueDictionary

from buzz.core.blossom import THUMB_SUFFIX
from buzz.media.limits import DB_CHUNK_BYTES, MEDIA_ORPHAN_GRACE_S, SERVE_CHUNK_BYTES, TMP_MAX_AGE_S
from buzz.store.base import BlobRow, EventStore


class ByteStore(Protocol):
    kind: str

    @property
    def tmp_dir(self) -> Path: ...

    async def commit(
        self, row: BlobRow, pubkey: str, now: int, body: Path, thumb: bytes | None
    ) -> tuple[BlobRow, int]:
        """Store the body (and thumbnail) of a verified upload and commit its metadata and
        uploader row; returns (stored row, this uploader's uploaded_at). `body` stays the caller's."""
        ...

    def read(self, sha256: str, thumb: bool, start: int, end: int) -> AsyncIterator[bytes]:
        """Bytes `start`..`end` (inclusive) of the blob or its thumbnail."""
        ...

    async def thumb_size(self, sha256: str) -> int | None: ...

    async def collect(self, sha256: str, cutoff: int) -> bool:
        """Delete a collectable blob (metadata and bytes); True when it was deleted."""
        ...

    async def sweep(self, now: int) -> int:
        """Remove leftovers of crashed uploads; returns how many files went."""
        ...


class _KeyedLocks:
    def __init__(self) -> None:
        self._locks: WeakValueDictionary[str, asyncio.Lock] = WeakValueDictionary()

    def __call__(self, key: str) -> asyncio.Lock:
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        return lock


class FileBlobs:
    kind = "files"

    def __init__(self, store: EventStore, root: Path) -> None:
        self._store = store
        self.root = root
        self._locks = _KeyedLocks()

    @property
    def tmp_dir(self) -> Path:
        return self.root / "tmp"

    def path(self, sha256: str, thumb: bool = False) -> Path:
        return self.root / sha256[:2] / (sha256 + (THUMB_SUFFIX if thumb else ""))

    async def commit(
        self, row: BlobRow, pubkey: str, now: int, body: Path, thumb: bytes | None
    ) -> tuple[BlobRow, int]:
        async with self._locks(row.sha256):
            await asyncio.to_thread(self._place, row.sha256, body, thumb)
            return await self._store.media_put(row, pubkey, now)

    def _place(self, sha256: str, body: Path, thumb: bytes | None) -> None:
        final = self.path(sha256)
        final.parent.mkdir(parents=True, exist_ok=True)
        if thumb is not None and not self.path(sha256, True).exists():
            tmp = self.tmp_dir / f"{sha256}.thumb.{os.getpid()}"
            tmp.write_bytes(thumb)
            os.replace(tmp, self.path(sha256, True))
        if not final.exists():
            # a hard link keeps `body` for the caller (who removes it); same bytes either way
            tmp = self.tmp_dir / f"{sha256}.{os.getpid()}.{time.monotonic_ns()}"
            os.link(body, tmp)
            with open(tmp, "rb") as fh:
                os.fsync(fh.fileno())
            os.replace(tmp, final)

    async def read(self, sha256: str, thumb: bool, start: int, end: int) -> AsyncIterator[bytes]:
        fh = await asyncio.to_thread(open, self.path(sha256, thumb), "rb")
        try:
            await asyncio.to_thread(fh.seek, start)
            left = end - start + 1
            while left > 0:
                piece = await asyncio.to_thread(fh.read, min(SERVE_CHUNK_BYTES, left))
                if not piece:
                    raise OSError(f"blob file {sha256} is shorter than its metadata")
                left -= len(piece)
                yield piece
        finally:
            fh.close()

    async def thumb_size(self, sha256: str) -> int | None:
        try:
            return (await asyncio.to_thread(self.path(sha256, True).stat)).st_size
        except FileNotFoundError:
            return None

    async def collect(self, sha256: str, cutoff: int) -> bool:
        async with self._locks(sha256):
            row = await self._store.media_collect(sha256, cutoff)
            if row is None:
                return False
            for thumb in (False, True):
                with contextlib.suppress(FileNotFoundError):
                    await asyncio.to_thread(self.path(sha256, thumb).unlink)
            return True

    async def sweep(self, now: int) -> int:
        found = await asyncio.to_thread(self._scan, now)
        removed = 0
        stale_tmp, blob_files = found
        for path in stale_tmp:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                removed += 1
        known = await self._store.media_known({sha for sha, _ in blob_files})
        for sha, path in blob_files:
            if sha in known:
                continue
            async with self._locks(sha):
                if sha in await self._store.media_known([sha]):
                    continue
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
                    removed += 1
        return removed

    def _scan(self, now: int) -> tuple[list[Path], list[tuple[str, Path]]]:
        stale: list[Path] = []
        blobs: list[tuple[str, Path]] = []
        if self.tmp_dir.is_dir():
            stale = [p for p in self.tmp_dir.iterdir() if p.stat().st_mtime < now - TMP_MAX_AGE_S]
        if not self.root.is_dir():
            return stale, blobs
        for folder in self.root.iterdir():
            if len(folder.name) != 2 or not folder.is_dir():
                continue
            for path in folder.iterdir():
                if path.stat().st_mtime < now - MEDIA_ORPHAN_GRACE_S:
                    blobs.append((path.name[:64], path))
        return stale, blobs


class DbBlobs:
    kind = "db"

    def __init__(self, store: EventStore, tmp_dir: Path) -> None:
        self._store = store
        self._tmp = tmp_dir

    @property
    def tmp_dir(self) -> Path:
        return self._tmp

    async def commit(
        self, row: BlobRow, pubkey: str, now: int, body: Path, thumb: bytes | None
    ) -> tuple[BlobRow, int]:
        files = [(row.sha256, str(body))]
        thumb_path: Path | None = None
        if thumb is not None:
            thumb_path = self._tmp / f"{row.sha256}.thumb.{os.getpid()}.{time.monotonic_ns()}"
            await asyncio.to_thread(thumb_path.write_bytes, thumb)
            files.append((row.sha256 + THUMB_SUFFIX, str(thumb_path)))
        try:
            return await self._store.media_put(row, pubkey, now, files, DB_CHUNK_BYTES)
        finally:
            if thumb_path is not None:
                thumb_path.unlink(missing_ok=True)

    async def read(self, sha256: str, thumb: bool, start: int, end: int) -> AsyncIterator[bytes]:
        key = sha256 + (THUMB_SUFFIX if thumb else "")
        first, last = start // DB_CHUNK_BYTES, end // DB_CHUNK_BYTES
        seq = first
        while seq <= last:
            upto = min(seq + 3, last)  # four chunks per query: 4 MiB held at most
            pieces = await self._store.media_chunks(key, seq, upto)
            if len(pieces) != upto - seq + 1:
                raise OSError(f"blob {key} is missing chunks")
            for i, piece in enumerate(pieces, start=seq):
                lo = start - i * DB_CHUNK_BYTES if i == first else 0
                hi = end - i * DB_CHUNK_BYTES + 1 if i == last else len(piece)
                yield piece[lo:hi]
            seq = upto + 1

    async def thumb_size(self, sha256: str) -> int | None:
        pieces = await self._store.media_chunks(sha256 + THUMB_SUFFIX, 0, 0)
        return len(pieces[0]) if pieces else None  # a thumbnail is far below one chunk

    async def collect(self, sha256: str, cutoff: int) -> bool:
        return await self._store.media_collect(sha256, cutoff) is not None

    async def sweep(self, now: int) -> int:
        removed = 0
        if self._tmp.is_dir():
            for path in list(self._tmp.iterdir()):
                with contextlib.suppress(FileNotFoundError):
                    if path.stat().st_mtime < now - TMP_MAX_AGE_S:
                        path.unlink()
                        removed += 1
        return removed
