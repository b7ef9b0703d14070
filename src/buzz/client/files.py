"""Files on the relay (media.md §13, §14): upload with a kind 24242 authorization, download by
URL or hash (the bytes checked against it), and the `imeta` tag that attaches an upload to a
message.

Transport: the relay's Blossom routes on its HTTP port (`PUT /upload`, `GET /media/<sha256>`),
one aiohttp session per `Files`, with `X-Auth-Tag` for an agent. Uploads stream the file from
disk (never held whole); downloads are written to a temporary file beside the destination
while hashed, and renamed into place only when the hash is right.

HTTP answers map to the API's errors as media.md §13 orders for the CLI's exit codes:

| answer | error |
|---|---|
| 401, 403 | `AuthError` (exit 3) |
| 404 | `NotFound` (exit 1) |
| 413, 415, 400 | `UserError` (exit 1) |
| 429, 503, no answer | `RelayUnavailable` retryable / `NetworkError` (exit 2) |
| anything else (507 …), bytes that do not hash to the URL | `Refused` (exit 4) |
"""

from __future__ import annotations

import contextlib
import hashlib
import mimetypes
import os
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from buzz.client.errors import (
    AuthError,
    NetworkError,
    NotFound,
    Refused,
    RelayUnavailable,
    UserError,
    WorkspaceError,
)
from buzz.client.identity import Identity
from buzz.core.blossom import (
    BlobName,
    auth_event,
    authorization_header,
    blob_url,
    is_sha256,
    media_base,
    parse_blob_url,
)
from buzz.core.imeta import imeta_tag, valid_name
from buzz.core.nip98 import http_base

MAX_FILES_PER_MESSAGE = 10  # media.md §17
CLI_UPLOAD_AUTH_TTL_S = 300
GET_AUTH_TTL_S = 300
READ_CHUNK = 1 << 20
_USER_STATUSES = frozenset({400, 411, 413, 415})
_RETRY_STATUSES = frozenset({429, 502, 503, 504})


@dataclass(frozen=True, slots=True)
class Fetched:
    """A downloaded blob: where it was written (None for stdout), its hash, size and type."""

    path: str | None
    sha256: str
    size: int
    type: str


def http_error(status: int, reason: str | None) -> WorkspaceError:
    """The API error for a refused media request (the module's table)."""
    text = reason or f"HTTP {status}"
    said = {"relay_message": reason, "verdict": False}  # an X-Reason, not a NIP-01 verdict
    if status in (401, 403):
        return AuthError(text, **said)
    if status == 404:
        return NotFound(text, **said)
    if status in _USER_STATUSES:
        return UserError(text, **said)
    if status in _RETRY_STATUSES:
        return RelayUnavailable(text, retryable=True, **said)
    return Refused(text, **said)


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while piece := fh.read(READ_CHUNK):
            digest.update(piece)
    return digest.hexdigest()


def attachment_tag(
    descriptor: Mapping[str, Any], name: str | None = None, alt: str | None = None
) -> list[str]:
    """The imeta tag of an uploaded blob (media.md §9.1, §13): url, m, x, size, dim, blurhash,
    thumb from the descriptor, and the original file `name`."""
    fields: dict[str, object] = {
        "url": descriptor["url"],
        "m": descriptor["type"],
        "x": descriptor["sha256"],
        "size": descriptor["size"],
        "dim": descriptor.get("dim"),
        "blurhash": descriptor.get("blurhash"),
        "thumb": descriptor.get("thumb"),
        "alt": alt,
        "name": name if name and valid_name(name) else None,
    }
    return imeta_tag(fields)


