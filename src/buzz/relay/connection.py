"""One WebSocket connection: NIP-42 state, subscriptions, a send queue bounded in messages
and bytes, and an ordered lane of client messages whose unhandled frames are bounded in bytes.

Source rules: relay.md §7 (connection protocol), §7.9 (slow consumers), §7.1 items 4 and 6
(ping/pong, handler saturation). EVENT verification starts as soon as a frame is parsed, so
signatures of pipelined events are checked in parallel in the pool, while ingest, REQ and
COUNT run in arrival order: a REQ sent after an EVENT sees that event.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
from collections import deque
from collections.abc import Awaitable, Coroutine
from typing import TYPE_CHECKING, Any

from aiohttp import WSCloseCode, WSMsgType

from buzz.core import kinds, messages, nip42
from buzz.core.errors import AuthRequired, Blocked, BuzzError, ServerError
from buzz.core.event import Event
from buzz.core.limits import MAX_AUTH_PUBKEYS, MAX_MISSED_PONGS, MAX_SUBSCRIPTIONS
from buzz.core.messages import (
    AuthMessage,
    BadEventMessage,
    BadReqMessage,
    CloseMessage,
    EventMessage,
    ProtocolViolation,
    ReqMessage,
    parse_client_message,
)
from buzz.core.stored import StoredEvent
from buzz.core.visibility import Reader
from buzz.relay.ingest import Outcome
from buzz.relay.outbound import Outbound
from buzz.relay.rules.base import Plan
from buzz.relay.rules.messages import reaction_target
from buzz.relay.session import Session
from buzz.relay.subscriptions import LiveEvent, Subscription
from buzz.relay.websocket import RelayWebSocket
from buzz.store.base import StoreError

if TYPE_CHECKING:
    from buzz.relay.relay import Relay

log = logging.getLogger(__name__)

NOT_AUTHENTICATED = "auth-required: not authenticated"
TEXT_FRAMES = "send NIP-01 messages as JSON in text frames"  # ends a refused binary frame's NOTICE
MAX_PIPELINED_EVENTS = 256  # per connection, awaiting their commit
# Global-only kinds never derive a channel or read other events while being validated, so
# consecutive ones from one connection may wait for their commits together.
PIPELINABLE_KINDS = kinds.GLOBAL_ONLY_KINDS - {kinds.DELETION_KIND}
# Channel content kinds whose validation reads only channel state (changed by admin kinds,
# which are never pipelined), the events their `e` tags name (and those events' thread rows)
# and, for a reaction, the active-reaction entry it would add: pipelined too unless an event
# still in flight on the connection writes one of those (docs/decisions.md 76, 100).
INDEPENDENT_CHANNEL_KINDS = frozenset({9, 7, 40003})
SENT_IDS_GRACE_S = 5.0  # how long after EOSE a stored result still suppresses its live copy
INBOUND_BUFFER_BYTES = 8 << 20  # frames read ahead of their handling, per connection
WRITE_BATCH_MESSAGES = 256  # frames handed to the socket in one write
WRITE_BATCH_BYTES = 256 << 10
CLOSE_TIMEOUT_S = 2.0  # for the close frame to get out before the socket is dropped
_END_TYPES = (WSMsgType.CLOSE, WSMsgType.CLOSING, WSMsgType.CLOSED)
PING_FRAME = b"\x89\x00"  # FIN + ping, no payload, unmasked (RFC 6455 §5.5.2)


class Connection:
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
        relay: Relay,
        ws: RelayWebSocket,
        host: str | None,
        transport: asyncio.BaseTransport | None = None,
    ) -> None:
        self.relay = relay
        self.ws = ws
        self.host = host
        self._transport = transport  # aborted when a close cannot get through (`_close`)
        self.pubkey: str | None = None  # the first key authenticated (NIP-42); `session` has all
        self.owners: frozenset[str] = frozenset()  # whose ban ends this session too (`Admission`)
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
        self._inflight: set[asyncio.Future[Any]] = set()
        self._inflight_refs: dict[object, int] = {}  # what in-flight events write (`_writes`) → count
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
    async def run(self) -> None:
        """Serve the connection until it closes."""
        # Timers, not sleeping tasks (pings: the relay's one wheel); the writer and lane tasks run
        # only while they have work.
        loop = self._loop
        self._ping_slot = self.relay.pings.add(self)
        self._auth_deadline = loop.time() + self.relay.config.auth_timeout_s
        self._auth_timer = loop.call_at(self._auth_deadline, self._auth_due)
        self.send(messages.auth_challenge(self.challenge))
        try:
            self.ws.watch_writable(self._refresh_direct)  # `finally` stops the watch
            self._refresh_direct()
            await self._read_frames()
        finally:
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
            elif msg.type == WSMsgType.BINARY:  # read as text when UTF-8 (relay.md §7.1 item 1)
                try:
                    text = msg.data.decode("utf-8")
                except UnicodeDecodeError:
                    self.send(
                        messages.notice(f"invalid message: binary frame is not valid UTF-8; {TEXT_FRAMES}")
                    )
                else:
                    self._on_frame(text, binary=True)
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

    async def _inbound_budget(self) -> None:
        """Stop reading while the frames read but not handled hold INBOUND_BUFFER_BYTES: the
        client's own TCP window then holds the rest (backpressure, nothing dropped)."""
        while self._inbound_bytes > INBOUND_BUFFER_BYTES:
            if self._inbound_room is None:
                self._inbound_room = self._loop.create_future()
            await self._inbound_room

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

    def _auth_due(self) -> None:
        # Decided one loop turn later: after a stall of this process, a frame the loop read in
        # the same turn as this timer reaches `_on_frame` first, and counts as in time.
        self._auth_timer = self._loop.call_soon(self._auth_expired)

    def _auth_expired(self) -> None:
        self._auth_timer = None
        if self.pubkey is None and not self._auth_handling and not self._closing:
            self._spawn(self._close(1008, b"auth-required: authentication timeout"))

    def _auth_answered(self) -> None:
        """An AUTH is answered: if none authenticated the connection and the deadline went by
        meanwhile, it is enforced now (a refused AUTH past the deadline closes it)."""
        self._auth_handling -= 1
        if self.pubkey is None and not self._auth_handling and self._auth_timer is None and not self._closing:
            self._auth_timer = self._loop.call_at(self._auth_deadline, self._auth_due)

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

    # -- inbound -------------------------------------------------------------------------------
    def _on_frame(self, frame: str, binary: bool = False) -> None:
        """Parse one frame and queue it on the lane; `binary` when it came as a binary frame
        (then a refusal says so: a client that sends binary may not know NIP-01 is text)."""
        if not self._acquire_slot():
            self.send(messages.notice("rate-limited: too many concurrent requests"))
            return
        try:
            msg = parse_client_message(frame)
        except ProtocolViolation as exc:
            self._release_slot()
            if binary and type(exc) is ProtocolViolation:
                self.send(messages.notice(f"invalid message: binary frame: {exc.args[0]}; {TEXT_FRAMES}"))
            else:
                self.send(messages.notice(str(exc)))
            return
        except Exception:  # never let odd input kill the connection or leak its slot
            log.exception("unexpected failure parsing a frame")
            self._release_slot()
            self.send(messages.notice("invalid message: could not be parsed"))
            return
        early: Any = None
        checked: tuple[Session, int] | None = None
        if isinstance(msg, EventMessage):
            early, checked = self._start_verify(msg)
        elif isinstance(msg, AuthMessage):
            self._auth_handling += 1  # read: in time for the AUTH deadline (`_auth_answered`)
        size = sys.getsizeof(frame)
        self._inbound_bytes += size
        if self._lane is None:
            self._lane = deque()
        self._lane.append((msg, early, size, checked))
        if self._lane_task is None:
            self._lane_task = self._loop.create_task(self._lane_worker())

    # Handler slots (relay.md §7.1 item 6) are counted per connection as well, so whatever a
    # connection still holds when it closes (queued or in-flight messages) goes back at once.
    def _acquire_slot(self) -> bool:
        if not self.relay.try_acquire_handler():
            return False
        self._slots += 1
        return True

    def _release_slot(self) -> None:
        if self._slots > 0:
            self._slots -= 1
            self.relay.release_handler()

    def _release_all_slots(self) -> None:
        while self._slots > 0:
            self._release_slot()

    def _start_verify(
        self, msg: EventMessage
    ) -> tuple[Awaitable[StoredEvent] | BuzzError, tuple[Session, int] | None]:
        """Run the cheap prechecks now and start verification in the pool (pipelining). Also
        returns the session and clock second they passed with."""
        session = self.session
        try:
            second = self.relay.ingest.precheck(msg.event, session)
        except BuzzError as exc:
            # Kept in the lane for its text only. Its traceback would hold this frame and so
            # `_on_frame`'s, whose `early` is this exception: a cycle that keeps the whole frame
            # (up to the frame limit) alive until a full garbage collection (soak: +70 MB).
            return exc.with_traceback(None), None
        return self.relay.ingest.verify_soon(msg.event, self._loop), (session, second)

    @property
    def session(self) -> Session:
        return self._session

    @property
    def reader(self) -> Reader:
        """Who reads on this connection: its one key, or every key it authenticated."""
        return self._session.reader

    @property
    def pubkeys(self) -> frozenset[str]:
        """Every key this connection authenticated (empty before AUTH)."""
        session = self._session
        return frozenset() if session.pubkey is None else session.also | {session.pubkey}

    async def _lane_worker(self) -> None:
        """Handles the lane's frames in order; started by `_on_frame`, ends when the lane is
        empty (the check and the end are one synchronous step: no frame is left behind)."""
        try:
            await self._run_lane()
        finally:
            self._lane_task = None
            if not self._lane:
                self._lane = None

    async def _run_lane(self) -> None:
        while self._lane:
            msg, early, size, checked = self._lane.popleft()
            try:
                if isinstance(msg, EventMessage) and not isinstance(early, BuzzError):
                    kind = msg.event.kind
                    if kind in PIPELINABLE_KINDS:
                        await self._pipeline(msg, early, size, checked, _writes(msg.event))
                        continue
                    if kind in INDEPENDENT_CHANNEL_KINDS:
                        # It reads what an event still in flight writes: that one commits first
                        # (and every event before it: commits keep arrival order).
                        reads = _reads(msg.event)
                        while self._writes_inflight(reads):
                            await self._settled_once()
                        await self._pipeline(msg, early, size, checked, _writes(msg.event))
                        continue
                if self._inflight:
                    # Anything else may read what those events write: let them commit first.
                    await self._inflight_at_most(0)
                await self._handle(msg, early, size)
            except BaseException:  # cancelled at close, maybe before its check was awaited
                forget(early)
                raise

    async def _pipeline(
        self, msg: EventMessage, early: Any, size: int, checked: tuple[Session, int], refs: tuple[object, ...]
    ) -> None:
        """A pipelined EVENT: checked, verified and planned (the rules) here, in the lane, and
        its write queued at once, behind this connection's earlier writes (the store's FIFO),
        then the lane moves on. Verification of the frames behind it already runs: one wait per
        verified batch, not one per event. The rest (fan-out, the OK) runs when the write is
        done (`_written`), without a task unless it must wait (a follow-up, a membership read)."""
        event = msg.event
        ingest = self.relay.ingest
        try:
            # The session may have changed while queued (AUTH ahead of this EVENT): recheck,
            # unless nothing the prechecks read has (same session, same clock second).
            session = self.session
            if checked[0] is not session or checked[1] != int(time.time()):
                ingest.precheck(event, session)
            plan = await ingest.plan(await early, session)
            started = time.perf_counter()
            written = ingest.write_soon(plan)
        except Exception as exc:
            forget(early)  # a recheck that failed before `await early`: nobody else will
            early = None  # the future holds `exc`, whose traceback holds this frame: break the cycle
            outcome = ingest.refusal(event.id, exc)
            self._answer(event, outcome.accepted, outcome.message)
            self._frame_done(size)
            return
        counts = self._inflight_refs
        for r in refs:
            counts[r] = counts.get(r, 0) + 1
        self._inflight.add(written)
        written.add_done_callback(lambda done: self._written(event, plan, started, size, refs, done))
        if len(self._inflight) >= MAX_PIPELINED_EVENTS:
            await self._inflight_at_most(MAX_PIPELINED_EVENTS - 1)

    def _written(
        self,
        event: Event,
        plan: Plan,
        started: float,
        size: int,
        refs: tuple[object, ...],
        done: asyncio.Future[Any],
    ) -> None:
        """A pipelined event's write is done: its fan-out and OK now, or in a task when they
        must wait; then its bookkeeping. Nothing is answered once the connection closed
        (`run` cancels what is in flight)."""
        if done.cancelled():
            self._settle(done, size, refs)
            return
        try:
            result = self.relay.ingest.finish(plan, done, started)
        except Exception:  # `finish` never raises; a bookkeeping slip must not leak the slot
            log.exception("handler failed")
            result = Outcome(False, "error: internal server error")
        if isinstance(result, Outcome):
            self._answer(event, result.accepted, result.message)
            self._settle(done, size, refs)
            return
        self._inflight.discard(done)
        task = self._loop.create_task(self._finish(event, result, size, refs))
        self._inflight.add(task)

    async def _finish(
        self, event: Event, finishing: Coroutine[Any, Any, Outcome], size: int, refs: tuple[object, ...]
    ) -> None:
        try:
            outcome = await finishing
            self._answer(event, outcome.accepted, outcome.message)
        except Exception:
            log.exception("handler failed")
            self.send(messages.ok(event.id, False, "error: internal server error"))
        finally:
            self._settle(asyncio.current_task(self._loop), size, refs)  # type: ignore[arg-type]

    def _settle(self, item: asyncio.Future[Any], size: int, refs: tuple[object, ...]) -> None:
        """The bookkeeping of a pipelined event that is answered (or dropped at close)."""
        self._inflight.discard(item)
        counts = self._inflight_refs
        for r in refs:
            n = counts[r] - 1
            if n > 0:
                counts[r] = n
            else:
                del counts[r]
        waiting, self._inflight_room = self._inflight_room, None
        if waiting is not None and not waiting.done():
            waiting.set_result(None)
        self._frame_done(size)

    def _writes_inflight(self, reads: tuple[object, ...]) -> bool:
        counts = self._inflight_refs
        return bool(counts) and any(r in counts for r in reads)

    async def _settled_once(self) -> None:
        """Wait until some pipelined event in flight settles (one wake-up per batch of them)."""
        room = self._inflight_room
        if room is None or room.done():
            room = self._inflight_room = self._loop.create_future()
        await room

    async def _inflight_at_most(self, limit: int) -> None:
        """Wait until at most `limit` pipelined events are still in flight."""
        while len(self._inflight) > limit:
            await self._settled_once()

    async def _handle(self, msg: Any, early: Any, size: int) -> None:
        try:
            await self._dispatch(msg, early)
        except Exception:
            log.exception("handler failed")
            if isinstance(msg, EventMessage):
                self.send(messages.ok(msg.event.id, False, "error: internal server error"))
        finally:
            self._frame_done(size)

    def _frame_done(self, size: int) -> None:
        """A frame is handled: its handler slot and its bytes of the inbound budget go back."""
        self._release_slot()
        self._inbound_bytes -= size
        room, self._inbound_room = self._inbound_room, None
        if room is not None and not room.done():
            room.set_result(None)

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

    async def _on_event(self, msg: EventMessage, early: Any) -> None:
        event = msg.event
        accepted, message = await self._event_verdict(event, early)
        self._answer(event, accepted, message)

    def _answer(self, event: Event, accepted: bool, message: str) -> None:
        self.relay.telemetry.event_answered(event.id, event.kind, event.pubkey, accepted, message)
        self.send(messages.ok(event.id, accepted, message))

    async def _event_verdict(self, event: Event, early: Any) -> tuple[bool, str]:
        if isinstance(early, BuzzError):
            return False, str(early)
        # The session may have changed while queued (AUTH ahead of this EVENT): recheck.
        try:
            self.relay.ingest.precheck(event, self.session)
            verified = await early
        except BuzzError as exc:
            forget(early)  # the recheck failed before `await early`: nobody else will
            early = None  # the future holds `exc`, whose traceback holds this frame: break the cycle
            return False, str(exc)
        outcome = await self.relay.ingest.submit(event, self.session, verified)
        return outcome.accepted, outcome.message

    def _auth_failed_now(self) -> None:
        if self._auth_strikes is None:
            self._auth_strikes = nip42.AuthStrikes()
        self._auth_strikes.fail(time.monotonic())

    async def _on_auth(self, msg: AuthMessage) -> None:
        """NIP-42: each valid AUTH adds its pubkey to the session (several per connection, up
        to MAX_AUTH_PUBKEYS); failed attempts are rate-limited, never final (issue 25 item 2)."""
        event = msg.event
        wait = 0 if self._auth_strikes is None else self._auth_strikes.wait_s(time.monotonic())
        if wait:
            self.send(
                messages.ok(
                    event.id, False, f"rate-limited: too many failed AUTH attempts; retry in {wait} s"
                )
            )
            return
        session = self._session
        added = session.pubkey is None or not session.signs_as(event.pubkey)
        if added and len(self.pubkeys) >= MAX_AUTH_PUBKEYS:
            self.send(
                messages.ok(event.id, False, f"restricted: at most {MAX_AUTH_PUBKEYS} pubkeys per connection")
            )
            return
        try:
            nip42.check_auth_event(event, self.challenge, self.relay.relay_urls(self.host), int(time.time()))
            try:
                await self.relay.ingest.verify(event)
            except BuzzError:
                raise nip42.VERIFICATION_FAILED() from None  # a bad id or signature is a failed AUTH
            admitted = await self.relay.admission(event)  # Restricted / Blocked keep their own text
        except BuzzError as exc:
            self._auth_failed_now()
            if isinstance(exc, AuthRequired):  # admission verdicts are logged by Relay.admit
                self.relay.telemetry.auth_answered(event.pubkey, str(exc))
            self.send(messages.ok(event.id, False, str(exc)))
            if isinstance(exc, Blocked):
                self.close_soon(code=1008, message=b"blocked", last_words=True)
            return
        pubkey = admitted.pubkey
        self.owners = self.owners | admitted.owners  # a ban of any key's owner ends the session
        session = self._session  # AUTHs are handled in order, but re-read after the awaits
        if session.pubkey is None:
            self.pubkey = pubkey
            self._session = Session(pubkey, "ws")
            if self._auth_timer is not None:
                self._auth_timer.cancel()  # the AUTH deadline is met: its handle need not live on
                self._auth_timer = None
        elif not session.signs_as(pubkey):
            self._session = Session(session.pubkey, "ws", session.also | {pubkey})
        self.send(messages.ok(event.id, True, ""))

    # -- subscriptions -------------------------------------------------------------------------
    def _drop_sub(self, sub_id: str) -> None:
        sub = self.subs.pop(sub_id, None)
        if sub is not None:
            self.relay.index.remove(sub)
        task = self._sub_tasks.pop(sub_id, None)
        if task is not None:
            task.cancel()

    def evict(self, sub_id: str, message: str) -> None:
        """Remove a live subscription and tell the client why (relay.md §4.7)."""
        if sub_id in self.subs:
            self._drop_sub(sub_id)
            self.send(messages.closed(sub_id, message))

    async def _on_req(self, msg: ReqMessage) -> None:
        sub_id = msg.sub_id
        if self.pubkey is None:
            self.send(messages.closed(sub_id, NOT_AUTHENTICATED))
            self.relay.telemetry.req_answered("REQ", sub_id, NOT_AUTHENTICATED)
            return
        if sub_id not in self.subs and sub_id not in self._sub_tasks and len(self.subs) >= MAX_SUBSCRIPTIONS:
            self.send(messages.closed(sub_id, "error: too many subscriptions"))
            self.relay.telemetry.req_answered("REQ", sub_id, "error: too many subscriptions")
            return
        self._drop_sub(sub_id)  # a REQ with an existing id replaces it (relay.md §7.5 item 4)
        try:
            searching = await self.relay.reads.check(msg.filters, self.reader)
        except BuzzError as exc:
            self.send(messages.closed(sub_id, str(exc)))
            self.relay.telemetry.req_answered("REQ", sub_id, str(exc))
            return
        self.relay.telemetry.req_answered("REQ", sub_id, None)
        if searching:
            self._sub_tasks[sub_id] = self._loop.create_task(self._stored_phase(sub_id, msg, None))
            return
        sub = Subscription(self, sub_id, msg.filters, self.relay.config.send_buffer_bytes)
        self.subs[sub_id] = sub
        self.relay.index.add(sub)  # before the stored query: nothing committed meanwhile is missed
        self._sub_tasks[sub_id] = self._loop.create_task(self._stored_phase(sub_id, msg, sub))

    async def _stored_phase(self, sub_id: str, msg: ReqMessage, sub: Subscription | None) -> None:
        sent: set[str] = sub.sent_ids if sub is not None else set()
        if sub is not None and self.relay.bus is not None:
            # relay.md §12.4: channel topics confirmed before the query, so no gap across replicas
            await self.relay.bus.wait_subscribed(sub.filters)
        try:
            results = await self.relay.reads.stored(msg.filters, self.reader)
        except ServerError as exc:  # e.g. presence while Redis fails: fail closed (issue 9 item 6)
            if self._sub_tasks.get(sub_id) is asyncio.current_task(self._loop):
                del self._sub_tasks[sub_id]
            self._drop_sub(sub_id)
            self.send(messages.closed(sub_id, str(exc)))
            return
        except StoreError:
            log.exception("stored query failed for %s", sub_id)
            results = []
            self.send(messages.notice("error: database error (stored results incomplete)"))
        for stored in results:
            sent.add(stored.event.id)
            await self.send_wait(messages.event(sub_id, stored.event.to_json()))
        if sub is not None:
            while sub.held:  # more may be held while we wait for queue room
                for event_id, event_json in sub.take_held():
                    if event_id not in sent:
                        sent.add(event_id)
                        await self.send_wait(messages.event(sub_id, event_json))
            sub.live = True
            self._loop.call_later(SENT_IDS_GRACE_S, sent.clear)
        await self.send_wait(messages.eose(sub_id))
        if self._sub_tasks.get(sub_id) is asyncio.current_task(self._loop):
            del self._sub_tasks[sub_id]

    async def _on_count(self, msg: ReqMessage) -> None:
        if self.pubkey is None:
            self.send(messages.closed(msg.sub_id, NOT_AUTHENTICATED))
            self.relay.telemetry.req_answered("COUNT", msg.sub_id, NOT_AUTHENTICATED)
            return
        try:
            await self.relay.reads.check(msg.filters, self.reader, count=True)
            n = await self.relay.reads.count(msg.filters, self.reader)
        except BuzzError as exc:
            self.send(messages.closed(msg.sub_id, str(exc)))
            self.relay.telemetry.req_answered("COUNT", msg.sub_id, str(exc))
            return
        except StoreError:
            log.exception("count failed")
            self.send(messages.closed(msg.sub_id, "error: database error"))
            self.relay.telemetry.req_answered("COUNT", msg.sub_id, "error: database error")
            return
        self.relay.telemetry.req_answered("COUNT", msg.sub_id, None)
        self.send(messages.count(msg.sub_id, n))


def _writes(event: Event) -> tuple[object, ...]:
    """What a pipelined event's write adds that a later event's validation may read: its id
    (its row, its thread row) and, for a reaction, its active-reaction entry."""
    if event.kind == 7:
        return (event.id, _reaction_key(event))
    return (event.id,)


def _reads(event: Event) -> tuple[object, ...]:
    """What the validation of a pipelined channel event reads besides channel state: its own
    id (a duplicate), the events its `e` tags name (rows, thread rows) and, for a reaction,
    the active-reaction entry of (author, target, content)."""
    reads: tuple[object, ...] = (event.id, *event.tag_values("e"))
    return (*reads, _reaction_key(event)) if event.kind == 7 else reads


def _reaction_key(event: Event) -> tuple[str, str, str | None, str]:
    return ("reaction", event.pubkey, reaction_target(event), event.content)


def forget(early: Any) -> None:
    """Let go of a verification future nobody will await (its frame was refused before, or its
    connection closed first): cancelled while pending, its outcome read when settled, so a
    failed signature never ends as asyncio's "Future exception was never retrieved"."""
    if not isinstance(early, asyncio.Future):
        return
    if not early.done():
        early.cancel()
    elif not early.cancelled():
        early.exception()
