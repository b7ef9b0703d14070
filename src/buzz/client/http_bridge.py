"""An async client of the relay's HTTP bridge (relay.md §15), signing each request with NIP-98.

Used by the CLI for one-shot reads and writes (agents.md §2.1 item 3): every request carries
`Authorization: Nostr …` (kind 27235 with `u`, `method`, `payload` and a fresh `nonce`) and,
when configured, `X-Auth-Tag` (the NIP-OA tag as compact JSON).

    async with BridgeClient("ws://127.0.0.1:3000", secret) as bridge:
        result = await bridge.publish(event)          # PublishResult
        events = await bridge.query([{"kinds": [9], "#h": [channel]}])
        n = await bridge.count([{"kinds": [9], "#h": [channel]}])
        events, more = await bridge.history(30174, agent, d)   # an engram's kept versions

Errors: `BridgeError` with `status` (None for transport failures and timeouts) and
`relay_message` (the relay's verdict text: the `message` of a refused event, the `error` of a
refused read or of a 401), so callers can tell "the relay said no" from "no answer".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import aiohttp
import orjson

from buzz.client.relay_client import PublishResult
from buzz.core.errors import MalformedEvent
from buzz.core.event import Event
from buzz.core.keys import is_hex
from buzz.core.nip98 import build_auth_header, http_base

FilterLike = Mapping[str, Any]
RETRYABLE_STATUSES = frozenset({429, 502, 503, 504})


def relay_signing_key(info: Mapping[str, Any]) -> str | None:
    """The relay's signing key as its NIP-11 document names it: `self`; `pubkey` (the operator's
    contact key, `BUZZ_OWNER_PUBKEY`) only from a relay that names no `self`. None when neither
    is a hex key."""
    value = info.get("self", info.get("pubkey"))
    return value if isinstance(value, str) and is_hex(value, 64) else None


@dataclass
class BridgeError(Exception):
    """A bridge request that did not succeed.

    `status`: the HTTP status, or None when no HTTP answer arrived (connection refused, DNS,
    TLS, timeout). `relay_message`: the relay's own verdict text when the answer carried one.
    `malformed`: the answer was not the JSON the route promises.
    """

    message: str
    status: int | None = None
    relay_message: str | None = None
    malformed: bool = False

    def __str__(self) -> str:
        return self.message

    @property
    def retryable(self) -> bool:
        """True for transport failures and HTTP 429/502/503/504 (engram.md §12.1)."""
        return self.status is None or self.status in RETRYABLE_STATUSES


# What `Event.from_json` raises for an event a relay should never have served (MalformedEvent is
# a BuzzError, not a ValueError): every read path turns it into one BridgeError(malformed=True).
_BAD_EVENT = (ValueError, MalformedEvent)


class BridgeClient:
    """NIP-98-signed requests to `POST /events`, `/query`, `/count` of one relay.

    `relay_url` may be ws/wss/http/https; the HTTP base maps ws→http, wss→https.
    `auth_tag` (a NIP-OA tag list) is sent as `X-Auth-Tag`. `timeout` is per request, seconds.
    """

    def __init__(
        self,
        relay_url: str,
        secret_key: str,
        *,
        auth_tag: Sequence[str] | None = None,
        timeout: float = 10.0,
    ) -> None:
        self.base = http_base(relay_url)
        self.secret_key = secret_key
        self.auth_tag = list(auth_tag) if auth_tag else None
        self.timeout = timeout
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> BridgeClient:
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout))
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    # -- routes ------------------------------------------------------------------------------
    async def publish(self, event: Event) -> PublishResult:
        """`POST /events`. Returns the relay's verdict on 200 (accepted, `duplicate:` and
        `response:` included). Raises BridgeError for every other status, with
        `relay_message` = the refusal text (`invalid: …`, `restricted: …`, `NIP-98: …`)."""
        status, body = await self._post("/events", event.to_json().encode())
        if isinstance(body, dict) and isinstance(body.get("accepted"), bool):
            message = str(body.get("message", ""))
            if status == 200:
                return PublishResult(str(body.get("event_id") or event.id), body["accepted"], message)
            raise BridgeError(message or f"HTTP {status}", status, message or None)
        raise _unexpected(status, body, self.base)

    async def query(self, filters: Iterable[FilterLike]) -> list[Event]:
        """`POST /query` → the stored events in relay.md §6.4 order. Raises BridgeError."""
        status, body = await self._post("/query", _filters_body(filters))
        if status == 200 and isinstance(body, list):
            try:
                return [Event.from_json(obj) for obj in body]
            except _BAD_EVENT as exc:
                raise BridgeError(
                    f"relay answered a malformed event: {exc}", status, malformed=True
                ) from None
        raise _unexpected(status, body, self.base)

    async def count(self, filters: Iterable[FilterLike]) -> int:
        """`POST /count` → the number of visible matching events. Raises BridgeError."""
        status, body = await self._post("/count", _filters_body(filters))
        if status == 200 and isinstance(body, dict) and type(body.get("count")) is int:
            return int(body["count"])
        raise _unexpected(status, body, self.base)

    async def history(
        self,
        kind: int,
        pubkey: str,
        d: str,
        *,
        limit: int | None = None,
        before: Sequence[object] | None = None,
    ) -> tuple[list[Event], list[object] | None]:
        """`POST /history` (docs/decisions.md 81): one page of the versions kept at the address
        `(kind, pubkey, d)` that I may read, newest first, and the `next` resume point to pass
        back as `before` (None at the end). An address I may not read answers like one with no
        versions. Raises BridgeError."""
        ask: dict[str, object] = {"kind": kind, "pubkey": pubkey, "d": d}
        if limit is not None:
            ask["limit"] = limit
        if before is not None:
            ask["before"] = list(before)
        status, body = await self._post("/history", orjson.dumps(ask))
        if status == 200 and isinstance(body, dict) and isinstance(body.get("events"), list):
            more = body.get("next")
            if more is not None and not (isinstance(more, list) and len(more) == 2):
                raise BridgeError("relay answered a malformed history cursor", status, malformed=True)
            try:
                return [Event.from_json(obj) for obj in body["events"]], more
            except _BAD_EVENT as exc:
                raise BridgeError(
                    f"relay answered a malformed event: {exc}", status, malformed=True
                ) from None
        raise _unexpected(status, body, self.base)

    async def call(self, method: str, path: str, body: bytes | None = None) -> tuple[int, Any]:
        """A NIP-98-signed request to one of the relay's JSON routes (`/workflows…`): the
        status and the parsed body, whatever the status. Raises BridgeError when unreachable."""
        return await self._signed(method, path, body, {})

    async def relay_info(self) -> dict[str, Any]:
        """`GET /info`: the NIP-11 document (relay.md §14); no authentication. Raises BridgeError."""
        status, raw = await self._exchange("GET", self.base + "/info", None, {})
        try:
            doc = orjson.loads(raw)
        except orjson.JSONDecodeError:
            doc = None
        if status == 200 and isinstance(doc, dict):
            return doc
        raise BridgeError(f"HTTP {status}: no relay information document", status, malformed=status == 200)

    # -- transport ---------------------------------------------------------------------------
    async def _post(self, path: str, body: bytes) -> tuple[int, Any]:
        return await self._signed("POST", path, body, {"Content-Type": "application/json"})

    async def _signed(
        self, method: str, path: str, body: bytes | None, headers: dict[str, str]
    ) -> tuple[int, Any]:
        """`method` on `path` with a NIP-98 `Authorization` (and `X-Auth-Tag` when set): the
        status and the parsed body, a `_NotJson` when the body is not JSON."""
        url = self.base + path
        headers = {"Authorization": build_auth_header(self.secret_key, url, method, body), **headers}
        if self.auth_tag:
            headers["X-Auth-Tag"] = orjson.dumps(self.auth_tag).decode()
        status, raw = await self._exchange(method, url, body, headers)
        try:
            return status, orjson.loads(raw)
        except orjson.JSONDecodeError:
            return status, _NotJson(raw.decode("utf-8", "replace")[:200])

    async def _exchange(
        self, method: str, url: str, body: bytes | None, headers: dict[str, str]
    ) -> tuple[int, bytes]:
        """One HTTP round trip: the status and the raw body. Raises BridgeError when unreachable."""
        if self._session is None:
            raise RuntimeError("BridgeClient used outside `async with`")
        try:
            async with self._session.request(method, url, data=body, headers=headers) as resp:
                return resp.status, await resp.read()
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise BridgeError(f"cannot reach the relay at {self.base}: {_describe(exc)}") from None


@dataclass(frozen=True)
class _NotJson:
    text: str


def _filters_body(filters: Iterable[FilterLike]) -> bytes:
    return orjson.dumps([dict(f) for f in filters])


def _unexpected(status: int, body: Any, base: str) -> BridgeError:
    """A non-success answer: carry the relay's `error` text when there is one. A 404 that is
    not the relay's JSON means nothing at `base` serves the bridge's routes: most often a
    relay URL with a path (`ws://host:3000/foo`), so the message says where the relay is."""
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        return BridgeError(_with_expected_url(body), status, body["error"])
    if status == 404 and isinstance(body, _NotJson):
        return BridgeError(
            f"HTTP 404: no buzz relay answers at {base} (a relay is served at the root of its "
            "host and port, e.g. ws://127.0.0.1:3000; check --relay / BUZZ_RELAY_URL)",
            status,
        )
    if isinstance(body, _NotJson):
        return BridgeError(f"HTTP {status}: {body.text or 'empty body'}", status, malformed=status == 200)
    return BridgeError(f"HTTP {status}: unexpected answer", status, malformed=status == 200)


def _with_expected_url(body: dict[str, Any]) -> str:
    """The refusal's `error`, and for a NIP-98 `u` the relay does not accept, the URLs it does
    (`expected`) and its RELAY_URL (`relay_url`, when configured): a relay whose RELAY_URL is
    wss:// refuses a client that dialled its ws:// address directly, and this says what to use."""
    error = str(body["error"])
    expected = body.get("expected")
    if not (isinstance(expected, list) and expected and all(isinstance(u, str) for u in expected)):
        return error
    text = f"{error}: the relay expects {' or '.join(expected)}"
    relay_url = body.get("relay_url")
    if isinstance(relay_url, str) and relay_url:
        text += f" (its RELAY_URL is {relay_url}: connect with --relay {relay_url})"
    return text


def _describe(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "timed out"
    return str(exc) or type(exc).__name__


__all__ = ["BridgeClient", "BridgeError", "PublishResult"]
