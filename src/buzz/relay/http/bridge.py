"""The HTTP bridge (relay.md §15): `POST /events`, `POST /query`, `POST /count` with NIP-98,
and `POST /history` (issue 16 item 3, docs/decisions.md 81).

Every request: body at most 1 MiB (413), received within `BUZZ_HTTP_BODY_TIMEOUT_S` (408, the
connection closed; docs/limits.md) → NIP-98 header checked and verified off the event
loop → replay guard (an auth event id is accepted once within 120 s, on every replica and across
restarts: the ids are kept in the store) → relay membership
(§4.4, through `Relay.admit`, as for NIP-42) → the same code paths as EVENT, REQ and COUNT
with `Session(pubkey, "http")`.

Answers:
- authentication failures: 401 `{"error": "NIP-98: <reason>"}`; membership denial: 403
  `{"error": "restricted: not a relay member"}` (docs/decisions.md);
- `/events`: `{"event_id", "accepted", "message"}`, status from the message prefix
  (`EVENT_STATUS`);
- `/query`: 200 and a JSON array of events in §6.4 order, `/count`: 200 `{"count": n}`;
  refusals `{"error": <wire message>}` with the status of `READ_STATUS`.
- `/history`: body `{"kind", "pubkey", "d"[, "limit", "before"]}` (`before` = the `next` of
  the previous answer); 200 `{"events": [...], "next": [created_at, id] | null}`, the versions
  kept at that address that the reader may read, newest first (`Reads.history`). A reader the
  history gate does not admit gets `{"events": [], "next": null}`, the answer for an address
  with no versions. Refusals as for `/query`: 400 `invalid:` (bad body), 403 `restricted:` (a
  kind outside the history gate table).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson
from aiohttp import web

from buzz.core.errors import BuzzError, Invalid, MalformedEvent
from buzz.core.event import MAX_KIND, Event
from buzz.core.filters import Filter
from buzz.core.keys import is_hex
from buzz.core.limits import (
    D_TAG_MAX_BYTES,
    HISTORY_DEFAULT_LIMIT,
    HISTORY_MAX_LIMIT,
    HTTP_BODY_MAX,
    MAX_FILTERS,
    NIP98_REPLAY_TTL_S,
)
from buzz.core.nip98 import Nip98Error, UrlMismatch, request_urls, verify_request
from buzz.relay.auth.session import Session
from buzz.relay.config import DEFAULT_RELAY_URL
from buzz.relay.transport.http_guard import BODY_TIMEOUT_STAT, close_after
from buzz.store.base import StoreError

if TYPE_CHECKING:
    from buzz.relay.http.host import HttpHost

log = logging.getLogger(__name__)

# relay.md §15 item 2: HTTP status of a `/events` answer by the prefix of its message.
EVENT_STATUS: dict[str, int] = {
    "invalid": 400,
    "restricted": 400,
    "duplicate": 400,  # only refused duplicates get here: accepted ones answer 200
    "auth-required": 401,
    "blocked": 403,
    "rate-limited": 429,
    "conflict": 409,  # workflows.md §2.2 item 4
    "error": 500,
}
# relay.md §15 item 3: HTTP status of a `/query` or `/count` refusal by prefix.
READ_STATUS: dict[str, int] = {
    "invalid": 400,
    "restricted": 403,
    "blocked": 403,
    "auth-required": 401,
    "rate-limited": 429,
    "error": 500,
}
MIXED_SEARCH_MESSAGE = "error: mixed search and non-search filters not supported"  # 400, not 500
BUSY = "rate-limited: too many concurrent requests"


def _prefix(message: str) -> str:
    return message.split(":", 1)[0]


def event_status(accepted: bool, message: str) -> int:
    """HTTP status of a `POST /events` answer (relay.md §15 item 2); unknown prefixes → 500."""
    return 200 if accepted else EVENT_STATUS.get(_prefix(message), 500)


def read_status(message: str) -> int:
    """HTTP status of a `/query` or `/count` refusal (relay.md §15 item 3); unknown → 500."""
    if message == MIXED_SEARCH_MESSAGE:
        return 400
    return READ_STATUS.get(_prefix(message), 500)


class _Refusal(Exception):
    """A finished HTTP answer raised from a helper (request-level failure)."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(status)
        self.response = web.json_response(body, status=status, dumps=_dumps)


