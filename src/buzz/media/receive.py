"""An upload body streamed to a temporary file while it is hashed (media.md §4.1 items 6–7),
and the facts the sniffer reads from that file (§5).

At most UPLOAD_BUFFER_BYTES of a body are held at once: they are written and hashed in a worker
thread (hashlib releases the GIL) while the next bytes arrive. More bytes than declared raise
`BodyTooLong`, fewer `BodyIncomplete`, a hash other than the declared one `HashMismatch`; on
any failure the temporary file is removed before the exception leaves.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import hashlib
import os
import tempfile
import zipfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import orjson

from buzz.media.limits import JSON_SNIFF_MAX_BYTES, SNIFF_HEAD_BYTES, SNIFF_TAIL_BYTES, UPLOAD_BUFFER_BYTES
from buzz.media.sniff import Facts, is_zip


class BodyTooLong(Exception):
    """More bytes than Content-Length (413)."""


class BodyIncomplete(Exception):
    """Fewer bytes than Content-Length: the client stopped or the connection broke (400)."""


class HashMismatch(Exception):
    """The body does not hash to X-SHA-256 (400)."""


@dataclass(frozen=True, slots=True)
class Received:
    """A complete, verified body in `path` (a temporary file the caller owns)."""

    path: Path
    sha256: str
    size: int


def _write(fh: object, digest: hashlib._Hash, data: bytes) -> None:
    fh.write(data)  # type: ignore[attr-defined]
    digest.update(data)


async def receive(
    chunks: AsyncIterator[bytes],
    length: int,
    sha256: str,
    tmp_dir: Path,
    buffer_bytes: int = UPLOAD_BUFFER_BYTES,
) -> Received:
    """Write `length` bytes from `chunks` to a new file in `tmp_dir`, checking their SHA-256.

    Raises BodyTooLong, BodyIncomplete, HashMismatch (the file removed), or what `chunks` raises
    (a broken connection: the file is removed too)."""
    tmp_dir.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix="upload-", dir=tmp_dir)
    path = Path(name)
    digest = hashlib.sha256()
    size = 0
    pending: list[bytes] = []
    held = 0
    try:
        with os.fdopen(fd, "wb") as fh:
            async for chunk in chunks:
                size += len(chunk)
                if size > length:
                    raise BodyTooLong()
                pending.append(chunk)
                held += len(chunk)
                if held >= buffer_bytes:
                    data, pending, held = b"".join(pending), [], 0
                    await asyncio.to_thread(_write, fh, digest, data)
            if pending:
                await asyncio.to_thread(_write, fh, digest, b"".join(pending))
            if size < length:
                raise BodyIncomplete()
            await asyncio.to_thread(fh.flush)
        if digest.hexdigest() != sha256:
            raise HashMismatch()
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    return Received(path, sha256, size)


def _utf8_text(path: Path) -> bool:
    """The whole file is valid UTF-8 without NUL (read in 1 MiB pieces; stops at the first fault)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    with path.open("rb") as fh:
        while piece := fh.read(UPLOAD_BUFFER_BYTES):
            if b"\0" in piece:
                return False
            try:
                decoder.decode(piece)
            except UnicodeDecodeError:
                return False
    try:
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return True


def facts(path: Path, declared: str | None) -> Facts:
    """What `sniff.sniff` needs from the file at `path` (blocking: run it in a thread)."""
    size = path.stat().st_size
    with path.open("rb") as fh:
        head = fh.read(SNIFF_HEAD_BYTES)
        fh.seek(max(size - SNIFF_TAIL_BYTES, 0))
        tail = fh.read(SNIFF_TAIL_BYTES)
    names: tuple[str, ...] | None = None
    if is_zip(head):
        with contextlib.suppress(zipfile.BadZipFile, OSError, ValueError), zipfile.ZipFile(path) as archive:
            names = tuple(archive.namelist())
    utf8 = b"\0" not in head and _utf8_text(path)
    json_ok = None
    if utf8 and declared == "application/json" and size <= JSON_SNIFF_MAX_BYTES:
        try:
            orjson.loads(path.read_bytes())
            json_ok = True
        except orjson.JSONDecodeError:
            json_ok = False
    return Facts(head, tail, size, names, utf8, json_ok)
