"""NIP-42 authentication checks, pure (relay.md §7.3 item 2).

The relay sends a challenge; the client's kind 22242 event must carry it, name this relay,
and be fresh. Signature verification is the caller's (it runs off the event loop).
"""

from __future__ import annotations

import math
import secrets
from urllib.parse import urlsplit

from buzz.core.errors import AuthRequired, Refusal
from buzz.core.event import Event
from buzz.core.kinds import AUTH_KIND
from buzz.core.limits import AUTH_FAILURE_BURST, AUTH_FAILURE_DECAY_S, AUTH_WINDOW_S, CHALLENGE_BYTES

_LOOPBACK = {"localhost": "127.0.0.1", "::1": "127.0.0.1", "[::1]": "127.0.0.1"}
_DEFAULT_PORTS = {"ws": 80, "wss": 443, "http": 80, "https": 443}

VERIFICATION_FAILED = Refusal(AuthRequired, "verification failed")


def new_challenge() -> str:
    """64 hex from 32 random bytes."""
    return secrets.token_hex(CHALLENGE_BYTES)


def normalize_relay_url(url: str) -> str:
    """Lowercase scheme and host; localhost/::1 → 127.0.0.1; drop default port and one trailing `/`.

    Raises ValueError for text that is not a URL (e.g. an unclosed `[` IPv6 host).
    """
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    host = _LOOPBACK.get(host, host)
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = host if port is None or port == _DEFAULT_PORTS.get(scheme) else f"{host}:{port}"
    path = parts.path[:-1] if parts.path.endswith("/") else parts.path
    query = f"?{parts.query}" if parts.query else ""
    return f"{scheme}://{netloc}{path}{query}"


def _normalized_or_none(url: str) -> str | None:
    try:
        return normalize_relay_url(url)
    except ValueError:
        return None


def check_auth_event(event: Event, challenge: str, relay_urls: frozenset[str], now: int) -> None:
    """Structural NIP-42 checks (not the signature). Raises AuthRequired("verification failed").

    `relay_urls` holds the normalized URLs this relay answers to.
    """
    if event.kind != AUTH_KIND:
        raise VERIFICATION_FAILED()
    challenges = event.tag_values("challenge")
    relays = event.tag_values("relay")
    if len(challenges) != 1 or challenges[0] != challenge:
        raise VERIFICATION_FAILED()
    if len(relays) != 1 or _normalized_or_none(relays[0]) not in relay_urls:
        raise VERIFICATION_FAILED()
    if abs(now - event.created_at) > AUTH_WINDOW_S:
        raise VERIFICATION_FAILED()


def build_auth_event(secret_key: str, challenge: str, relay_url: str, created_at: int | None = None) -> Event:
    """A client's kind 22242 answer to `challenge` for `relay_url`."""
    return Event.create(
        secret_key, AUTH_KIND, "", [["relay", relay_url], ["challenge", challenge]], created_at
    )


class AuthStrikes:
    """Failed AUTH attempts of one connection, rate-limited rather than final (issue 25 item 2):
    a leaky bucket of `burst` strikes, one forgiven every `decay_s` seconds. Pure: the caller
    passes a monotonic clock reading."""

    __slots__ = ("_at", "_burst", "_decay_s", "_strikes")

    def __init__(self, burst: int = AUTH_FAILURE_BURST, decay_s: float = AUTH_FAILURE_DECAY_S) -> None:
        self._burst = burst
        self._decay_s = decay_s
        self._strikes = 0.0
        self._at = 0.0

    def _level(self, now: float) -> float:
        return max(0.0, self._strikes - (now - self._at) / self._decay_s)

    def wait_s(self, now: float) -> int:
        """Whole seconds until another attempt may be made; 0 when one may be made now."""
        over = self._level(now) - (self._burst - 1)
        return 0 if over <= 0 else max(1, math.ceil(over * self._decay_s))

    def fail(self, now: float) -> None:
        """Count one failed attempt at `now`."""
        self._strikes = self._level(now) + 1
        self._at = now