def _dumps(obj: Any) -> str:
    return orjson.dumps(obj).decode()


class Bridge:
    """The routes, bound to one relay."""

    def __init__(self, relay: HttpHost) -> None:
        self.relay = relay

    # -- request-level steps -----------------------------------------------------------------
    async def _body(self, request: web.Request) -> bytes:
        too_large = _Refusal(413, {"error": f"invalid: request body exceeds {HTTP_BODY_MAX} bytes"})
        if request.content_length is not None and request.content_length > HTTP_BODY_MAX:
            raise too_large
        chunks: list[bytes] = []
        size = 0
        timeout_s = self.relay.config.http_body_timeout_s
        try:
            async with asyncio.timeout(timeout_s):
                while chunk := await request.content.read(1 << 16):
                    size += len(chunk)
                    if size > HTTP_BODY_MAX:
                        raise too_large
                    chunks.append(chunk)
        except TimeoutError:
            # A body trickled in (or never sent) holds a connection and an open file: cut it
            # as the headers are cut (docs/limits.md), and close rather than read the rest.
            self.relay.stats[BODY_TIMEOUT_STAT] += 1
            refusal = _Refusal(408, {"error": f"invalid: request body not received within {timeout_s:g} s"})
            close_after(refusal.response)
            raise refusal from None
        return b"".join(chunks)

    async def _authenticate(self, request: web.Request, body: bytes) -> str:
        """NIP-98 + replay guard + relay membership; returns the session pubkey."""
        urls = request_urls(self.relay.config.relay_url, request.host, request.raw_path)
        header = request.headers.get("Authorization")
        loop = asyncio.get_running_loop()
        try:
            event: Event = await loop.run_in_executor(
                self.relay.executor, verify_request, header, urls, request.method, body, int(time.time())
            )
        except Nip98Error as exc:
            self.relay.telemetry.auth_answered(None, str(exc))
            raise _Refusal(401, self._nip98_refusal(exc, request)) from None
        try:
            first_use = await self.relay.store.claim_auth_event(event.id, NIP98_REPLAY_TTL_S)
        except StoreError:
            log.exception("NIP-98 replay guard failed")
            raise _Refusal(500, {"error": "error: database error"}) from None
        if not first_use:
            raise _Refusal(401, {"error": str(Nip98Error("event already used"))})
        try:
            return await self.relay.admit(event, auth_tag=_header_auth_tag(request))
        except BuzzError as exc:
            raise _Refusal(403, {"error": str(exc)}) from None

    def _nip98_refusal(self, exc: Nip98Error, request: web.Request) -> dict[str, Any]:
        """The 401 body: `error` as relay.md §15 item 1 words it; for a `u` that names another
        URL also the URLs this request may name (`expected`) and the configured RELAY_URL, so a
        client that dialled the bound ws:// address of a relay whose RELAY_URL is wss:// learns
        which URL to use (issue 24 item 6). Nothing here is secret: RELAY_URL is the relay's
        public name. While RELAY_URL is the default, which names no real address, only the URL
        of the Host the client dialled is listed."""
        body: dict[str, Any] = {"error": str(exc)}
        if not isinstance(exc, UrlMismatch):
            return body
        relay_url = self.relay.config.relay_url
        expected = list(exc.expected)
        if relay_url == DEFAULT_RELAY_URL:
            named = request_urls(relay_url, None, request.raw_path)
            expected = [u for u in expected if u not in named] or expected
        else:
            body["relay_url"] = relay_url
        body["expected"] = expected
        return body

    async def _prepare(self, request: web.Request) -> tuple[bytes, str]:
        body = await self._body(request)
        return body, await self._authenticate(request, body)

    # -- routes ------------------------------------------------------------------------------
    async def events(self, request: web.Request) -> web.StreamResponse:
        """`POST /events`: body = one event; runs relay.md §8 with an HTTP session."""
        try:
            body, pubkey = await self._prepare(request)
            event = _parse_event(body)
        except _Refusal as refusal:
            return refusal.response
        if not self.relay.try_acquire_handler():
            return _event_answer(event.id, False, BUSY)
        try:
            outcome = await self.relay.ingest.submit(event, Session(pubkey, "http"))
        finally:
            self.relay.release_handler()
        self.relay.telemetry.event_answered(
            event.id, event.kind, event.pubkey, outcome.accepted, outcome.message, "http"
        )
        return _event_answer(event.id, outcome.accepted, outcome.message)

    async def query(self, request: web.Request) -> web.StreamResponse:
        """`POST /query`: one filter or an array of 1–10; §7.5 steps 1–3, 5–7, then §6."""

        async def answer(body: bytes, pubkey: str) -> web.Response:
            filters = _parse_filters(body)
            await self.relay.reads.check(filters, pubkey)
            results = await self.relay.reads.stored(filters, pubkey)
            text = "[" + ",".join(stored.event.to_json() for stored in results) + "]"
            return web.Response(text=text, content_type="application/json")

        return await self._read_route(request, "query", answer)

    async def count(self, request: web.Request) -> web.StreamResponse:
        """`POST /count`: same body as `/query`; answers `{"count": n}` (relay.md §7.7)."""

        async def answer(body: bytes, pubkey: str) -> web.Response:
            filters = _parse_filters(body)
            await self.relay.reads.check(filters, pubkey, count=True)
            n = await self.relay.reads.count(filters, pubkey)
            return web.json_response({"count": n}, dumps=_dumps)

        return await self._read_route(request, "count", answer)

    async def history(self, request: web.Request) -> web.StreamResponse:
        """`POST /history`: the kept versions of one address, gated per version (module doc)."""

        async def answer(body: bytes, pubkey: str) -> web.Response:
            ask = _parse_history(body)
            found = await self.relay.reads.history(
                ask.kind, ask.pubkey, ask.d, pubkey, limit=ask.limit, before=ask.before
            )
            events = ",".join(found.texts)  # the JSON the store's byte budget measured
            text = (
                '{"events":[' + events + '],"next":' + _dumps(list(found.next) if found.next else None) + "}"
            )
            return web.Response(text=text, content_type="application/json")

        return await self._read_route(request, "history", answer)

    async def _read_route(
        self,
        request: web.Request,
        route: str,
        answer: Callable[[bytes, str], Awaitable[web.Response]],
    ) -> web.StreamResponse:
        """The read routes' common frame: `_prepare`, then `answer(body, reader)`; a BuzzError
        is a `READ_STATUS` refusal, a StoreError `error: database error`; each answer counted
        under `route`."""
        try:
            body, pubkey = await self._prepare(request)
            response = await answer(body, pubkey)
        except _Refusal as refusal:
            return refusal.response
        except BuzzError as exc:
            self.relay.telemetry.req_answered(route, None, str(exc))
            return _read_refusal(str(exc))
        except StoreError:
            log.exception("bridge %s failed", route)
            return _read_refusal("error: database error")
        self.relay.telemetry.req_answered(route, None, None)
        return response


