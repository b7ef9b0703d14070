"""The Blossom routes (media.md §2): `PUT /upload` (and `/media/upload`), `HEAD /upload`,
`GET`/`HEAD /media/<sha256>[.<ext>]` and `.thumb.jpg`, `OPTIONS` on each. Thin glue over
`buzz.media` (authorization checks, the upload pipeline, access, byte stores).

A bad upload is refused before its body is read (§4.1 items 1–5): with `Expect: 100-continue`
the refusal replaces `100 Continue` (our expect handler), without it the answer is sent and the
connection closed (`force_close`, so aiohttp does not drain the body). Every answer carries the
CORS headers; every refusal `X-Reason` and `{"error": <reason>}`. Query strings of `/media`
requests (`?auth=` is a bearer credential) are never logged: the relay has no access log.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import aiohttp
import orjson
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from buzz.core.blossom import is_sha256, parse_blob_name
from buzz.core.errors import BuzzError, InvalidId, InvalidSignature
from buzz.core.event import Event, verify_event
from buzz.media.auth import AuthFailure, check_claims, normalize_host, parse_authorization, token_of
from buzz.media.limits import AUTH_FUTURE_SKEW_S, UPLOAD_AUTH_WINDOW_S
from buzz.media.ranges import Unsatisfiable, span
from buzz.media.receive import BodyIncomplete, BodyTooLong, HashMismatch, receive
from buzz.media.service import MediaRefusal, Ticket, too_large
from buzz.media.sniff import TYPES, declared_type
from buzz.relay.http.bridge import _header_auth_tag
from buzz.store.base import StoreError

if TYPE_CHECKING:
    from buzz.relay.http.host import HttpHost

CORS_HEADERS = {
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Allow-Headers": (
        "Authorization, X-SHA-256, X-Content-Type, X-Content-Length, X-Auth-Tag, Content-Type, Range"
    ),
    "Access-Control-Allow-Methods": "GET, HEAD, PUT, OPTIONS",
    "Access-Control-Expose-Headers": "Content-Length, Content-Range, Content-Type, ETag, X-Reason",
}
SERVED_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'none'; sandbox",
    "Cache-Control": "private, max-age=31536000, immutable",
    "Referrer-Policy": "no-referrer",
    "Accept-Ranges": "bytes",
}
UPLOAD_REPLAY_TTL_S = UPLOAD_AUTH_WINDOW_S + AUTH_FUTURE_SKEW_S
_TICKET: web.RequestKey[Ticket] = web.RequestKey("media_ticket", Ticket)
NOT_FOUND = "blob not found"


def refusal(
    status: int, reason: str, headers: dict[str, str] | None = None, close: bool = False
) -> web.Response:
    response = web.Response(
        status=status,
        body=orjson.dumps({"error": reason}),
        content_type="application/json",
        headers={**CORS_HEADERS, "X-Reason": reason, **(headers or {})},
    )
    if close:  # a body we will not read: answer, then close (§4.1)
        response.force_close()
    return response


class MediaRoutes:
    def __init__(self, relay: HttpHost) -> None:
        self.relay = relay
        self.media = relay.media
        self._config_host = normalize_host(urlsplit(relay.config.relay_url).netloc)
        self._base_host = normalize_host(urlsplit(relay.config.media_base_url).netloc)

    def add_to(self, app: web.Application) -> None:
        for path in ("/upload", "/media/upload"):
            app.router.add_route("PUT", path, self.put_upload, expect_handler=self.expect_upload)
            app.router.add_route("OPTIONS", path, self.options)
        app.router.add_route("HEAD", "/upload", self.head_upload)
        app.router.add_route("GET", "/media/{name}", self.get_blob)
        app.router.add_route("HEAD", "/media/{name}", self.get_blob)
        app.router.add_route("OPTIONS", "/media/{name}", self.options)

    async def options(self, request: web.Request) -> web.Response:
        return web.Response(status=204, headers=CORS_HEADERS)

    # -- authorization (media.md §3) -----------------------------------------------------------
    def _hosts(self, request: web.Request) -> frozenset[str]:
        return frozenset({self._config_host, self._base_host, normalize_host(request.host)})

    async def _authorize(self, request: web.Request, verb: str, sha256: str | None, query_ok: bool) -> Event:
        """§3.2 items 1–10; the authorization event. Raises MediaRefusal (401 / 403 / 500)."""
        try:
            token = token_of(
                request.headers.get("Authorization"), request.query.get("auth") if query_ok else None
            )
            event = parse_authorization(token)
            loop = asyncio.get_running_loop()
            try:
                await loop.run_in_executor(self.relay.executor, verify_event, event)
            except (InvalidId, InvalidSignature):
                raise AuthFailure("invalid authorization signature") from None
            check_claims(event, verb, int(time.time()), self._hosts(request), sha256)
        except AuthFailure as exc:
            raise MediaRefusal(exc.status, exc.reason) from None
        try:
            await self.relay.admit(event, auth_tag=_header_auth_tag(request))
        except BuzzError as exc:
            raise MediaRefusal(403, str(exc)) from None
        return event

    # -- upload (media.md §4) ------------------------------------------------------------------
    async def _admit(self, request: web.Request, preflight: bool, take: bool) -> Ticket:
        """§4.1 items 1–5 (for HEAD /upload with the X-Content-* headers, §4.2); with `take`
        the upload's slot is taken (release it with `MediaService.release`). A PUT's
        authorization is claimed (used once, decision 190) once everything else passed."""
        sha256 = request.headers.get("X-SHA-256", "")
        if not is_sha256(sha256):
            raise MediaRefusal(400, "missing or malformed X-SHA-256")
        if not preflight or "Authorization" in request.headers:
            event: Event | None = await self._authorize(request, "upload", sha256, query_ok=False)
        else:
            event = None
        if preflight:
            length = _int_header(request.headers.get("X-Content-Length"))
            declared = declared_type(request.headers.get("X-Content-Type"))
        else:
            length = request.content_length
            declared = declared_type(request.headers.get("Content-Type"))
        if event is None:  # an anonymous preflight: only what needs no pubkey
            if length is None:
                raise MediaRefusal(411, "length required")
            if length > (cap := self.media.cap_for(declared)):
                raise too_large(length, cap)
            return Ticket("", sha256, length, declared)
        ticket = await self.media.admit(event.pubkey, sha256, length, declared, take=take)
        if not preflight:
            try:
                first_use = await self.relay.store.claim_auth_event(event.id, UPLOAD_REPLAY_TTL_S)
            except StoreError:
                self.media.release(ticket)
                raise MediaRefusal(500, "database error") from None
            if not first_use:
                self.media.release(ticket)
                raise MediaRefusal(401, "authorization already used")
        return ticket

    async def _admitted(self, request: web.Request, take: bool) -> Ticket | web.Response:
        if not self.relay.config.media.enabled:
            return refusal(404, "not found", close=True)
        try:
            return await self._admit(request, preflight=False, take=take)
        except MediaRefusal as exc:
            return refusal(exc.status, exc.reason, exc.headers, close=True)
        except StoreError:
            return refusal(500, "database error", close=True)

    async def expect_upload(self, request: web.Request) -> web.StreamResponse | None:
        """`Expect: 100-continue`: run items 1–5 before the client sends the body. The slot is
        not taken here: the handler may never run (the HTTP guard can still refuse the
        request), and a slot taken here would then never come back; the handler takes it."""
        if request.headers.get("Expect", "").lower() != "100-continue":
            return refusal(417, f"unknown Expect: {request.headers.get('Expect')}", close=True)
        outcome = await self._admitted(request, take=False)
        if isinstance(outcome, web.Response):
            return outcome
        request[_TICKET] = outcome
        if request.version >= aiohttp.HttpVersion11:
            await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            request.writer.output_size = 0
        return None

    async def put_upload(self, request: web.Request) -> web.Response:
        checked = request.get(_TICKET)
        if checked is None:
            outcome = await self._admitted(request, take=True)
            if isinstance(outcome, web.Response):
                return outcome
            ticket = outcome
        else:  # authorized and claimed before 100 Continue: now take the slot
            try:
                ticket = await self.media.admit(
                    checked.pubkey, checked.sha256, checked.length, checked.declared, take=True
                )
            except MediaRefusal as exc:
                return refusal(exc.status, exc.reason, exc.headers, close=True)
            except StoreError:
                return refusal(500, "database error", close=True)
        try:
            return await self._upload(request, ticket)
        finally:
            self.media.release(ticket)

    async def _upload(self, request: web.Request, ticket: Ticket) -> web.Response:
        try:
            chunks = _chunks(request, self.relay.config.media.upload_idle_timeout_s)
            body = await receive(chunks, ticket.length, ticket.sha256, self.media.blobs.tmp_dir)
        except BodyTooLong:
            return refusal(413, f"file too large (more than {ticket.length} bytes)", close=True)
        except (BodyIncomplete, HttpProcessingError, aiohttp.ClientPayloadError, ConnectionError):
            return refusal(400, "incomplete body", close=True)
        except HashMismatch:
            return refusal(400, "hash mismatch")
        try:
            descriptor = await self.media.store_upload(ticket, body)
        except MediaRefusal as exc:
            return refusal(exc.status, exc.reason, exc.headers)
        except StoreError:
            return refusal(500, "database error")
        finally:
            await asyncio.to_thread(body.path.unlink, True)
        return web.Response(
            body=orjson.dumps(descriptor), content_type="application/json", headers=CORS_HEADERS
        )

    async def head_upload(self, request: web.Request) -> web.Response:
        """BUD-06 preflight (§4.2): the status a PUT would get; nothing is stored."""
        if not self.relay.config.media.enabled:
            return refusal(404, "not found")
        try:
            await self._admit(request, preflight=True, take=False)
        except MediaRefusal as exc:
            return refusal(exc.status, exc.reason, exc.headers)
        except StoreError:
            return refusal(500, "database error")
        return web.Response(status=200, headers=CORS_HEADERS)

    # -- reading (media.md §7) -----------------------------------------------------------------
    async def get_blob(self, request: web.Request) -> web.StreamResponse:
        if not self.relay.config.media.enabled:
            return refusal(404, "not found")
        name = parse_blob_name(request.match_info["name"])
        try:
            event = await self._authorize(request, "get", name.sha256 if name else None, query_ok=True)
            if name is None:
                raise MediaRefusal(404, NOT_FOUND)
            row = await self.media.readable(name.sha256, event.pubkey)
        except MediaRefusal as exc:
            return refusal(exc.status, exc.reason, exc.headers)
        except StoreError:
            return refusal(500, "database error")
        if (
            row is None
            or (name.ext is not None and name.ext != row.ext)
            or (name.thumb and not row.has_thumb)
        ):
            return refusal(404, NOT_FOUND)
        if name.thumb:
            size = await self.media.blobs.thumb_size(row.sha256)
            if size is None:
                return refusal(404, NOT_FOUND)
            mime, etag, disposition = "image/jpeg", f'"{row.sha256}.thumb"', "inline"
        else:
            size, mime, etag = row.size, row.type, f'"{row.sha256}"'
            inline = TYPES.get(row.type) is not None and TYPES[row.type].inline
            disposition = "inline" if inline else f'attachment; filename="{row.sha256}.{row.ext}"'
        headers = {
            **CORS_HEADERS,
            **SERVED_HEADERS,
            "ETag": etag,
            "Content-Type": mime + ("; charset=utf-8" if mime.startswith("text/") else ""),
            "Content-Disposition": disposition,
        }
        if etag in _etags(request.headers.get("If-None-Match")):
            return web.Response(status=304, headers=headers)
        try:
            part = span(request.headers.get("Range"), size)
        except Unsatisfiable:
            return refusal(416, "range not satisfiable", {"Content-Range": f"bytes */{size}"})
        if part.partial:
            headers["Content-Range"] = part.content_range
        response = web.StreamResponse(status=206 if part.partial else 200, headers=headers)
        response.content_length = part.length
        await response.prepare(request)
        if request.method == "HEAD" or part.length == 0:
            await response.write_eof()
            return response
        with contextlib.suppress(ConnectionError):
            async for piece in self.media.blobs.read(row.sha256, name.thumb, part.start, part.end):
                await response.write(piece)
            await response.write_eof()
        return response


async def _chunks(request: web.Request, idle_s: float) -> AsyncIterator[bytes]:
    """The request body as it arrives; a pause of `idle_s` ends it (incomplete)."""
    while True:
        try:
            chunk = await asyncio.wait_for(request.content.readany(), idle_s)
        except TimeoutError:
            raise BodyIncomplete() from None
        if not chunk:
            return
        yield chunk


def _int_header(value: str | None) -> int | None:
    if value is None or not value.strip().isdigit():
        return None
    return int(value.strip())


def _etags(header: str | None) -> set[str]:
    if not header:
        return set()
    return {t.strip().removeprefix("W/") for t in header.split(",")}


def add_routes(app: web.Application, relay: HttpHost) -> None:
    MediaRoutes(relay).add_to(app)


__all__ = ["CORS_HEADERS", "MediaRoutes", "add_routes", "refusal"]
