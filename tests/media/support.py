"""Helpers of the media tests: real HTTP against a real relay, files made with Pillow."""

from __future__ import annotations

import hashlib
import io
import os
import time
from dataclasses import dataclass
from typing import Any

import aiohttp
from PIL import Image

from buzz.core.blossom import auth_event, authorization_header, encode_token
from buzz.core.event import Event
from buzz.core.imeta import imeta_tag
from tests.support.relay import Identity


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def png(width: int = 64, height: int = 48, color: tuple[int, int, int] = (200, 30, 30)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), color).save(out, "PNG")
    return out.getvalue()


def jpeg(width: int = 64, height: int = 48, orientation: int | None = None, quality: int = 85) -> bytes:
    im = Image.new("RGB", (width, height), (20, 120, 220))
    out = io.BytesIO()
    if orientation is None:
        im.save(out, "JPEG", quality=quality)
    else:
        exif = Image.Exif()
        exif[0x0112] = orientation
        im.save(out, "JPEG", quality=quality, exif=exif)
    return out.getvalue()


def unique_png(tag: str = "") -> bytes:
    """A small PNG whose bytes differ per call (a random color row)."""
    seed = os.urandom(3)
    return png(32, 24, (seed[0], seed[1], seed[2])) + tag.encode()[:0]


def auth(
    who: Identity,
    verb: str,
    *hashes: str,
    expires_in: int = 300,
    created_at: int | None = None,
    server: str | None = None,
    content: str | None = None,
) -> Event:
    now = int(time.time())
    return auth_event(
        who.secret,
        verb,
        expiration=now + expires_in,
        hashes=hashes,
        server=server,
        content=content,
        created_at=created_at,
    )


def header(event: Event) -> dict[str, str]:
    return {"Authorization": authorization_header(event)}


def token(event: Event) -> str:
    return encode_token(event)


@dataclass
class Answer:
    status: int
    headers: Any
    body: bytes

    @property
    def reason(self) -> str | None:
        return self.headers.get("X-Reason")

    def json(self) -> Any:
        import orjson

        return orjson.loads(self.body)


async def put(
    base: str,
    who: Identity | None,
    data: bytes,
    *,
    declared: str | None = None,
    sha256: str | None = None,
    event: Event | None = None,
    path: str = "/upload",
    extra: dict[str, str] | None = None,
) -> Answer:
    digest = sha(data) if sha256 is None else sha256
    headers = {"X-SHA-256": digest}
    if who is not None or event is not None:
        headers.update(header(event or auth(who, "upload", digest)))  # type: ignore[arg-type]
    if declared:
        headers["Content-Type"] = declared
    headers.update(extra or {})
    async with aiohttp.ClientSession() as s, s.put(base + path, data=data, headers=headers) as r:
        return Answer(r.status, r.headers, await r.read())


async def upload(base: str, who: Identity, data: bytes, declared: str | None = None) -> dict[str, Any]:
    answer = await put(base, who, data, declared=declared)
    assert answer.status == 200, (answer.status, answer.reason)
    return answer.json()  # type: ignore[no-any-return]


async def get(
    base: str,
    who: Identity | None,
    name: str,
    *,
    event: Event | None = None,
    method: str = "GET",
    extra: dict[str, str] | None = None,
    query: bool = False,
) -> Answer:
    headers = dict(extra or {})
    url = f"{base}/media/{name}"
    if who is not None or event is not None:
        ev = event or auth(who, "get", name[:64])  # type: ignore[arg-type]
        if query:
            url += f"?auth={token(ev)}"
        else:
            headers.update(header(ev))
    async with aiohttp.ClientSession() as s, s.request(method, url, headers=headers) as r:
        return Answer(r.status, r.headers, await r.read())


def imeta_of(descriptor: dict[str, Any], **extra: str) -> list[str]:
    fields = {
        "url": descriptor["url"],
        "m": descriptor["type"],
        "x": descriptor["sha256"],
        "size": descriptor["size"],
        "dim": descriptor.get("dim"),
        "blurhash": descriptor.get("blurhash"),
        "thumb": descriptor.get("thumb"),
        **extra,
    }
    return imeta_tag(fields)