def _event_answer(event_id: str | None, accepted: bool, message: str) -> web.Response:
    return web.json_response(
        {"event_id": event_id, "accepted": accepted, "message": message},
        status=event_status(accepted, message),
        dumps=_dumps,
    )


def _read_refusal(message: str) -> web.Response:
    return web.json_response({"error": message}, status=read_status(message), dumps=_dumps)


def _loads(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return _NOT_JSON


_NOT_JSON = object()


def _parse_event(body: bytes) -> Event:
    """The request body as one event; a bad shape is a 400 `OK false`-style answer."""
    obj = _loads(body)
    try:
        if obj is _NOT_JSON:
            raise MalformedEvent("body is not valid JSON")
        return Event.from_json(obj)
    except MalformedEvent as exc:
        eid = obj.get("id") if isinstance(obj, dict) and isinstance(obj.get("id"), str) else None
        raise _Refusal(400, {"event_id": eid, "accepted": False, "message": str(exc)}) from None


def _parse_filters(body: bytes) -> list[Filter]:
    """One filter object or an array of 1–10 (relay.md §15 item 3, §7.5 step 1). Raises Invalid."""
    obj = _loads(body)
    if isinstance(obj, dict):
        raw: list[Any] = [obj]
    elif isinstance(obj, list):
        raw = obj
    else:
        raise Invalid("body must be a filter object or an array of filters")
    if not raw:
        raise Invalid("at least one filter is required")
    if len(raw) > MAX_FILTERS:
        raise Invalid(f"too many filters (max {MAX_FILTERS})")
    return [Filter.parse(f) for f in raw]


@dataclass(frozen=True, slots=True)
class HistoryAsk:
    """A parsed `POST /history` body: the address, the page size (clamped to
    HISTORY_MAX_LIMIT) and the resume point."""

    kind: int
    pubkey: str
    d: str
    limit: int
    before: tuple[int, str] | None


_HISTORY_FIELDS = ("kind", "pubkey", "d", "limit", "before")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _parse_history(body: bytes) -> HistoryAsk:
    """The `/history` body; raises Invalid for a bad shape (the kind's gate is `Reads.history`)."""
    obj = _loads(body)
    if not isinstance(obj, dict):
        raise Invalid("history body must be an object with kind, pubkey and d")
    unknown = sorted(k for k in obj if k not in _HISTORY_FIELDS)
    if unknown:
        raise Invalid(f"unknown history field {unknown[0]!r}")
    kind, pubkey, d = obj.get("kind"), obj.get("pubkey"), obj.get("d")
    if not _is_int(kind) or not 0 <= kind <= MAX_KIND:
        raise Invalid("history kind must be an integer 0..65535")
    if not is_hex(pubkey, 64):
        raise Invalid("history pubkey must be 64 lowercase hex characters")
    if not isinstance(d, str):
        raise Invalid("history d must be a string")
    if len(d.encode("utf-8")) > D_TAG_MAX_BYTES:
        raise Invalid(f"history d too long (max {D_TAG_MAX_BYTES} bytes)")
    limit = obj.get("limit", HISTORY_DEFAULT_LIMIT)
    if not _is_int(limit) or limit < 1:
        raise Invalid("history limit must be a positive integer")
    before = obj.get("before")
    if before is not None:
        if not (
            isinstance(before, list)
            and len(before) == 2
            and _is_int(before[0])
            and isinstance(before[1], str)
            and is_hex(before[1], 64)
        ):
            raise Invalid("history before must be [created_at, event id]")
        before = (before[0], before[1])
    return HistoryAsk(kind, pubkey, d, min(limit, HISTORY_MAX_LIMIT), before)


def add_routes(app: web.Application, relay: HttpHost) -> None:
    """Register `POST /events`, `/query`, `/count` and `/history` on `app` for `relay`."""
    bridge = Bridge(relay)
    app.router.add_post("/events", bridge.events)
    app.router.add_post("/query", bridge.query)
    app.router.add_post("/count", bridge.count)
    app.router.add_post("/history", bridge.history)


__all__ = [
    "EVENT_STATUS",
    "READ_STATUS",
    "Bridge",
    "add_routes",
    "event_status",
    "read_status",
]


def _header_auth_tag(request: web.Request) -> list[str] | None:
    """The NIP-OA tag of the `X-Auth-Tag` header (compact JSON), for NIP-AA (relay.md §15 item 1);
    None when absent or not a JSON array of strings (then it simply grants nothing)."""
    raw = request.headers.get("X-Auth-Tag")
    if not raw:
        return None
    try:
        tag = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if isinstance(tag, list) and all(isinstance(x, str) for x in tag):
        return tag
    return None
