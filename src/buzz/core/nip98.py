"""NIP-98 HTTP authentication, pure: build and check `Authorization: Nostr <base64 event>`.

Source rules: relay.md §15 item 1 (what the relay checks), agents.md §2.1 item 3 (what the
CLI sends: `u`, `method`, `payload` = SHA-256 hex of the body, and a fresh `nonce`),
relay.md §17 (`AUTH_WINDOW_S` = 60, `NIP98_REPLAY_TTL_S` = 120; the replay guard itself
keeps state and lives in the relay).

Check order (`verify_request`): header shape → base64 → JSON event shape → kind 27235 →
freshness → `u` → `method` → `payload` → id, then signature. Every failure raises
`Nip98Error`, whose `str()` is the relay's 401 text `NIP-98: <reason>`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import secrets
from collections.abc import Iterable
from urllib.parse import urlsplit, urlunsplit

import orjson

from buzz.core.errors import InvalidId, InvalidSignature, MalformedEvent
from buzz.core.event import Event, verify_event
from buzz.core.limits import AUTH_WINDOW_S
from buzz.core.nip42 import normalize_relay_url

HTTP_AUTH_KIND = 27235
SCHEME = "Nostr"
_HTTP_SCHEMES = {"ws": "http", "wss": "https", "http": "http", "https": "https"}


class Nip98Error(ValueError):
    """A request whose NIP-98 authentication fails; `reason` is the text after `NIP-98: `."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason

    def __str__(self) -> str:
        return f"NIP-98: {self.reason}"


class UrlMismatch(Nip98Error):
    """The `u` tag names no URL this request may name; `expected` holds those it may name
    (normalized, sorted), so the refusal can say which URL the relay expects."""

    def __init__(self, expected: Iterable[str]) -> None:
        super().__init__("u tag does not match the request URL")
        self.expected = tuple(sorted(expected))

    def __reduce__(self) -> tuple[type[UrlMismatch], tuple[tuple[str, ...]]]:
        return (UrlMismatch, (self.expected,))


def http_base(relay_url: str) -> str:
    """The HTTP base of a relay URL: `ws`→`http`, `wss`→`https`, http(s) unchanged; no trailing `/`.

    `ws://127.0.0.1:3000` → `http://127.0.0.1:3000` (agents.md §1.1 item 4). Raises ValueError
    `invalid relay URL '<url>': <what is wrong>` for another scheme, no host, or a port that is
    not a number in 1–65535: a URL no connection can be opened to, so a caller can tell it
    from a relay that does not answer.
    """
    parts = urlsplit(relay_url.strip())
    scheme = _HTTP_SCHEMES.get(parts.scheme.lower())
    bad = f"invalid relay URL {relay_url!r}:"
    if scheme is None:
        raise ValueError(f"{bad} it must start with ws://, wss://, http:// or https://")
    if not parts.hostname:
        raise ValueError(f"{bad} no host")
    # urlsplit's own `.port` says only "out of range" or "invalid literal": name what was given.
    tail = parts.netloc.rpartition("@")[2].rpartition("]")[2]  # host[:port], after an IPv6 literal
    port = tail.rpartition(":")[2] if ":" in tail else ""
    if port and not (port.isascii() and port.isdigit()):
        raise ValueError(f"{bad} port {port!r} is not a number")
    if port and not 1 <= int(port) <= 65535:
        raise ValueError(f"{bad} port {port} is out of range (1-65535)")
    return urlunsplit((scheme, parts.netloc, parts.path.rstrip("/"), "", ""))


def payload_hash(body: bytes) -> str:
    """Lowercase hex SHA-256 of the request body (the `payload` tag)."""
    return hashlib.sha256(body).hexdigest()


def build_auth_event(
    secret_key: str,
    url: str,
    method: str,
    body: bytes | None = None,
    created_at: int | None = None,
    nonce: str | None = None,
) -> Event:
    """A signed kind 27235 event for one request: tags `u`, `method`, `payload` (when `body` is
    given, also for an empty body) and `nonce` (fresh random hex unless given)."""
    tags = [["u", url], ["method", method.upper()]]
    if body is not None:
        tags.append(["payload", payload_hash(body)])
    tags.append(["nonce", nonce if nonce is not None else secrets.token_hex(16)])
    return Event.create(secret_key, HTTP_AUTH_KIND, "", tags, created_at)


