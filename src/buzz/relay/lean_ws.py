"""The relay's lean WebSocket (issue 30 item 2): after aiohttp answers the upgrade with 101, the
socket is handed to `LeanWebSocket`, a plain asyncio protocol driven by the `websockets`
package's sans-I/O core (framing, unmasking, ping/pong, close codes and their handshake,
size limits). An idle connection then keeps no aiohttp request, response, reader, writer or
handler task — only this object, the library's parser and the transport.

The interface is `RelayWebSocket`'s as `Connection` uses it (`send_strs`, `watch_writable`,
`direct_transport`, `close`, `ping`, `relay_close`, `close_code`); frames read are pushed to the
connection (`Connection.on_message`) instead of awaited, so no coroutine waits per connection.

Message rules kept from the aiohttp layer: fragments are joined into one message under the
relay's `BUZZ_MAX_FRAME_BYTES` (the library counts the joined size); a text message that is
not UTF-8 closes with 1007; an oversized one is answered `NOTICE "error: frame too large
(<n> > <max> bytes)"`, then closed with 1009, before its payload is buffered (relay.md §7.1
item 2).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from aiohttp import web
from websockets.exceptions import PayloadTooBig
from websockets.frames import Opcode
from websockets.protocol import OPEN, Protocol, Side

from buzz.core import messages
from buzz.relay.websocket import frame_too_large, text_frame

if TYPE_CHECKING:
    from buzz.relay.connection import Connection

log = logging.getLogger(__name__)

_HELD_BYTES = 256  # a last frame larger than this is not left in the parser (`_forget_last_frame`)
CLOSE_TIMEOUT_S = 2.0  # for the peer's close echo before the socket is dropped
# The library logs each connection's close at INFO; buzz.relay.ops already logs one line per
# close with the connection id and reason, so only the library's warnings are let through.
_PROTOCOL_LOG = logging.getLogger("buzz.relay.lean_ws.protocol")
_PROTOCOL_LOG.setLevel(logging.WARNING)


def upgrade_response(request: web.BaseRequest) -> web.StreamResponse:
    """The 101 answering a WebSocket upgrade request, with the headers aiohttp's own handshake
    makes (its checks of method, Upgrade, Connection, version and key, and its refusals:
    `HTTPBadRequest` and friends are raised as with `WebSocketResponse.prepare`)."""
    headers, _, _, _ = web.WebSocketResponse(autoping=False, compress=False)._handshake(request)
    response = web.StreamResponse(status=101, headers=headers)
    response.force_close()  # aiohttp keeps no connection after this response
    return response


class LeanWebSocket(asyncio.Protocol):
    """One upgraded connection's protocol. `adopt` takes the socket from aiohttp."""

    __slots__ = (
        "_changed",
        "_conn",
        "_ctx",
        "_drain",
        "_fragments",
        "_lost",
        "_open",
        "_paused",
        "_proto",
        "max_frame_bytes",
        "relay_close",
        "transport",
    )

    def __init__(self, max_frame_bytes: int) -> None:
        self.max_frame_bytes = max_frame_bytes  # inclusive: a message of exactly this size is read
        self._proto = Protocol(Side.SERVER, max_size=max_frame_bytes, logger=_PROTOCOL_LOG)
        self.transport: asyncio.Transport | None = None
        self._conn: Connection | None = None
        self._ctx: contextvars.Context | None = None
        self._paused = False  # the transport's buffer is over its high-water mark
        self._open = False  # frames may be written: upgraded, no close frame sent, not lost
        self._drain: asyncio.Future[None] | None = None  # a writer waiting for resume
        self._lost: asyncio.Future[None] | None = None  # a close waiting for the socket to go
        self._fragments: list[bytes] | None = None  # a fragmented message's payloads so far
        self._changed: Callable[[], None] | None = None
        self.relay_close: tuple[int, str] | None = None  # the first close the relay started

    # -- taking the socket from aiohttp ---------------------------------------------------------
    def adopt(self, request: web.BaseRequest, conn: Connection) -> None:
        """Take the connection of `request`, whose 101 has been written, from aiohttp: the
        transport calls this protocol from now on, what the client sent after its handshake
        (aiohttp's tail) is read first, and aiohttp's handler lets go of the transport without
        closing it (`connection_lost` with no transport left is aiohttp's own way of forgetting
        a connection). The current context (the connection's log label) runs every callback."""
        handler: Any = request.protocol
        transport = request.transport
        assert transport is not None
        tail = getattr(handler, "_message_tail", b"")
        handler._message_tail = b""
        self._conn = conn
        self._ctx = contextvars.copy_context()
        transport.set_protocol(self)
        self.transport = transport  # type: ignore[assignment]
        self._set_open(True)
        handler.transport = None
        handler.connection_lost(None)
        transport.resume_reading()  # aiohttp may have paused it behind the upgrade request
        if tail:
            self.data_received(tail)

    # -- asyncio.Protocol -----------------------------------------------------------------------
    def data_received(self, data: bytes) -> None:
        assert self._ctx is not None
        self._ctx.run(self._receive, data)

    def _receive(self, data: bytes) -> None:
        proto = self._proto
        proto.receive_data(data)
        events = proto.events_received()
        conn = self._conn
        held = 0  # bytes of the last data frame, which the library's parser keeps
        for frame in events:
            opcode = frame.opcode
            if opcode is Opcode.TEXT or opcode is Opcode.BINARY or opcode is Opcode.CONT:
                held = len(frame.data)
                message = self._join(frame)
                if message is not None and conn is not None:
                    binary, payload = message
                    if binary:
                        conn.on_message(payload, binary=True)
                    else:
                        try:
                            text = payload.decode("utf-8")
                        except UnicodeDecodeError as exc:
                            self._note_close(1007, "invalid UTF-8 text")
                            proto.fail(1007, f"{exc.reason} at position {exc.start}")
                            break
                        conn.on_message(text)
            elif opcode is Opcode.PONG:
                if conn is not None:
                    conn.on_pong()
            elif opcode is Opcode.CLOSE:
                self._open = False
        exc = proto.parser_exc
        if exc is not None and self.relay_close is None and proto.close_sent is not None:
            if isinstance(exc, PayloadTooBig):
                size = (exc.size or 0) + (exc.current_size or 0) or None
                text = frame_too_large(size, self.max_frame_bytes)
                self.relay_close = (1009, text.removeprefix("error: "))
                if self.transport is not None:  # the NOTICE goes before the library's close frame
                    self.transport.write(text_frame(messages.notice(text).encode("utf-8")))
            else:
                self.relay_close = (proto.close_sent.code, proto.close_sent.reason)
        del events
        if held > _HELD_BYTES:
            self._forget_last_frame()
        self._flush()

    def _forget_last_frame(self) -> None:
        """The library's parser (a generator) holds the last frame it read in a local until the
        next one comes: an idle connection would keep its AUTH event. Between frames — the
        parser waiting in its reader's `at_eof`, no fragmented message open — it has no other
        state, and a fresh one (what `Protocol.__init__` starts) lets the frame go. Anywhere
        else, or on a library laid out otherwise, the parser is left as it is."""
        proto = self._proto
        waiting = getattr(proto.parser, "gi_yieldfrom", None)
        code = getattr(waiting, "gi_code", None)
        if proto.state is OPEN and proto.current_size is None and getattr(code, "co_name", "") == "at_eof":
            proto.parser.close()
            proto.parser = proto.parse()
            next(proto.parser)

    def _join(self, frame: Any) -> tuple[bool, bytes] | None:
        """A complete message from `frame`, None while fragments are still coming. The library
        checks the order of fragments and counts their joined size against the limit."""
        if frame.opcode is not Opcode.CONT:
            if frame.fin:
                return frame.opcode is Opcode.BINARY, frame.data
            self._fragments = [b"\x01" if frame.opcode is Opcode.BINARY else b"\x00", frame.data]
            return None
        fragments = self._fragments
        assert fragments is not None
        fragments.append(frame.data)
        if not frame.fin:
            return None
        self._fragments = None
        return fragments[0] == b"\x01", b"".join(fragments[1:])

    def _flush(self) -> None:
        """Write what the library has to send; its end-of-stream mark closes the socket (a
        server closes the TCP connection once the close handshake is done or failed)."""
        transport = self.transport
        if self._proto.state is not OPEN:
            self._set_open(False)
        for data in self._proto.data_to_send():
            if transport is None:
                break
            if data:
                transport.write(data)
            else:
                transport.close()

    def pause_writing(self) -> None:
        self._paused = True
        self._notify()

    def resume_writing(self) -> None:
        self._paused = False
        drain, self._drain = self._drain, None
        if drain is not None and not drain.done():
            drain.set_result(None)
        self._notify()

    def connection_lost(self, exc: BaseException | None) -> None:
        self._proto.receive_eof()
        self._proto.data_to_send()  # nothing can be written any more
        self._set_open(False)
        self.transport = None
        for waiter in (self._drain, self._lost):
            if waiter is not None and not waiter.done():
                waiter.set_result(None)
        self._drain = None
        conn, self._conn = self._conn, None
        if conn is not None and self._ctx is not None:
            self._ctx.run(conn.on_lost)

    # -- what `Connection` calls ----------------------------------------------------------------
    @property
    def close_code(self) -> int | None:
        """The code of the peer's close frame; None when the socket went without one."""
        rcvd = self._proto.close_rcvd
        return rcvd.code if rcvd is not None else None

    @property
    def closed(self) -> bool:
        return not self._open

    def pause_reading(self) -> None:
        if self.transport is not None:
            self.transport.pause_reading()

    def resume_reading(self) -> None:
        if self.transport is not None:
            self.transport.resume_reading()

    async def send_strs(self, texts: Sequence[str]) -> None:
        """Each text as its own TEXT frame, handed to the socket in one write; waits while the
        transport is paused (the caller bounds a batch, `WRITE_BATCH_BYTES`)."""
        transport = self.transport
        if not self._open or transport is None:
            raise ConnectionResetError("Cannot write to closing transport")
        transport.write(b"".join([text_frame(text.encode("utf-8")) for text in texts]))
        if self._paused:
            if self._drain is None:
                self._drain = asyncio.get_running_loop().create_future()
            await self._drain

    async def send_str(self, text: str) -> None:
        await self.send_strs((text,))

    async def ping(self, data: bytes = b"") -> None:
        if self._open:
            self._proto.send_ping(data)
            self._flush()

    def watch_writable(self, changed: Callable[[], None]) -> None:
        """Call `changed` whenever `direct_transport` may answer differently."""
        self._changed = changed

    def unwatch_writable(self) -> None:
        self._changed = None

    def direct_transport(self) -> Any:
        """The transport while a frame written to it now cannot wait (open, not paused)."""
        return self.transport if self._open and not self._paused else None

    async def close(self, *, code: int = 1000, message: bytes = b"", drain: bool = True) -> bool:
        """Send a close frame (the first close the relay starts is remembered for the log) and
        wait for the peer's echo, which closes the socket; after CLOSE_TIMEOUT_S it is dropped."""
        transport = self.transport
        if transport is None:
            return False
        if self._proto.state is OPEN:
            reason = message.decode("utf-8", "replace")
            self._note_close(code, reason)
            self._proto.send_close(code, reason)
            self._flush()
        if self.transport is None:
            return True
        if self._lost is None:
            self._lost = asyncio.get_running_loop().create_future()
        try:
            async with asyncio.timeout(CLOSE_TIMEOUT_S):
                await asyncio.shield(self._lost)
        except TimeoutError:
            if self.transport is not None:
                self.transport.abort()
        return True

    # -- internals ------------------------------------------------------------------------------
    def _note_close(self, code: int, reason: str) -> None:
        if self.relay_close is None and self._proto.close_rcvd is None:
            self.relay_close = (code, reason)

    def _set_open(self, value: bool) -> None:
        if self._open != value:
            self._open = value
            self._notify()

    def _notify(self) -> None:
        if self._changed is not None:
            self._changed()
