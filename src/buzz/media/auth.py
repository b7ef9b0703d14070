"""The relay's checks of a kind 24242 authorization (media.md §3.2 items 1, 2, 4–9), pure.

Order: `parse_authorization` (items 1–2) → the caller verifies id and signature off the event
loop (item 3, `core.event.verify_event`) → `check_claims` (items 4–9). Workspace membership
(item 10) and the upload replay guard (decision 190) need the store and are the relay's.
Every failure raises `AuthFailure` whose `reason` is the `X-Reason` text of a 401.
"""

from __future__ import annotations

import contextlib
from urllib.parse import urlsplit

from buzz.core.blossom import KIND_BLOSSOM_AUTH, SCHEME, decode_token
from buzz.core.errors import MalformedEvent
from buzz.core.event import Event
from buzz.media.limits import AUTH_FUTURE_SKEW_S, GET_AUTH_WINDOW_S, UPLOAD_AUTH_WINDOW_S

WINDOWS = {"upload": UPLOAD_AUTH_WINDOW_S, "get": GET_AUTH_WINDOW_S}
_LOOPBACK = {"localhost": "127.0.0.1", "::1": "127.0.0.1", "[::1]": "127.0.0.1"}
_DEFAULT_PORTS = frozenset({80, 443})


class AuthFailure(Exception):
    """A 401 (or, with `status`, another status) with its X-Reason."""

    def __init__(self, reason: str, status: int = 401) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status


def token_of(header: str | None, query: str | None = None) -> str:
    """The token of `Authorization: Nostr <token>`, else of `?auth=` when given (GET/HEAD of
    /media only, §3.1 item 2). Raises AuthFailure `missing authorization` / `malformed …`."""
    if header:
        scheme, _, token = header.strip().partition(" ")
        if scheme != SCHEME or not token.strip():
            raise AuthFailure("malformed authorization")
        return token.strip()
    if query:
        return query
    raise AuthFailure("missing authorization")


def parse_authorization(token: str) -> Event:
    """Items 1–2: a decodable NIP-01 event shape of kind 24242. Raises AuthFailure."""
    try:
        event = Event.from_json(decode_token(token))
    except (ValueError, MalformedEvent):
        raise AuthFailure("malformed authorization") from None
    if event.kind != KIND_BLOSSOM_AUTH:
        raise AuthFailure("wrong authorization kind")
    return event


def normalize_host(value: str) -> str:
    """A `server` tag or Host as `host[:port]`: scheme and path removed, lowercase, a default
    port (80, 443) dropped, `localhost`/`::1` read as 127.0.0.1 (§3.2 item 8)."""
    text = value.strip().lower()
    parts = urlsplit(text if "://" in text else "//" + text)
    host = parts.hostname or ""
    host = _LOOPBACK.get(host, host)
    port = None
    with contextlib.suppress(ValueError):
        port = parts.port
    if ":" in host:
        host = f"[{host}]"
    return host if port is None or port in _DEFAULT_PORTS else f"{host}:{port}"


def check_claims(event: Event, verb: str, now: int, hosts: frozenset[str], sha256: str | None) -> None:
    """Items 4–9 for `verb` at unix time `now`; `hosts` are this relay's normalized hosts and
    `sha256` the blob (upload: the X-SHA-256 header; get: the requested hash). Raises AuthFailure."""
    if not event.content.strip():
        raise AuthFailure("authorization content must not be empty")
    verbs = event.tag_values("t")
    if not verbs or any(v != verb for v in verbs):
        raise AuthFailure("authorization verb mismatch")
    expiration = event.first_tag("expiration")
    if expiration is None or not expiration.isdigit():
        raise AuthFailure("missing expiration")
    if int(expiration) <= now:
        raise AuthFailure("authorization expired")
    if event.created_at > now + AUTH_FUTURE_SKEW_S or event.created_at < now - WINDOWS[verb]:
        raise AuthFailure("authorization timestamp out of window")
    servers = event.tag_values("server")
    server_ok = any(normalize_host(s) in hosts for s in servers)
    if servers and not server_ok:
        raise AuthFailure("authorization server mismatch")
    covered = sha256 is not None and sha256 in event.tag_values("x")
    if not covered and not (verb == "get" and server_ok):
        raise AuthFailure("authorization does not cover this blob")
