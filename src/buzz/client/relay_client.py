"""An async Nostr relay client: connect, NIP-42 AUTH, publish, query, count, subscribe.

Used by the CLI, the agent harness, the huddle client and the tests. One WebSocket, one
reader task that routes relay messages to whoever waits for them.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import aiohttp
import orjson

from buzz.core.event import Event
from buzz.core.nip42 import build_auth_event

FilterLike = Mapping[str, Any]


class RelayError(Exception):
    """The relay refused something; `message` is its wire text (e.g. "restricted: …")."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    @property
    def prefix(self) -> str:
        return self.message.split(":", 1)[0] if ":" in self.message else ""


class ConnectionLost(RelayError):
    """The WebSocket closed before the answer arrived."""


@dataclass(frozen=True, slots=True)
class PublishResult:
    event_id: str
    accepted: bool
    message: str


class Subscription:
    """A live REQ. Iterate for events; `eose` is set once stored results are done."""

    def __init__(self, client: RelayClient, sub_id: str) -> None:
        self.client = client
        self.sub_id = sub_id
        self.queue: asyncio.Queue[Event | None] = asyncio.Queue()
        self.eose = asyncio.Event()
        self.closed_reason: str | None = None

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._iter()

    async def _iter(self) -> AsyncIterator[Event]:
        while True:
            item = await self.queue.get()
            if item is None:
                if self.closed_reason:
                    raise RelayError(self.closed_reason)
                return
            yield item

    async def next(self, timeout: float = 5.0) -> Event:
        """The next event. Raises TimeoutError, or RelayError when the relay CLOSED the sub."""
        item = await asyncio.wait_for(self.queue.get(), timeout)
        if item is None:
            raise RelayError(self.closed_reason or "closed")
        return item

    async def close(self) -> None:
        await self.client._close_sub(self.sub_id)