class Files:
    """Blob upload and download for one identity on one relay (ws/wss/http/https URL)."""

    def __init__(self, relay_url: str, identity: Identity, *, connect_timeout: float = 10.0) -> None:
        self.base = http_base(relay_url)
        self.media_base = media_base(self.base)
        self.identity = identity
        self._timeout = aiohttp.ClientTimeout(total=None, sock_connect=connect_timeout, sock_read=120)
        self._session: aiohttp.ClientSession | None = None

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        return self._session

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    def _headers(self, verb: str, sha256: str) -> dict[str, str]:
        ttl = CLI_UPLOAD_AUTH_TTL_S if verb == "upload" else GET_AUTH_TTL_S
        event = auth_event(self.identity.secret, verb, expiration=int(time.time()) + ttl, hashes=[sha256])
        headers = {"Authorization": authorization_header(event)}
        if self.identity.auth_tag:
            headers["X-Auth-Tag"] = orjson.dumps(list(self.identity.auth_tag)).decode()
        return headers

    # -- upload ----------------------------------------------------------------------------
    async def upload(self, path: str | Path) -> dict[str, Any]:
        """`PUT /upload` of the file at `path` (streamed from disk); the blob descriptor
        (media.md §4.3). Raises UserError (no such file, refused type or size), AuthError,
        RelayUnavailable / NetworkError, Refused."""
        file = Path(path)
        if not file.is_file():
            raise UserError(f"no such file: {path}")
        sha256 = file_sha256(file)
        size = file.stat().st_size
        declared = mimetypes.guess_type(file.name)[0] or "application/octet-stream"
        headers = {**self._headers("upload", sha256), "X-SHA-256": sha256, "Content-Type": declared}
        headers["Content-Length"] = str(size)
        try:
            with file.open("rb") as fh:
                # Expect: 100-continue: a refusal (quota, size, type) arrives before the body is sent
                put = self._http().put(self.base + "/upload", data=fh, headers=headers, expect100=True)
                async with put as resp:
                    raw = await resp.read()
                    status, reason = resp.status, resp.headers.get("X-Reason")
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise NetworkError(f"cannot upload to {self.base}: {exc or type(exc).__name__}") from None
        if status != 200:
            raise http_error(status, reason or _error_text(raw))
        try:
            descriptor = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise WorkspaceError("the relay answered an upload with something other than JSON") from None
        if not isinstance(descriptor, dict) or descriptor.get("sha256") != sha256:
            raise WorkspaceError("the relay answered an upload with an unexpected descriptor")
        return descriptor

    async def upload_many(self, paths: Sequence[str | Path]) -> list[tuple[str, dict[str, Any]]]:
        """Upload 1–10 files in order; (file name, descriptor) each. Raises UserError for more
        than MAX_FILES_PER_MESSAGE and whatever `upload` raises for the first failure."""
        if len(paths) > MAX_FILES_PER_MESSAGE:
            raise UserError(f"too many files: {len(paths)} (max {MAX_FILES_PER_MESSAGE})")
        for path in paths:
            if not Path(path).is_file():
                raise UserError(f"no such file: {path}")
        return [(Path(p).name, await self.upload(p)) for p in paths]

    # -- download --------------------------------------------------------------------------
    def blob_of(self, url: str | None, sha256: str | None) -> BlobName:
        """The blob a `--url` or `--sha256` names. Raises UserError."""
        if (url is None) == (sha256 is None):
            raise UserError("give exactly one of --url and --sha256")
        if sha256 is not None:
            if not is_sha256(sha256.strip().lower()):
                raise UserError(f"invalid --sha256 {sha256!r}: expected 64 hex characters")
            return BlobName(sha256.strip().lower(), None)
        name = parse_blob_url(url or "")
        if name is None or name.thumb:
            raise UserError(f"invalid --url {url!r}: expected …/<sha256>[.<ext>]")
        return name

    async def stream(self, blob: BlobName) -> AsyncIterator[tuple[str, bytes]]:
        """`GET /media/<sha256>` from this relay (the hash names the blob wherever the URL
        pointed), yielding (content type, piece). Raises per the module's table."""
        url = blob_url(self.media_base, blob.sha256, None)
        try:
            async with self._http().get(url, headers=self._headers("get", blob.sha256)) as resp:
                if resp.status != 200:
                    raise http_error(
                        resp.status, resp.headers.get("X-Reason") or _error_text(await resp.read())
                    )
                mime = resp.headers.get("Content-Type", "application/octet-stream").split(";", 1)[0]
                async for piece in resp.content.iter_chunked(READ_CHUNK):
                    yield mime, piece
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise NetworkError(f"cannot download from {self.base}: {exc or type(exc).__name__}") from None

    async def get(
        self, url: str | None = None, sha256: str | None = None, output: str | None = None
    ) -> Fetched:
        """Download a blob to `output` (a file path; default `./<sha256>.<ext>`; `-` = stdout)
        and check its hash. Raises UserError, NotFound, AuthError, NetworkError, and Refused
        when the bytes do not hash to the blob's name (nothing is left behind then)."""
        blob = self.blob_of(url, sha256)
        if output == "-":
            digest, size, mime = hashlib.sha256(), 0, "application/octet-stream"
            sink = sys.stdout.buffer
            async for served, piece in self.stream(blob):
                mime = served
                digest.update(piece)
                size += len(piece)
                sink.write(piece)
            sink.flush()
            self._check(blob, digest.hexdigest())
            return Fetched(None, blob.sha256, size, mime)
        dest = Path(output) if output else None
        folder = (dest.parent if dest is not None else Path.cwd()).resolve()
        return await self.download(blob, folder, dest.name if dest is not None else None)

    async def download(
        self, blob: BlobName, folder: Path, name: str | None = None, max_bytes: int | None = None
    ) -> Fetched:
        """Download `blob` into `folder` as `name` (default `<sha256>.<ext>`), through a temporary
        file renamed into place once the hash is right. Raises UserError (no such folder; more
        than `max_bytes`), and what `get` raises."""
        if not folder.is_dir():
            raise UserError(f"cannot write to {folder}: no such directory")
        digest, size, mime = hashlib.sha256(), 0, "application/octet-stream"
        fd, tmp_name = tempfile.mkstemp(prefix=".buzz-download-", dir=folder)
        tmp = Path(tmp_name)
        try:
            with os.fdopen(fd, "wb") as fh:
                async for served, piece in self.stream(blob):
                    mime = served
                    size += len(piece)
                    if max_bytes is not None and size > max_bytes:
                        raise UserError(f"larger than {max_bytes} bytes")
                    digest.update(piece)
                    fh.write(piece)
            self._check(blob, digest.hexdigest())
            final = folder / (name or f"{blob.sha256}.{_ext_for(mime, blob)}")
            os.replace(tmp, final)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            raise
        return Fetched(str(final.resolve()), blob.sha256, size, mime)

    @staticmethod
    def _check(blob: BlobName, got: str) -> None:
        if got != blob.sha256:
            raise Refused(f"downloaded bytes hash to {got}, not {blob.sha256}")


def _ext_for(mime: str, blob: BlobName) -> str:
    if blob.ext:
        return blob.ext
    guessed = mimetypes.guess_extension(mime) or ".bin"
    return {".jpe": "jpg", ".jpeg": "jpg"}.get(guessed, guessed.lstrip("."))


def _error_text(raw: bytes) -> str | None:
    with contextlib.suppress(orjson.JSONDecodeError):
        body = orjson.loads(raw)
        if isinstance(body, dict) and isinstance(body.get("error"), str):
            return str(body["error"])
    return None
