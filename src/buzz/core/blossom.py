"""Blossom wire format shared by the relay and its clients (media.md §2, §3.1, §4.3), pure.

The kind 24242 authorization event (BUD-01/BUD-11): built by clients with `auth_event`, carried
as `Authorization: Nostr <token>` or `?auth=<token>` (`encode_token` / `decode_token`); the
relay's checks of it are `buzz.media.auth`. Blob URLs are `<base>/<sha256>[.<ext>]` with
`<base>` ending in `/media` (`blob_url`, `thumb_url`, `parse_blob_url`).

Kind 24242 is HTTP-only: it is not in the kind registry (`core/kinds.py`), so an EVENT of that
kind is refused `restricted: unknown event kind` (media.md §2 item 4).
"""

from __future__ import annotations

import base64
import binascii
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import orjson

from buzz.core.event import Event

KIND_BLOSSOM_AUTH = 24242
AUTH_TOKEN_MAX_BYTES = 16_384  # decoded authorization (media.md §17)
SCHEME = "Nostr"
VERBS = ("upload", "get")
MEDIA_PATH = "/media"
UPLOAD_PATH = "/upload"
THUMB_SUFFIX = ".thumb.jpg"
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_NAME = re.compile(r"^([0-9a-f]{64})(?:\.([A-Za-z0-9]{1,16}(?:\.[A-Za-z0-9]{1,16})?))?$")


def is_sha256(value: object) -> bool:
    """64 lowercase hex characters (media.md §4.1 item 1)."""
    return isinstance(value, str) and _SHA256.match(value) is not None


def encode_token(event: Event) -> str:
    """URL-safe base64 of the event's JSON without padding: valid in a header and a query."""
    return base64.urlsafe_b64encode(event.to_json().encode()).decode().rstrip("=")


def decode_token(token: str) -> Any:
    """The JSON value a token carries (standard or URL-safe base64, padding optional).

    Raises ValueError when it is not base64, longer than AUTH_TOKEN_MAX_BYTES decoded, or not JSON.
    """
    text = token.strip()
    if len(text) > (AUTH_TOKEN_MAX_BYTES * 4) // 3 + 4:
        raise ValueError("authorization too long")
    text = text.replace("-", "+").replace("_", "/")
    text += "=" * (-len(text) % 4)
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("authorization is not base64") from None
    if len(raw) > AUTH_TOKEN_MAX_BYTES:
        raise ValueError("authorization too long")
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise ValueError("authorization is not JSON") from None


def auth_event(
    secret_key: str,
    verb: str,
    *,
    expiration: int,
    hashes: Iterable[str] = (),
    server: str | None = None,
    content: str | None = None,
    created_at: int | None = None,
) -> Event:
    """A signed kind 24242 for `verb` (`upload` or `get`) valid until `expiration` (unix
    seconds), scoped to `hashes` (`x` tags) and/or a host (`server` tag). An upload
    authorization carries a random `nonce` tag, so each one signed is a new event."""
    if verb not in VERBS:
        raise ValueError(f"unknown Blossom verb {verb!r}")
    tags: list[list[str]] = [["t", verb], ["expiration", str(expiration)]]
    tags += [["x", h] for h in hashes]
    if server is not None:
        tags.append(["server", server])
    if verb == "upload":  # the relay accepts an upload authorization once (decision 190): two
        tags.append(["nonce", secrets.token_hex(8)])  # signed in one second must still differ
    text = content if content is not None else f"{verb.capitalize()} blob"
    return Event.create(secret_key, KIND_BLOSSOM_AUTH, text, tags, created_at)


def authorization_header(event: Event) -> str:
    return f"{SCHEME} {encode_token(event)}"


def media_base(http_origin: str) -> str:
    """`<origin>/media` for an HTTP origin without a trailing slash."""
    return http_origin.rstrip("/") + MEDIA_PATH


def blob_url(base: str, sha256: str, ext: str | None) -> str:
    return f"{base}/{sha256}.{ext}" if ext else f"{base}/{sha256}"


def thumb_url(base: str, sha256: str) -> str:
    return f"{base}/{sha256}{THUMB_SUFFIX}"


@dataclass(frozen=True, slots=True)
class BlobName:
    """The last path segment of a media URL: the hash, the extension given (None when bare),
    and whether it names the thumbnail (`<sha256>.thumb.jpg`)."""

    sha256: str
    ext: str | None
    thumb: bool = False


def parse_blob_name(segment: str) -> BlobName | None:
    """`<sha256>`, `<sha256>.<ext>` or `<sha256>.thumb.jpg`; None for anything else."""
    m = _NAME.match(segment)
    if m is None:
        return None
    sha, ext = m.group(1), m.group(2)
    if ext == "thumb.jpg":
        return BlobName(sha, None, thumb=True)
    if ext is not None and "." in ext:
        return None
    return BlobName(sha, ext)


def parse_blob_url(url: str) -> BlobName | None:
    """The blob a `…/<sha256>[.<ext>]` URL names (any host), None when its last path segment
    is not one. Query and fragment are ignored."""
    path = url.split("#", 1)[0].split("?", 1)[0]
    return parse_blob_name(path.rsplit("/", 1)[-1])
