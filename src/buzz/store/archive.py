"""The backup archive of a relay's data directory: one versioned, self-describing file.

Format `buzz-backup`, version 1: a gzip-compressed tar (POSIX pax) whose first member is
`manifest.json`, followed by the files of the data directory under `data/`, each at its path
relative to the data directory:

    manifest.json          {"format": "buzz-backup", "version": 1, "created_at": <unix s>,
                            "buzz_version": "...", "backend": "sqlite" | "postgresql",
                            "relay_pubkey": <64 hex> | null, "counts": {...} | null,
                            "pg_dump_file": <file name> | null,
                            "files": [{"path", "bytes", "sha256", "mode"}, ...]}
    data/relay.sqlite3     SQLite only: a consistent snapshot (store/backup.py)
    data/relay.key         the relay's secret key, mode 0600, when the data dir holds one

Every file is listed in the manifest with its size, SHA-256 and mode, and restore refuses an
archive whose members do not match it exactly. New kinds of files under the data directory
(content-addressed blobs as `data/blobs/<sha256>`, say) are more entries of `files`: a reader
restores each to the same place, so they need no new version. `version` changes only when an
existing member changes meaning; a reader refuses a version above its own.

This module knows the container only; what the files must contain (a key that matches
`relay_pubkey`, a database whose counts match `counts`) is checked by the caller.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import io
import os
import tarfile
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO

import orjson

FORMAT = "buzz-backup"
VERSION = 1
MANIFEST = "manifest.json"
DATA_PREFIX = "data/"
MAX_MANIFEST_BYTES = 1 << 20
BACKENDS = ("sqlite", "postgresql")
_CHUNK = 1 << 20


class ArchiveError(ValueError):
    """Not a buzz backup, one this version cannot read, or one that fails its own checks."""


@dataclass(frozen=True, slots=True)
class Member:
    """One file of the data directory: `path` relative to it (POSIX), its size, SHA-256, mode."""

    path: str
    bytes: int
    sha256: str
    mode: int = 0o600


@dataclass(frozen=True, slots=True)
class Manifest:
    backend: str
    created_at: int
    buzz_version: str
    relay_pubkey: str | None = None
    counts: Mapping[str, int] | None = None
    pg_dump_file: str | None = None
    files: tuple[Member, ...] = ()
    version: int = VERSION
    format: str = FORMAT

    def to_json(self) -> bytes:
        body = dataclasses.asdict(self)
        body["files"] = [dataclasses.asdict(m) for m in self.files]
        return orjson.dumps(body, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)

    def member(self, path: str) -> Member | None:
        return next((m for m in self.files if m.path == path), None)


@dataclass(frozen=True, slots=True)
class Source:
    """A file to archive: `path` is where it goes under the data dir, `source` where it is now."""

    path: str
    source: Path
    mode: int = 0o600


def write_archive(dest: Path, manifest: Manifest, sources: Sequence[Source]) -> Manifest:
    """Write the archive `dest` (a new file, mode 0600: it may hold the relay's secret key) with
    `manifest` completed by `sources`' sizes and hashes; returns that manifest. A partial `dest`
    is removed on failure. Raises FileExistsError when `dest` exists, OSError on a write error."""
    members = tuple(Member(s.path, *_digest(s.source), s.mode) for s in sources)
    for m in members:
        _check_path(m.path)
    full = dataclasses.replace(manifest, files=members)
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as raw:
            with tarfile.open(fileobj=raw, mode="w:gz", compresslevel=6, format=tarfile.PAX_FORMAT) as tar:
                body = full.to_json()
                tar.addfile(_info(MANIFEST, len(body), 0o600, full.created_at), io.BytesIO(body))
                for src, m in zip(sources, members, strict=True):
                    with open(src.source, "rb") as fh:
                        tar.addfile(_info(DATA_PREFIX + m.path, m.bytes, m.mode, full.created_at), fh)
            raw.flush()
            os.fsync(raw.fileno())
    except BaseException:
        dest.unlink(missing_ok=True)
        raise
    return full


def read_archive(archive: Path, staging: Path) -> Manifest:
    """Check `archive` against its manifest and extract its data files into the existing, empty
    directory `staging` (with their modes); returns the manifest. Raises ArchiveError for
    anything that is not an intact archive this version can read, OSError when `archive`
    cannot be read or `staging` written."""
    try:
        with tarfile.open(archive, mode="r:*") as tar:
            return _read(tar, staging)
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise ArchiveError(f"{archive} is not a readable buzz backup archive ({exc})") from None


def _read(tar: tarfile.TarFile, staging: Path) -> Manifest:
    first = tar.next()
    if first is None or first.name != MANIFEST or not first.isreg():
        raise ArchiveError(f"not a buzz backup archive: its first member is not {MANIFEST}")
    if first.size > MAX_MANIFEST_BYTES:
        raise ArchiveError(f"{MANIFEST} is {first.size} bytes (max {MAX_MANIFEST_BYTES})")
    manifest = parse_manifest(_read_member(tar, first))
    expected = {m.path: m for m in manifest.files}
    seen: set[str] = set()
    while (info := tar.next()) is not None:
        name = info.name
        if not name.startswith(DATA_PREFIX) or not info.isreg():
            raise ArchiveError(f"unexpected archive member {name!r} (only files under {DATA_PREFIX})")
        path = name.removeprefix(DATA_PREFIX)
        member = expected.get(path)
        if member is None or path in seen:
            raise ArchiveError(f"archive member {name!r} is not in the manifest (or appears twice)")
        seen.add(path)
        if info.size != member.bytes:
            raise ArchiveError(f"{path}: {info.size} bytes in the archive, the manifest says {member.bytes}")
        _extract(tar, info, member, staging)
    missing = sorted(set(expected) - seen)
    if missing:
        raise ArchiveError(
            f"the archive lacks {', '.join(missing)}, which its manifest lists: it is truncated"
        )
    return manifest


def parse_manifest(raw: bytes) -> Manifest:
    """The manifest of `raw` (JSON), checked field by field. Raises ArchiveError."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise ArchiveError(f"{MANIFEST} is not JSON") from None
    if not isinstance(body, dict) or body.get("format") != FORMAT:
        raise ArchiveError(f"not a buzz backup archive ({MANIFEST} does not say format {FORMAT!r})")
    version = body.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ArchiveError(f"{MANIFEST}: version must be a positive integer")
    if version > VERSION:
        raise ArchiveError(
            f"this archive is format version {version}, made by a newer buzz; this buzz reads up to "
            f"version {VERSION}: upgrade buzz to restore it"
        )
    try:
        manifest = Manifest(
            backend=_choice(body, "backend", BACKENDS),
            created_at=_int(body.get("created_at"), "created_at"),
            buzz_version=str(body.get("buzz_version", "")),
            relay_pubkey=_hex64_or_none(body.get("relay_pubkey")),
            counts=_counts(body.get("counts")),
            pg_dump_file=_str_or_none(body.get("pg_dump_file"), "pg_dump_file"),
            files=tuple(_member(m) for m in _list(body.get("files"), "files")),
            version=version,
        )
    except (TypeError, KeyError) as exc:
        raise ArchiveError(f"{MANIFEST}: {exc}") from None
    if len({m.path for m in manifest.files}) != len(manifest.files):
        raise ArchiveError(f"{MANIFEST} lists a file twice")
    return manifest


# -- helpers ---------------------------------------------------------------------------------
def _digest(path: Path) -> tuple[int, str]:
    h, size = hashlib.sha256(), 0
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
            size += len(chunk)
    return size, h.hexdigest()


def _info(name: str, size: int, mode: int, mtime: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = size, mode, mtime
    return info


def _read_member(tar: tarfile.TarFile, info: tarfile.TarInfo) -> bytes:
    fh = tar.extractfile(info)
    assert fh is not None  # a regular file
    return fh.read()


def _extract(tar: tarfile.TarFile, info: tarfile.TarInfo, member: Member, staging: Path) -> None:
    out = staging.joinpath(*PurePosixPath(member.path).parts)
    out.parent.mkdir(parents=True, exist_ok=True)
    fh = tar.extractfile(info)
    assert fh is not None
    h = hashlib.sha256()
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, member.mode & 0o777)
    with os.fdopen(fd, "wb") as dst:
        _copy(fh, dst, h)
        dst.flush()
        os.fsync(dst.fileno())
    if h.hexdigest() != member.sha256:
        raise ArchiveError(f"{member.path}: its SHA-256 differs from the manifest's: the archive is damaged")


def _copy(src: BinaryIO, dst: BinaryIO, h: Any) -> None:
    while chunk := src.read(_CHUNK):
        h.update(chunk)
        dst.write(chunk)


def _check_path(path: str) -> None:
    parts = PurePosixPath(path).parts
    if not parts or path.startswith("/") or any(p in ("", ".", "..") for p in parts) or "\\" in path:
        raise ArchiveError(f"unsafe path {path!r} in the archive (must stay inside the data directory)")
    if str(PurePosixPath(*parts)) != path:
        raise ArchiveError(f"path {path!r} in the archive is not in normal form")


def _member(raw: Any) -> Member:
    if not isinstance(raw, dict):
        raise ArchiveError(f"{MANIFEST}: every entry of files must be an object")
    path = raw.get("path")
    if not isinstance(path, str):
        raise ArchiveError(f"{MANIFEST}: a file without a path")
    _check_path(path)
    sha = raw.get("sha256")
    if not (isinstance(sha, str) and len(sha) == 64 and all(c in "0123456789abcdef" for c in sha)):
        raise ArchiveError(f"{MANIFEST}: {path}: sha256 must be 64 lowercase hex")
    mode = _int(raw.get("mode", 0o600), f"{path} mode")
    return Member(path, _int(raw.get("bytes"), f"{path} bytes"), sha, mode & 0o777)


def _int(value: Any, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ArchiveError(f"{MANIFEST}: {what} must be a non-negative integer")
    return value


def _list(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise ArchiveError(f"{MANIFEST}: {what} must be a list")
    return value


def _choice(body: dict[str, Any], name: str, allowed: Sequence[str]) -> str:
    value = body.get(name)
    if value not in allowed:
        raise ArchiveError(f"{MANIFEST}: {name} must be one of {', '.join(allowed)}")
    return str(value)


def _str_or_none(value: Any, what: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or "/" in value or value in ("", ".", ".."):
        raise ArchiveError(f"{MANIFEST}: {what} must be a file name")
    return value


def _hex64_or_none(value: Any) -> str | None:
    if value is None:
        return None
    if not (isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)):
        raise ArchiveError(f"{MANIFEST}: relay_pubkey must be 64 lowercase hex or null")
    return value


def _counts(value: Any) -> dict[str, int] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ArchiveError(f"{MANIFEST}: counts must be an object")
    return {str(k): _int(v, f"counts.{k}") for k, v in value.items()}
