"""The harness's connection to the relay (agents.md §4.1, §4.2 item 4, §4.3 item 2).

Two transports, as §4.1 says: the WebSocket for subscriptions and ephemeral kinds (presence
20001, typing 20002), the HTTP bridge (`POST /events`, `/query`, `/count`, NIP-98 with the
`X-Auth-Tag` header) for stored writes and queries. `publish` picks by kind class.

`RelayLink.run` connects and answers NIP-42 with the AUTH event carrying the NIP-OA tag
(`buzz.client.RelayClient` with `auth_tags`), within `AUTH_TIMEOUT_S` (20 s). On any failure or
disconnect it reconnects with jittered exponential backoff from 1 s to `BACKOFF_MAX_S` (5 s:
issue 14 item 5 caps it so a mention after a 25 s outage is not kept waiting), logs the loss and
the recovery, re-authenticates, re-opens every subscription with `since` = (newest `created_at`
received on it, or its previous `since`) − 5 s — or, for a `catch_up` subscription, from the
reconnect time, handing the gap to `on_connected(gaps)` so the harness answers what it missed
oldest first — and calls `on_connected` (presence, catch-up). Queued work is untouched: the
link only moves events. A subscription the relay closes (`CLOSED`) is reported to `on_closed`
and forgotten.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from buzz.client import ConnectionLost, PublishResult, RelayClient, RelayError, Subscription
from buzz.client.http_bridge import BridgeClient
from buzz.core import kinds
from buzz.core.event import Event

log = logging.getLogger(__name__)

AUTH_TIMEOUT_S = 20.0
BACKOFF_MIN_S = 1.0
BACKOFF_MAX_S = 5.0
RECONNECT_OVERLAP_S = 5
EMPTY_CLOSED = "closed"  # how RelayClient reports a CLOSED whose message is empty
MAX_REOPEN = 3

OnEvent = Callable[[str, Event], Awaitable[None]]
OnClosed = Callable[[str, str], Awaitable[None]]
OnConnected = Callable[[dict[str, int]], Awaitable[None]]


def jittered(delay: float) -> float:
    """`delay` scaled by a random factor in [0.5, 1.0] (full jitter would allow 0)."""
    return delay * (0.5 + random.random() / 2)


def next_backoff(delay: float) -> float:
    """The un-jittered delay after a failed attempt that waited `delay`: doubled, capped."""
    return min(delay * 2, BACKOFF_MAX_S)


@dataclass
class _Sub:
    sub_id: str
    flt: dict[str, Any]  # without `since`
    since: int
    newest: int | None = None
    catch_up: bool = False
    window: int | None = None  # resume from now − window, never from `newest` (gift wraps)
    reopened: int = 0
    live: Subscription | None = None
    reader: asyncio.Task[None] | None = field(default=None, repr=False)

    def resume_since(self) -> int:
        if self.window is not None:
            # A gift wrap's time is random up to two days back: the newest one seen says
            # nothing of what arrived while we were away, so the whole window is read again.
            return max(self.since, int(time.time()) - self.window)
        base = self.newest if self.newest is not None else self.since
        return max(base - RECONNECT_OVERLAP_S, 0)


class RelayLink:
    """One authenticated, self-healing relay connection with named subscriptions."""

    def __init__(
        self,
        url: str,
        secret_key: str,
        auth_tags: Sequence[Sequence[str]],
        on_event: OnEvent,
        on_closed: OnClosed,
        on_connected: OnConnected,
    ) -> None:
        self.url = url
        self._secret = secret_key
        self._auth_tags = [list(t) for t in auth_tags]
        self._on_event = on_event
        self._on_closed = on_closed
        self._on_connected = on_connected
        self._subs: dict[str, _Sub] = {}
        self.bridge = BridgeClient(url, secret_key, auth_tag=self._auth_tags[0] if self._auth_tags else None)
        self._bridge_open = False
        self.client: RelayClient | None = None
        self.connected = asyncio.Event()
        self._stopping = False
        self.connections = 0  # successful connections so far (1 after the first)

    # -- lifecycle -------------------------------------------------------------------------
    async def run(self) -> None:
        """Connect, serve, reconnect, until `stop`. Never raises for relay or network errors."""
        await self._open_bridge()
        backoff = BACKOFF_MIN_S
        lost_at: float | None = None
        while not self._stopping:
            client = RelayClient(self.url, self._secret, auth_tags=self._auth_tags, timeout=AUTH_TIMEOUT_S)
            try:
                await asyncio.wait_for(client.connect(), AUTH_TIMEOUT_S)
            except Exception as exc:
                await client.close()
                delay = jittered(backoff)
                log.warning("relay connection failed (%s); retrying in %.1f s", _describe(exc), delay)
                await asyncio.sleep(delay)
                backoff = next_backoff(backoff)
                continue
            backoff = BACKOFF_MIN_S
            client.timeout = 10.0
            self.client = client
            self.connections += 1
            resumed = self.connections > 1
            if lost_at is not None:
                log.warning("relay connection regained after %.1f s", time.monotonic() - lost_at)
                lost_at = None
            try:
                gaps: dict[str, int] = {}
                for sub in list(self._subs.values()):
                    gap = await self._open(sub, resume=resumed)
                    if gap is not None:
                        gaps[sub.sub_id] = gap
                self.connected.set()
                await self._on_connected(gaps)
                await client.wait_closed()
            except Exception as exc:
                log.warning("relay session ended: %s", _describe(exc))
            finally:
                self.connected.clear()
                self.client = None
                await self._stop_readers()
                await client.close()
            if not self._stopping:
                lost_at = time.monotonic()
                log.warning("relay connection lost; reconnecting")

    async def _open_bridge(self) -> None:
        if not self._bridge_open:
            await self.bridge.__aenter__()
            self._bridge_open = True

    async def stop(self) -> None:
        """Close the connection and stop reconnecting."""
        self._stopping = True
        client = self.client
        if client is not None:
            await client.close()
        if self._bridge_open:
            self._bridge_open = False
            await self.bridge.__aexit__(None, None, None)

    async def _stop_readers(self) -> None:
        for sub in self._subs.values():
            task, sub.reader, sub.live = sub.reader, None, None
            if task is not None and task is not asyncio.current_task():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task

    # -- subscriptions ---------------------------------------------------------------------
    async def subscribe(
        self,
        sub_id: str,
        flt: Mapping[str, Any],
        since: int,
        catch_up: bool = False,
        window: int | None = None,
    ) -> None:
        """Open (or replace) the subscription `sub_id` with `flt` and `since` (unix seconds).
        A replacement is a new REQ with the same id (NIP-01), without a CLOSE first. A
        `catch_up` subscription resumes from the reconnect time and reports its gap; a
        `window` one resumes from `window` seconds before the reconnect (not before `since`)."""
        old = self._subs.pop(sub_id, None)
        if old is not None and old.reader is not None and old.reader is not asyncio.current_task():
            old.reader.cancel()
        sub = _Sub(
            sub_id, {k: v for k, v in flt.items() if k != "since"}, since, catch_up=catch_up, window=window
        )
        self._subs[sub_id] = sub
        if self.client is not None and self.connected.is_set():
            await self._open(sub, resume=False)

    async def unsubscribe(self, sub_id: str) -> None:
        sub = self._subs.pop(sub_id, None)
        if sub is None:
            return
        if sub.reader is not None and sub.reader is not asyncio.current_task():
            sub.reader.cancel()
        if sub.live is not None:
            with contextlib.suppress(Exception):
                await sub.live.close()

    def subscribed(self, sub_id: str) -> bool:
        return sub_id in self._subs

    async def _open(self, sub: _Sub, resume: bool, reconnect: bool = True) -> int | None:
        """REQ for `sub`; returns the start of the gap a catch-up subscription skipped."""
        assert self.client is not None
        gap = None
        since = sub.resume_since() if resume else sub.since
        if resume and reconnect and sub.catch_up:
            gap, since = since, int(time.time())
        sub.since = since
        flt = {**sub.flt, "since": since}
        sub.live = await self.client.subscribe([flt], sub_id=sub.sub_id)
        sub.reader = asyncio.create_task(self._read(sub, sub.live, self.client), name=f"sub-{sub.sub_id}")
        return gap

    async def _read(self, sub: _Sub, live: Subscription, client: RelayClient) -> None:
        try:
            async for event in live:
                if sub.newest is None or event.created_at > sub.newest:
                    sub.newest = event.created_at
                await self._on_event(sub.sub_id, event)
        except RelayError as exc:
            if client.closed or isinstance(exc, ConnectionLost) or self.client is not client:
                return  # connection loss: re-opened after the reconnect
            if (
                exc.message == EMPTY_CLOSED
                and self._subs.get(sub.sub_id) is sub
                and sub.reopened < MAX_REOPEN
            ):
                # A CLOSED without a reason is the relay acknowledging an earlier CLOSE of the same
                # sub id (removal followed by re-addition): it never refuses without a prefix.
                sub.reopened += 1
                await self._open(sub, resume=True, reconnect=False)
                return
            if self._subs.get(sub.sub_id) is sub:
                del self._subs[sub.sub_id]
                log.warning("relay closed subscription %s: %s", sub.sub_id, exc.message)
                await self._on_closed(sub.sub_id, exc.message)

    # -- requests --------------------------------------------------------------------------
    async def _client(self, timeout: float) -> RelayClient:
        try:
            await asyncio.wait_for(self.connected.wait(), timeout)
        except TimeoutError:
            raise ConnectionLost("not connected to the relay") from None
        if self.client is None:
            raise ConnectionLost("not connected to the relay")
        return self.client

    async def publish(self, event: Event, timeout: float = 10.0) -> PublishResult:
        """Send one event: ephemeral kinds and gift wraps (the bridge refuses both) over the
        WebSocket (waiting up to `timeout` for a connection), the rest through `POST /events`. Returns the relay's verdict; raises
        ConnectionLost / RelayError / BridgeError / TimeoutError when there is none."""
        if kinds.is_ephemeral(event.kind) or event.kind == kinds.GIFT_WRAP_KIND:
            client = await self._client(timeout)
            return await client.publish(event)
        await self._open_bridge()
        return await asyncio.wait_for(self.bridge.publish(event), timeout)

    async def query(self, filters: Iterable[Mapping[str, Any]], timeout: float = 10.0) -> list[Event]:
        """`POST /query`: stored events. Raises BridgeError / TimeoutError."""
        await self._open_bridge()
        return await asyncio.wait_for(self.bridge.query(filters), timeout)

    async def count(self, filters: Iterable[Mapping[str, Any]], timeout: float = 10.0) -> int:
        """`POST /count`. Raises BridgeError / TimeoutError."""
        await self._open_bridge()
        return await asyncio.wait_for(self.bridge.count(filters), timeout)

    async def current_client(self, timeout: float = 10.0) -> RelayClient:
        """The authenticated client of the current connection (for library calls that take one)."""
        return await self._client(timeout)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, RelayError):
        return exc.message
    if isinstance(exc, TimeoutError):
        return "timed out"
    return f"{type(exc).__name__}: {exc}"