def encode_header(event: Event) -> str:
    """`Nostr <standard base64 of the event JSON>`."""
    return f"{SCHEME} {base64.b64encode(event.to_json().encode()).decode()}"


def build_auth_header(
    secret_key: str, url: str, method: str, body: bytes | None = None, created_at: int | None = None
) -> str:
    """The `Authorization` header value for one request (see `build_auth_event`)."""
    return encode_header(build_auth_event(secret_key, url, method, body, created_at))


def decode_header(header: str | None) -> Event:
    """Parse `Nostr <base64>` into an Event (shape only, nothing verified). Raises Nip98Error."""
    if not header:
        raise Nip98Error("missing Authorization header")
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != SCHEME.lower() or not token.strip():
        raise Nip98Error("Authorization scheme must be Nostr")
    try:
        raw = base64.b64decode(token.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise Nip98Error("Authorization token is not valid base64") from None
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise Nip98Error("Authorization token is not a JSON event") from None
    try:
        return Event.from_json(obj)
    except MalformedEvent as exc:
        raise Nip98Error(f"malformed event: {exc.detail}") from None


def request_urls(relay_url: str, host: str | None, path_qs: str) -> frozenset[str]:
    """Normalized URLs a `u` tag may name for a request to `path_qs` (path plus `?query`).

    Scheme from RELAY_URL (`ws`→`http`, `wss`→`https`); host and port of RELAY_URL, or of
    the request's `Host` header (relay.md §15 item 1, normalized as in §7.3).
    """
    base = urlsplit(relay_url.strip())
    scheme = _HTTP_SCHEMES.get(base.scheme.lower(), "http")
    hosts = [base.netloc] + ([host] if host else [])
    urls = set()
    for h in hosts:
        try:
            urls.add(normalize_relay_url(f"{scheme}://{h}{path_qs}"))
        except ValueError:
            continue  # an unparseable Host header names no URL
    return frozenset(urls)


def check_auth_event(
    event: Event, urls: Iterable[str], method: str, body: bytes, now: int, window_s: int = AUTH_WINDOW_S
) -> None:
    """The structural checks of relay.md §15 item 1 (not id/signature). Raises Nip98Error.

    `urls` are normalized candidates from `request_urls`; `body` is the raw request body.
    """
    if event.kind != HTTP_AUTH_KIND:
        raise Nip98Error(f"event kind must be {HTTP_AUTH_KIND}")
    if abs(now - event.created_at) > window_s:
        raise Nip98Error(f"created_at is more than {window_s} seconds from server time")
    u_tags = event.tag_values("u")
    if len(u_tags) != 1:
        raise Nip98Error("event must carry exactly one u tag")
    try:
        named = normalize_relay_url(u_tags[0])
    except ValueError:
        raise Nip98Error("u tag is not a URL") from None
    if named not in frozenset(urls):
        raise UrlMismatch(urls)
    methods = event.tag_values("method")
    if len(methods) != 1 or methods[0].upper() != method.upper():
        raise Nip98Error("method tag does not match the request method")
    payloads = event.tag_values("payload")
    if len(payloads) > 1:
        raise Nip98Error("event must carry at most one payload tag")
    if payloads and payloads[0].lower() != payload_hash(body):
        raise Nip98Error("payload tag does not match the SHA-256 of the body")


def verify_request(header: str | None, urls: Iterable[str], method: str, body: bytes, now: int) -> Event:
    """Decode, check and verify one request's NIP-98 header; return the auth event.

    The caller adds the replay guard (an id accepted once within 120 s). CPU cost: one
    Schnorr verification, so relays call this off the event loop. Raises Nip98Error.
    """
    event = decode_header(header)
    check_auth_event(event, urls, method, body, now)
    try:
        verify_event(event)
    except InvalidId:
        raise Nip98Error("invalid event id") from None
    except InvalidSignature:
        raise Nip98Error("invalid signature") from None
    return event
