"""One WebSocket connection: NIP-42 state, subscriptions, a send queue bounded in messages
and bytes, and an ordered lane of client messages whose unhandled frames are bounded in bytes.

Source rules: relay.md §7 (connection protocol), §7.9 (slow consumers), §7.1 items 4 and 6
(ping/pong, handler saturation). EVENT verification starts as soon as a frame is parsed, so
signatures of pipelined events are checked in parallel in the pool, while ingest, REQ and
COUNT run in arrival order: a REQ sent after an EVENT sees that event.

`Connection` is this module: its state, the send queue and its writer, the socket's life
(reading, pings, close) and the dispatch of each client message. Its jobs on the way in are
the parts it is made of, one module each, sharing the state declared here (one `__slots__`
layout; the parts declare none):
`intake` (frames → the ordered lane, handler slots, the inbound byte budget), `publish` (the
EVENT path: verdicts, pipelined writes and their OKs), `reqs` (REQ, COUNT, CLOSE and the
subscriptions they make) and `auth` (NIP-42: the challenge's deadline, AUTH and the session).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from aiohttp import WSCloseCode, WSMsgType

from buzz.core import messages, nip42
from buzz.core.limits import MAX_MISSED_PONGS
from buzz.core.messages import (
    AuthMessage,
    BadEventMessage,
    BadReqMessage,
    CloseMessage,
    EventMessage,
    ReqMessage,
)
from buzz.relay.auth.session import Session
from buzz.relay.connection.auth import Nip42Auth
from buzz.relay.connection.intake import INBOUND_BUFFER_BYTES, TEXT_FRAMES, Intake
from buzz.relay.connection.publish import NOTHING_IN_FLIGHT, Publishing, forget
from buzz.relay.connection.reqs import Reqs
from buzz.relay.delivery.subscriptions import LiveEvent, Subscription
from buzz.relay.transport.lean_ws import LeanWebSocket
from buzz.relay.transport.outbound import Outbound
from buzz.relay.transport.websocket import RelayWebSocket

if TYPE_CHECKING:
    from buzz.relay.connection.host import ConnectionHost

log = logging.getLogger(__name__)

WRITE_BATCH_MESSAGES = 256  # frames handed to the socket in one write
WRITE_BATCH_BYTES = 256 << 10
CLOSE_TIMEOUT_S = 2.0  # for the close frame to get out before the socket is dropped
_END_TYPES = (WSMsgType.CLOSE, WSMsgType.CLOSING, WSMsgType.CLOSED)
_NO_OWNERS: frozenset[str] = frozenset()  # shared: each `frozenset()` is a new 216-byte set
PING_FRAME = b"\x89\x00"  # FIN + ping, no payload, unmasked (RFC 6455 §5.5.2)


class Connection(Intake, Publishing, Reqs, Nip42Auth):
    """One client's connection. An idle one (authenticated, nothing in flight) holds no task
    of its own and no queue: the lane worker, the writer task, the outbound deque and their
    waiters exist only while there is work (issue 17: 10,000 idle connections)."""

    __slots__ = (
        "_auth_deadline",
        "_auth_handling",
        "_auth_strikes",
        "_auth_timer",
        "_closing",
        "_drops",
        "_ended",
        "_inbound_bytes",
        "_inbound_room",
        "_inflight",
        "_inflight_refs",
        "_inflight_room",
        "_lane",
        "_lane_task",
        "_loop",
        "_missed_pongs",
        "_out",
        "_ping_slot",
        "_session",
        "_slots",
        "_sub_tasks",
        "_timer_tasks",
        "_transport",
        "_writer_task",
        "challenge",
        "direct",
        "host",
        "owners",
        "pubkey",
        "relay",
        "subs",
        "ws",
    )

    def __init__(
        self,
        relay: ConnectionHost,
        ws: RelayWebSocket | LeanWebSocket,
        host: str | None,
        transport: asyncio.BaseTransport | None = None,
    ) -> None:
        self.relay = relay
        self.ws = ws
        self.host = host
        self._transport = transport  # aborted when a close cannot get through (`_close`)
        self.pubkey: str | None = None  # the first key authenticated (NIP-42); `session` has all
        self.owners: frozenset[str] = _NO_OWNERS  # whose ban ends this session too (`Admission`)
        self._session = Session(None, "ws")  # replaced at each successful AUTH
        # The connection lives on the loop it was made on; `asyncio.get_running_loop()` costs
        # a getpid() system call per call on Python 3.11, several times per event.
        self._loop = asyncio.get_running_loop()
        self.challenge = nip42.new_challenge()
        self._auth_strikes: nip42.AuthStrikes | None = None  # made at the first failed AUTH
        self.subs: dict[str, Subscription] = {}
        self._sub_tasks: dict[str, asyncio.Task[None]] = {}
        self._out = Outbound(relay.config.send_buffer, relay.config.send_buffer_bytes)
        self._drops = 0
        # (msg, early, bytes, when its prechecks passed: (session, second) or None); None while empty
        self._lane: deque[tuple[Any, Any, int, Any]] | None = None
        self._lane_task: asyncio.Task[None] | None = None  # runs while the lane holds frames
        self._inbound_bytes = 0  # frames read but not yet handled
        self._inbound_room: asyncio.Future[None] | None = None  # the reader waiting for room
        # Pipelined events not answered yet: their write futures (a task while one must wait).
        self._inflight: set[asyncio.Future[Any]] = NOTHING_IN_FLIGHT
        self._inflight_refs: dict[object, int] = {}  # what in-flight events write (`writes_of`) → count
        self._inflight_room: asyncio.Future[None] | None = None  # the lane waiting for one to settle
        self._slots = 0  # handler slots this connection holds
        self._missed_pongs = 0
        self._closing = False
        self._ping_slot: int | None = None  # in `relay.pings` while serving
        # The AUTH deadline (relay.md §7.3) measures the client: an AUTH read by then is in time,
        # however long the relay then takes to verify it and read its admission (a loaded store
        # once closed logins that had answered in time). `_auth_handling`: AUTHs read, not answered.
        self._auth_timer: asyncio.Handle | None = None
        self._auth_deadline = 0.0  # loop time
        self._auth_handling = 0
        self._writer_task: asyncio.Task[None] | None = None  # runs while `_out` holds messages
        self._timer_tasks: set[asyncio.Task[Any]] | None = None  # None while none runs
        # The transport while a frame may be written to it at once (not paused, nothing queued
        # or being written, not closing), else None: a flag kept by `_refresh_direct` on each
        # change, read by live fan-out for every delivery (`FanOut`).
        self.direct: Any = None
        self._ended: Callable[[], Any] | None = None  # `serve`: what runs when the socket is gone

    def _refresh_direct(self) -> None:
        self.direct = (
            None
            if self._closing or self._writer_task is not None or len(self._out)
            else self.ws.direct_transport()
        )

    # -- outbound ------------------------------------------------------------------------------
    def send(self, text: str) -> None:
        """Enqueue without blocking; a full queue drops and counts (relay.md §7.9)."""
        if self._closing:
            return
        if self._out.offer(text):
            self._drops = 0
            self._kick_writer()
            return
        self._drops += 1
        self.relay.stats["dropped_messages"] += 1
        self.relay.telemetry.dropped_message(self.pubkey)
        if self._drops >= self.relay.config.slow_client_grace:
            log.warning("closing slow consumer %s after %d drops", self.pubkey, self._drops)
            self.close_soon()

    def send_live(self, sub_id: str, sub_id_json: bytes, live: LiveEvent) -> None:
        """`send` for live fan-out: the EVENT frame is written straight to the socket when
        nothing is queued ahead of it and the socket takes it without waiting (no hop through
        the writer task, no coroutine per subscriber); a socket that does not keep up pauses,
        and then `send` queues and drops."""
        transport = self.direct
        if transport is not None:
            transport.write(live.frame(sub_id_json))
            return
        self.send(live.text(sub_id))

    async def send_wait(self, text: str) -> None:
        """Enqueue, waiting for room: for this connection's own stored results, which may be
        larger than the queue (a REQ may return 1000 events per filter). Live fan-out from
        other connections uses `send`, which never waits."""
        if not self._closing:
            await self._out.put(text)
            self._kick_writer()

    def overflow(self) -> None:
        """A subscription's hold buffer is full (issue 9 item 2): the slow-consumer close."""
        self.relay.stats["dropped_messages"] += 1
        self.relay.telemetry.dropped_message(self.pubkey)
        log.warning("closing slow consumer %s: held matches over %d bytes", self.pubkey, self._out.max_bytes)
        self.close_soon()

    def close_soon(
        self, code: int = 1008, message: bytes = b"slow consumer", *, last_words: bool = False
    ) -> None:
        """Close the connection from any task. A slow consumer's queue is thrown away (nothing
        more will be sent: give the memory back now); with `last_words` what is queued — the
        answer that explains the close, e.g. `blocked:` — is sent first."""
        if not self._closing:
            self._closing = True
            self.direct = None
            if not last_words:
                self._out.clear()
            self._loop.create_task(self._close(code, message))

    async def _close(self, code: int, message: bytes) -> None:
        """Close with `code`; a peer that does not read cannot take the close frame either, so
        after CLOSE_TIMEOUT_S the socket is dropped."""
        try:
            async with asyncio.timeout(CLOSE_TIMEOUT_S):
                while len(self._out):  # last words still queued: the writer drains them
                    await asyncio.sleep(0.005)
                await self.ws.close(code=code, message=message)
        except TimeoutError:
            log.info("peer did not take the close frame in %.0f s: dropping the socket", CLOSE_TIMEOUT_S)
            if self._transport is not None:
                self._transport.abort()

    def _kick_writer(self) -> None:
        if self._writer_task is None:
            self.direct = None  # frames written directly now would overtake the queued ones
            self._writer_task = self._loop.create_task(self._writer())

    async def _writer(self) -> None:
        """Started by the first queued message, ends when the queue is empty. It first runs one
        loop turn after that message, so what queued meanwhile (a group commit's OKs, a REQ's
        results) goes out together."""
        try:
            while texts := self._out.take_ready(WRITE_BATCH_MESSAGES, WRITE_BATCH_BYTES):
                await self.ws.send_strs(texts)
        except Exception as exc:  # the socket went: nothing more can be sent on it
            log.debug("write failed: %r", exc)
            self._out.clear()
        finally:
            self._writer_task = None
            self._refresh_direct()

    # -- lifecycle -----------------------------------------------------------------------------
    def _open(self) -> None:
        """Start serving: the ping wheel, the AUTH deadline and challenge, the writable watch."""
        # Timers, not sleeping tasks (pings: the relay's one wheel); the writer and lane tasks run
        # only while they have work.
        loop = self._loop
        self._ping_slot = self.relay.pings.add(self)
        self._auth_deadline = loop.time() + self.relay.config.auth_timeout_s
        self._auth_timer = loop.call_at(self._auth_deadline, self._auth_due)
        self.send(messages.auth_challenge(self.challenge))
        self.ws.watch_writable(self._refresh_direct)  # `_release` stops the watch
        self._refresh_direct()

    async def run(self) -> None:
        """Serve an aiohttp WebSocket until it closes."""
        try:
            self._open()
            await self._read_frames()
        finally:
            await self._release()

    def serve(self, ended: Callable[[], Any]) -> None:
        """Serve a `LeanWebSocket`, which pushes what it reads (`on_message`, `on_pong`,
        `on_lost`): no task waits for an idle connection. `ended` runs once it is over."""
        self._ended = ended
        self._open()

    def on_message(self, data: str | bytes, binary: bool = False) -> None:
        """One message read by a `LeanWebSocket`: text, or bytes from a binary frame."""
        if binary:
            self._on_binary(data)  # type: ignore[arg-type]
        else:
            self._on_frame(data)  # type: ignore[arg-type]
        if self._inbound_bytes > INBOUND_BUFFER_BYTES and self._inbound_room is None:
            # The budget (`_inbound_budget`) without a waiting reader: stop reading until the
            # lane has handled enough; the client's TCP window holds the rest.
            self.ws.pause_reading()
            self._inbound_room = self._loop.create_future()
            self._inbound_room.add_done_callback(self._room_made)

    def _room_made(self, _: asyncio.Future[None]) -> None:
        if self._closing:
            return
        if self._inbound_bytes > INBOUND_BUFFER_BYTES:
            self._inbound_room = self._loop.create_future()
            self._inbound_room.add_done_callback(self._room_made)
        else:
            self.ws.resume_reading()

    def on_pong(self) -> None:
        self._missed_pongs = 0

    def on_lost(self) -> None:
        """The `LeanWebSocket`'s socket is gone: release everything, then `ended`."""
        self._loop.create_task(self._end())

    async def _end(self) -> None:
        try:
            await self._release()
        finally:
            ended, self._ended = self._ended, None
            if ended is not None:
                ended()

    async def _release(self) -> None:
        self._closing = True
        self.direct = None
        self.ws.unwatch_writable()
        self.relay.pings.remove(self, self._ping_slot)
        if self._auth_timer is not None:
            self._auth_timer.cancel()
        helpers = [t for t in (self._writer_task, self._lane_task) if t is not None]
        helpers += [t for t in self._timer_tasks or () if not t.done()]
        for sub in list(self.subs.values()):
            self._drop_sub(sub.sub_id)
        for task in helpers + list(self._sub_tasks.values()) + list(self._inflight):
            task.cancel()
        for task in helpers:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for queued in self._lane or ():  # frames never handled: nobody will await their checks
            forget(queued[1])
        self._lane = None
        self._release_all_slots()

    def _on_binary(self, data: bytes) -> None:
        """A binary frame is read as text when UTF-8 (relay.md §7.1 item 1)."""
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            self.send(messages.notice(f"invalid message: binary frame is not valid UTF-8; {TEXT_FRAMES}"))
        else:
            self._on_frame(text, binary=True)

    async def _read_frames(self) -> None:
        # `receive()` rather than `async for`: an idle connection waits here for its life, and
        # each suspended coroutine in that chain is memory (issue 17); the types that end the
        # loop are those `WebSocketResponse.__anext__` stops at.
        ws = self.ws
        while True:
            msg = await ws.receive()
            if msg.type in _END_TYPES:
                break
            if self._inbound_bytes > INBOUND_BUFFER_BYTES:
                await self._inbound_budget()
            if msg.type == WSMsgType.TEXT:
                self._on_frame(msg.data)
            elif msg.type == WSMsgType.BINARY:
                self._on_binary(msg.data)
            elif msg.type == WSMsgType.PING:
                await ws.pong(msg.data)
            elif msg.type == WSMsgType.PONG:
                self._missed_pongs = 0
            elif msg.type == WSMsgType.ERROR:
                # A refused oversized frame is told by the close line, with the relay's limit
                # (`RelayWebSocket.close`); aiohttp's text names its reader's, one byte more.
                if getattr(msg.data, "code", None) != WSCloseCode.MESSAGE_TOO_BIG:
                    log.info("websocket error: %s", ws.exception())
                break
            del msg  # an idle connection must not keep its last frame (e.g. its AUTH) alive

    def ping_due(self) -> None:
        """The relay's ping wheel: every PING_INTERVAL_S (relay.md §7.1 item 4)."""
        if self._closing:
            return
        if self._missed_pongs >= MAX_MISSED_PONGS:
            self._spawn(self._close(1001, b"ping timeout"))
            return
        self._missed_pongs += 1
        transport = self.direct
        if transport is not None:
            transport.write(PING_FRAME)  # what `ws.ping()` writes, without a task for it
        else:
            self._spawn(self.ws.ping())

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Run a timer's action as a task, kept (and cancelled on close) like the helpers."""
        task = self._loop.create_task(coro)
        if self._timer_tasks is None:
            self._timer_tasks = set()
        self._timer_tasks.add(task)
        task.add_done_callback(self._timer_done)

    def _timer_done(self, task: asyncio.Task[Any]) -> None:
        if self._timer_tasks is not None:
            self._timer_tasks.discard(task)
            if not self._timer_tasks:
                self._timer_tasks = None
        if not task.cancelled() and task.exception() is not None:  # e.g. a ping on a closing socket
            log.debug("connection timer action failed: %r", task.exception())

    async def _dispatch(self, msg: Any, early: Any) -> None:
        match msg:
            case EventMessage():
                await self._on_event(msg, early)
            case BadEventMessage():
                if msg.type == "AUTH":
                    self._auth_failed_now()  # a malformed AUTH counts as a failed attempt
                self.send(messages.ok(msg.event_id, False, str(msg.error)))
                self.relay.telemetry.event_answered(msg.event_id, None, None, False, str(msg.error))
            case ReqMessage(type="REQ"):
                await self._on_req(msg)
            case ReqMessage(type="COUNT"):
                await self._on_count(msg)
            case BadReqMessage():
                self.send(messages.closed(msg.sub_id, str(msg.error)))
                self.relay.telemetry.req_answered(msg.type, msg.sub_id, str(msg.error))
            case CloseMessage():
                # NIP-01: CLOSED is the relay's own ending of a subscription; the client's CLOSE
                # is not answered (issue 25 item 8).
                self._drop_sub(msg.sub_id)
            case AuthMessage():
                try:
                    await self._on_auth(msg)
                finally:
                    self._auth_answered()
