"""One identity's connection to one relay: the transports behind the workspace API.

One-shot reads and writes go through the HTTP bridge (relay.md §15, NIP-98 signed, `X-Auth-Tag`
when the identity has a tag: agents.md §2.1 item 3); kinds the bridge refuses (ephemeral, e.g.
presence) and the engram queries use a WebSocket with NIP-42 AUTH (`websocket`). Every bridge or
WebSocket failure leaves here as a `buzz.client.errors.WorkspaceError`:

| transport outcome | error |
|---|---|
| no HTTP answer, timeout | `NetworkError` (retryable) |
| HTTP 401 / 403 | `AuthError` (with the relay's text) |
| a relay verdict (`OK false`, refused read) | `Refused`, `Conflict` for `duplicate:` |
| a success that is not the JSON the route promises | `WorkspaceError` |
| another HTTP status | `RelayUnavailable` (retryable for 429/502/503/504) |
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import aiohttp

from buzz.client.errors import (
    AuthError,
    NetworkError,
    NotFound,
    RelayUnavailable,
    UserError,
    WorkspaceError,
    refusal,
)
from buzz.client.files import Files
from buzz.client.http_bridge import BridgeClient, BridgeError, relay_signing_key
from buzz.client.identity import Identity
from buzz.client.relay_client import ConnectionLost, PublishResult, RelayClient, RelayError
from buzz.core.event import Event

DEFAULT_TIMEOUT_S = 10.0
ACCESS_PREFIXES = ("restricted:", "auth-required:", "blocked:")  # refusals of access (relay.md §7.8)
# The relay's answer to a non-member, for a private channel and a missing one alike (relay.md
# §4.3 item 2, §6.3 item 1: private channels are not revealed that way); a join (9021) tells
# them apart (§4.5, §18 item 49), which is what `explain_not_a_member` asks.
NOT_A_MEMBER = "restricted: not a channel member"
JOIN_KIND = 9021
CHANNEL_NOT_FOUND = "invalid: channel not found"
_WS_SCHEMES = {"http": "ws", "https": "wss", "ws": "ws", "wss": "wss"}


def from_bridge_error(exc: BridgeError) -> WorkspaceError:
    """Classify a bridge failure by the table of the module docstring."""
    if exc.status is None:
        return NetworkError(exc.message)
    if exc.status in (401, 403):
        return AuthError(exc.message, relay_message=exc.relay_message)
    if exc.relay_message is not None:
        return refusal(exc.relay_message, exc.relay_message, retryable=exc.retryable)
    if exc.malformed:
        return WorkspaceError(exc.message)
    return RelayUnavailable(exc.message, retryable=exc.retryable)


def refused(result: PublishResult) -> WorkspaceError:
    """An `OK false` verdict: Refused, or Conflict for `duplicate:` (agents.md §2.1)."""
    return refusal(result.message, f"relay refused the event: {result.message}")


def websocket_url(relay_url: str) -> str:
    """`http`→`ws`, `https`→`wss`; ws/wss unchanged. Raises UserError for another scheme."""
    parts = urlsplit(relay_url.strip())
    scheme = _WS_SCHEMES.get(parts.scheme.lower())
    if scheme is None or not parts.netloc:
        raise UserError(f"relay URL must be ws://, wss://, http:// or https://, got {relay_url!r}")
    return urlunsplit((scheme, parts.netloc, parts.path, parts.query, ""))


class Session:
    """The identity, the relay URL and the bridge client every area of the API works through.

    Use as `async with Session(url, identity) as s:`; the bridge opens on entry. Raises
    UserError for a relay URL that is not ws/wss/http/https.
    """

    def __init__(self, relay_url: str, identity: Identity, *, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        self.relay_url = relay_url
        self.identity = identity
        self.timeout = timeout
        self._relay_pubkey: str | None = None
        try:
            self.bridge = BridgeClient(
                relay_url, identity.secret, auth_tag=identity.auth_tag, timeout=timeout
            )
        except ValueError as exc:
            raise UserError(str(exc)) from None
        self.files = Files(relay_url, identity, connect_timeout=timeout)  # media.md: Blossom routes

    async def __aenter__(self) -> Session:
        await self.bridge.__aenter__()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.files.close()
        await self.bridge.__aexit__(exc_type, exc, tb)

    @property
    def pubkey(self) -> str:
        return self.identity.pubkey

    def sign(
        self, kind: int, content: str = "", tags: Iterable[Sequence[str]] = (), created_at: int | None = None
    ) -> Event:
        """An event signed with the identity's key (agents.md §2.1 item 4)."""
        return Event.create(self.identity.secret, kind, content, tags, created_at)

    async def publish(self, event: Event) -> PublishResult:
        """`POST /events`; an accepted answer (`duplicate:` included) is returned, a refusal
        raises Refused / Conflict (NotFound for a channel that does not exist)."""
        try:
            result = await self.bridge.publish(event)
        except BridgeError as exc:  # a refusal answered with an HTTP error status (relay.md §15 item 2)
            failure = from_bridge_error(exc)
        else:
            if result.accepted:
                return result
            failure = refused(result)
        raise await self.explain_not_a_member(failure, event.tag_values("h")[:1])

    async def query(self, filters: Iterable[Mapping[str, Any]]) -> list[Event]:
        """`POST /query`: the stored events visible to me, the relay's order (newest first).
        A refused read raises AuthError / Refused (NotFound for a channel that does not exist)."""
        filters = list(filters)
        try:
            return await self.bridge.query(filters)
        except BridgeError as exc:
            named = [c for f in filters for c in (f.get("#h") or ()) if isinstance(c, str)]
            raise await self.explain_not_a_member(from_bridge_error(exc), named) from None

    async def explain_not_a_member(self, failure: WorkspaceError, channels: Iterable[str]) -> WorkspaceError:
        """`failure` made precise when it is the relay's `restricted: not a channel member` for
        one channel `C`: NotFound `channel not found: C` (exit 1) when no such channel exists;
        for a private channel the refusal stands. The relay gives that answer for both cases
        (relay.md §4.3, §6.3) but tells them apart to anyone who joins (9021: `invalid: channel
        not found` / `restricted: channel is private`, §4.5), so asking it a join reveals nothing
        its rules hide (docs/decisions.md 123). The join changes nothing: `not a channel member`
        means `C` is missing or private, and both refuse it; a channel made open in between
        would be joined, as anyone may. Any other failure is returned as is."""
        named = set(channels)
        if failure.relay_message != NOT_A_MEMBER or len(named) != 1:
            return failure
        (channel,) = named
        try:
            answer = await self.bridge.publish(self.sign(JOIN_KIND, "", [["h", channel]]))
            verdict = "" if answer.accepted else answer.message
        except BridgeError as exc:  # refusals come with HTTP 400; no answer leaves the first
            verdict = exc.relay_message or ""
        if verdict == CHANNEL_NOT_FOUND:
            return NotFound(f"channel not found: {channel}", relay_message=failure.relay_message)
        return failure  # private (`restricted: channel is private`): the refusal says it

    async def get_event(self, event_id: str) -> Event:
        """One stored event visible to me, else NotFound."""
        found = await self.query([{"ids": [event_id]}])
        if not found:
            raise NotFound(f"event not found: {event_id}")
        return found[0]

    async def relay_pubkey(self) -> str | None:
        """The relay's own key from its NIP-11 document, None when it names none; cached.
        Relay-signed events (39000…, 48101–48103) are trusted only with this key. NIP-11's `self`
        is the relay's signing key; `pubkey` is the operator's contact key (set by
        `BUZZ_OWNER_PUBKEY`), so it is only a fallback for relays that publish no `self`."""
        if self._relay_pubkey is None:
            try:
                info = await self.bridge.relay_info()
            except BridgeError as exc:
                raise from_bridge_error(exc) from None
            self._relay_pubkey = relay_signing_key(info) or ""
        return self._relay_pubkey or None

    @contextlib.asynccontextmanager
    async def websocket(self) -> AsyncIterator[RelayClient]:
        """A NIP-42-authenticated WebSocket client (AUTH carries the identity's tag), closed on
        exit. Connecting raises UserError (URL), AuthError (AUTH refused) or NetworkError; what
        the body raises passes unchanged (classify it with `websocket_failure`)."""
        client = RelayClient(
            websocket_url(self.relay_url), self.identity.secret, auth_tags=self.identity.auth_tags
        )
        try:
            await client.connect()
        except Exception as exc:
            await client.close()
            raise websocket_failure(exc) from None
        try:
            yield client
        finally:
            await client.close()


def websocket_failure(exc: Exception) -> Exception:
    """A WebSocket exchange that failed: a refusal of the connection (`RelayError`, including
    a connection closed after `blocked:`) is AuthError; no answer, or a connection that just
    went away (a relay restarting), is NetworkError; anything else is returned as is."""
    if isinstance(exc, ConnectionLost) and not exc.message.startswith(ACCESS_PREFIXES):
        return NetworkError(f"cannot reach the relay: {exc.message}")
    if isinstance(exc, RelayError):  # AUTH refused (restricted:/auth-required:/blocked:)
        return AuthError(exc.message, relay_message=exc.message)
    if isinstance(exc, aiohttp.ClientError | OSError | TimeoutError):
        return NetworkError(f"cannot reach the relay: {exc or type(exc).__name__}")
    return exc