class RelayClient:
    """`async with RelayClient(url, secret_key) as c:` connects and (with a key) authenticates."""

    def __init__(
        self,
        url: str,
        secret_key: str | None = None,
        *,
        auth: bool = True,
        auth_tags: Sequence[Sequence[str]] = (),
        timeout: float = 10.0,
    ) -> None:
        self.url = url
        self.secret_key = secret_key
        self.auth = auth and secret_key is not None
        self.auth_tags = [list(t) for t in auth_tags]
        self.timeout = timeout
        self.challenge: asyncio.Future[str] | None = None
        self.notices: list[str] = []
        self._session: aiohttp.ClientSession | None = None
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._reader: asyncio.Task[None] | None = None
        self._ok: dict[str, asyncio.Future[PublishResult]] = {}
        self._counts: dict[str, asyncio.Future[int]] = {}
        self._subs: dict[str, Subscription] = {}
        self._ids = itertools.count(1)
        self.pubkey: str | None = None

    async def __aenter__(self) -> RelayClient:
        await self.connect()
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    # -- connection ------------------------------------------------------------------------
    async def connect(self) -> None:
        """Open the socket, wait for the challenge, and AUTH when a key is set.

        Raises RelayError when AUTH is refused, aiohttp.ClientError when unreachable.
        """
        loop = asyncio.get_running_loop()
        self.challenge = loop.create_future()
        self._session = aiohttp.ClientSession()
        try:
            self._ws = await self._session.ws_connect(self.url, max_msg_size=0, autoping=True, heartbeat=None)
        except BaseException:
            await self._session.close()
            raise
        self._reader = asyncio.create_task(self._read())
        if self.auth:
            try:
                await self.authenticate()
            except BaseException:
                # A refused AUTH must not leave the socket, reader and session behind: they
                # would be torn down after the event loop closed, printing a traceback.
                await self.close()
                raise

    async def authenticate(self) -> None:
        assert self.challenge is not None and self.secret_key is not None
        challenge = await asyncio.wait_for(asyncio.shield(self.challenge), self.timeout)
        event = build_auth_event(self.secret_key, challenge, self.url)
        if self.auth_tags:
            event = Event.create(
                self.secret_key, event.kind, "", [*(list(t) for t in event.tags), *self.auth_tags]
            )
        result = await self._send_and_wait_ok("AUTH", event)
        if not result.accepted:
            raise RelayError(result.message)
        self.pubkey = event.pubkey

    async def close(self) -> None:
        if self._ws is not None:
            await self._ws.close()
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader
        if self._session is not None:
            await self._session.close()

    @property
    def closed(self) -> bool:
        return self._ws is None or self._ws.closed

    async def wait_closed(self) -> None:
        """Return once the connection has ended (the relay closed it, the network dropped, or
        `close` was called); every pending request and subscription has been failed by then."""
        if self._reader is not None:
            await asyncio.wait({self._reader})

    async def send_raw(self, message: Any) -> None:
        """Send a message as JSON (a list) or a raw text frame (a str)."""
        assert self._ws is not None
        await self._ws.send_str(message if isinstance(message, str) else orjson.dumps(message).decode())

    # -- requests --------------------------------------------------------------------------
    async def publish(self, event: Event) -> PublishResult:
        """Send EVENT and wait for its OK."""
        return await self._send_and_wait_ok("EVENT", event)

    async def query(self, filters: Iterable[FilterLike], timeout: float | None = None) -> list[Event]:
        """REQ, collect stored events until EOSE, then CLOSE. Raises RelayError on CLOSED."""
        sub = await self.subscribe(filters)
        try:
            await asyncio.wait_for(sub.eose.wait(), timeout or self.timeout)
        except TimeoutError:
            if sub.closed_reason:
                raise RelayError(sub.closed_reason) from None
            raise
        events: list[Event] = []
        while not sub.queue.empty():
            item = sub.queue.get_nowait()
            if item is not None:
                events.append(item)
        if sub.closed_reason:
            raise RelayError(sub.closed_reason)
        await sub.close()
        return events

    async def subscribe(self, filters: Iterable[FilterLike], sub_id: str | None = None) -> Subscription:
        """REQ and return the live subscription. A CLOSED from the relay ends its iteration."""
        sid = sub_id or f"s{next(self._ids)}"
        sub = Subscription(self, sid)
        self._subs[sid] = sub
        await self.send_raw(["REQ", sid, *[dict(f) for f in filters]])
        # A refusal (CLOSED) arrives before EOSE; wake waiters on eose either way.
        return sub

    async def count(self, filters: Iterable[FilterLike], timeout: float | None = None) -> int:
        sid = f"c{next(self._ids)}"
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._counts[sid] = fut
        await self.send_raw(["COUNT", sid, *[dict(f) for f in filters]])
        try:
            return await asyncio.wait_for(fut, timeout or self.timeout)
        finally:
            self._counts.pop(sid, None)

    async def _close_sub(self, sub_id: str) -> None:
        if self._subs.pop(sub_id, None) is not None and not self.closed:
            with contextlib.suppress(Exception):
                await self.send_raw(["CLOSE", sub_id])

    async def _send_and_wait_ok(self, verb: str, event: Event) -> PublishResult:
        fut: asyncio.Future[PublishResult] = asyncio.get_running_loop().create_future()
        self._ok[event.id] = fut
        try:
            await self.send_raw(f'["{verb}",{event.to_json()}]')
            return await asyncio.wait_for(fut, self.timeout)
        finally:
            self._ok.pop(event.id, None)

    # -- reader ----------------------------------------------------------------------------
    async def _read(self) -> None:
        assert self._ws is not None
        try:
            async for msg in self._ws:
                if msg.type != aiohttp.WSMsgType.TEXT:
                    continue
                try:
                    data = orjson.loads(msg.data)
                except orjson.JSONDecodeError:
                    continue
                if isinstance(data, list) and data:
                    self._route(data)
        finally:
            # A ban closes the socket right after NOTICE `blocked:` (relay.md §7.3): that is the
            # reason the caller must see, not a retryable "connection closed".
            blocked = next((n for n in reversed(self.notices) if n.startswith("blocked:")), None)
            self._fail_all(blocked or "connection closed", refused=blocked is not None)

    def _route(self, data: list[Any]) -> None:
        match data:
            case ["AUTH", str(challenge)]:
                if self.challenge is not None and not self.challenge.done():
                    self.challenge.set_result(challenge)
            case ["OK", str(event_id), bool(accepted), str(message)]:
                fut = self._ok.get(event_id)
                if fut is not None and not fut.done():
                    fut.set_result(PublishResult(event_id, accepted, message))
            case ["EVENT", str(sub_id), dict(obj)]:
                sub = self._subs.get(sub_id)
                if sub is not None:
                    sub.queue.put_nowait(Event.from_json(obj))
            case ["EOSE", str(sub_id)]:
                sub = self._subs.get(sub_id)
                if sub is not None:
                    sub.eose.set()
            case ["CLOSED", str(sub_id), str(message)]:
                sub = self._subs.pop(sub_id, None)
                if sub is not None:
                    sub.closed_reason = message or "closed"
                    sub.queue.put_nowait(None)
                    sub.eose.set()
                fut = self._counts.get(sub_id)
                if fut is not None and not fut.done():
                    fut.set_exception(RelayError(message))
            case ["COUNT", str(sub_id), {"count": int(n)}]:
                fut = self._counts.get(sub_id)
                if fut is not None and not fut.done():
                    fut.set_result(n)
            case ["NOTICE", str(message)]:
                self.notices.append(message)

    def _fail_all(self, reason: str, refused: bool = False) -> None:
        for fut in list(self._ok.values()) + list(self._counts.values()):
            if not fut.done():
                fut.set_exception(ConnectionLost(reason))
        if self.challenge is not None and not self.challenge.done():
            self.challenge.set_exception(ConnectionLost(reason))
        for sub in self._subs.values():
            if sub.closed_reason is None:
                sub.closed_reason = reason if refused else f"error: {reason}"
            sub.queue.put_nowait(None)
            sub.eose.set()
