"""The relay's WebSocket: aiohttp's, plus the NOTICE before an oversized frame's close,
`send_strs` (several frames built here and handed to the socket in one write) and `direct_transport` (live
fan-out writes frames it built itself, `text_frame`, without a coroutine per send).

relay.md §7.1 item 2 (and issue 9 item 9): a frame larger than `BUZZ_MAX_FRAME_BYTES` is
answered `NOTICE "error: frame too large (<n> > <max> bytes)"`, then closed with 1009.
aiohttp refuses such a frame from its header, before buffering any of it (so memory stays
bounded), and closes the socket itself; this subclass speaks just before that close.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import struct
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from aiohttp import WSCloseCode, web

from buzz.core import messages

NOTICE_TIMEOUT_S = 1.0  # a peer that does not read must not hold the close up
_SIZE = re.compile(r"Message size (\d+)")
_LEN16 = struct.Struct("!BBH").pack
_LEN64 = struct.Struct("!BBQ").pack
_NO_REQUESTS: tuple[()] = ()  # stands for an upgraded connection's request queue: always empty
_FIN_TEXT = 0x81  # FIN + opcode 1 (text), no RSV bit: uncompressed


# protocol → what to call when its writability may have changed (`RelayWebSocket.watch_writable`)
_WATCHING: dict[Any, Callable[[], None]] = {}
_WATCHED_CLASSES: dict[type, type] = {}


def _changed(protocol: Any) -> None:
    changed = _WATCHING.get(protocol)
    if changed is not None:
        changed()


def _watched_class(cls: type) -> type:
    """`cls` (aiohttp's request handler, slotted) that also reports pause, resume and loss:
    the same layout, so an upgraded connection's protocol can take it as its class."""
    watched = _WATCHED_CLASSES.get(cls)
    if watched is None:

        class Watched(cls):  # type: ignore[valid-type, misc]
            __slots__ = ()

            def pause_writing(self) -> None:
                super().pause_writing()
                _changed(self)

            def resume_writing(self) -> None:
                super().resume_writing()
                _changed(self)

            def connection_lost(self, exc: BaseException | None) -> None:
                super().connection_lost(exc)
                _changed(self)

        watched = _WATCHED_CLASSES[cls] = Watched
    return watched


def text_frame(*parts: bytes) -> bytes:
    """One final, unmasked, uncompressed TEXT frame (RFC 6455 §5.2) whose payload is `parts`
    joined: what aiohttp's writer sends for `send_str` on a socket made with compress=False,
    as one bytes object (the parts are copied once)."""
    n = sum(map(len, parts))
    if n < 126:
        header = bytes((_FIN_TEXT, n))
    elif n < 65536:
        header = _LEN16(_FIN_TEXT, 126, n)
    else:
        header = _LEN64(_FIN_TEXT, 127, n)
    return b"".join((header, *parts))


def refused_size(ws: web.WebSocketResponse) -> int | None:
    """The size of the message aiohttp just refused as too big (its 1009), None when unknown:
    the reader's pending WebSocketError says "Message size N exceeds limit M" (aiohttp ≥ 3.10)."""
    reader = getattr(ws, "_reader", None)
    exc = reader.exception() if reader is not None else None
    match = _SIZE.search(str(exc)) if exc is not None else None
    return int(match.group(1)) if match else None


def frame_too_large(size: int | None, limit: int) -> str:
    """The NOTICE text; `size` None when aiohttp did not say it."""
    return (
        f"error: frame too large ({size} > {limit} bytes)"
        if size
        else f"error: frame too large (> {limit} bytes)"
    )


class RelayWebSocket(web.WebSocketResponse):
    """`max_frame_bytes` is inclusive: a frame of exactly that many bytes is read.

    Also remembers the first close the relay itself starts (slow consumer, ping or auth timeout,
    ban, shutdown) for the operator log: aiohttp keeps only the close code, and the peer's echo
    overwrites it.
    """

    relay_close: tuple[int, str] | None = None
    # (aiohttp's frame writer, the transport, its protocol) when frames may bypass the writer:
    # set by `prepare` for an uncompressed socket whose writer aiohttp 3.14 lays out as known.
    _direct: tuple[Any, Any, Any] | None = None
    _watched: Any = None  # the protocol reporting to `watch_writable`'s callback

    def __init__(self, max_frame_bytes: int, **kw: object) -> None:
        # aiohttp refuses a frame of max_msg_size bytes itself; the relay's limit admits it.
        super().__init__(max_msg_size=max_frame_bytes + 1, **kw)  # type: ignore[arg-type]
        self.max_frame_bytes = max_frame_bytes

    async def prepare(self, request: web.BaseRequest) -> Any:
        writer = await super().prepare(request)
        ws_writer = getattr(self, "_writer", None)
        transport = getattr(ws_writer, "transport", None)
        protocol = getattr(ws_writer, "protocol", None)
        if (
            transport is not None
            and not getattr(ws_writer, "compress", True)
            and not getattr(ws_writer, "use_mask", True)
            and hasattr(protocol, "_paused")
        ):
            self._direct = (ws_writer, transport, protocol)
        # After the upgrade aiohttp reads frames with its WebSocket parser only; its HTTP
        # parser would stay allocated for the connection's life (issue 17: idle connections).
        # aiohttp skips a parser it finds None (3.14: `_parser` is None after connection_lost).
        # Its queue of parsed requests (an empty deque, 0.6 KiB) is not used once upgraded either:
        # only the HTTP path appends to it, and the handler's loop ends with this response.
        protocol = request.protocol
        if getattr(protocol, "_upgraded", False):
            if getattr(protocol, "_parser", None) is not None:
                protocol._parser = None
            if isinstance(getattr(protocol, "_messages", None), deque) and not protocol._messages:
                protocol._messages = _NO_REQUESTS
        return writer

    async def send_strs(self, texts: Sequence[str]) -> None:
        """Send each text as its own frame, in order, handed to the socket in one write.

        Each frame is the one aiohttp's `send_str` writes; only the transport writes are joined.
        """
        direct = self._direct
        if direct is None or direct[0]._closing:
            for text in texts:
                await self.send_str(text)
            return
        # Uncompressed, unmasked frames (a server's): what `send_frame` does for each (the
        # frame `_write_websocket_frame` builds, `text_frame`; then flow control), without a
        # coroutine or a transport call per frame: one write for the batch, and the
        # transport's pause honoured once per batch, which the caller bounds (`WRITE_BATCH_BYTES`).
        writer, transport, _ = direct
        if transport.is_closing():
            raise ConnectionResetError("Cannot write to closing transport")  # as aiohttp's writer
        data = b"".join([text_frame(text.encode("utf-8")) for text in texts])
        transport.write(data)
        writer._output_size += len(data)
        if writer._output_size > writer._limit:
            writer._output_size = 0
            if writer.protocol._paused:
                await writer.protocol._drain_helper()

    def watch_writable(self, changed: Callable[[], None]) -> None:
        """Call `changed` whenever `direct_transport` may answer differently: the transport
        paused or resumed, the connection lost, the close begun. Live fan-out keeps the
        answer as a flag instead of asking per frame. Without direct writes, never called."""
        direct = self._direct
        if direct is None:
            return
        protocol = direct[2]
        try:
            protocol.__class__ = _watched_class(type(protocol))
        except TypeError:  # an aiohttp whose handler cannot take it: no direct writes then
            self._direct = None
            return
        self._watched = protocol
        _WATCHING[protocol] = changed

    def unwatch_writable(self) -> None:
        if self._watched is not None:
            _WATCHING.pop(self._watched, None)
            self._watched = None

    def direct_transport(self) -> Any:
        """The transport, when a frame written to it now cannot wait: an uncompressed socket,
        not closing, its buffer under the high-water mark (the transport not
        paused). None otherwise (the caller queues). A socket that does not read pauses after
        at most one frame past the mark, so direct writes stay bounded like the writer's."""
        direct = self._direct
        if direct is None:
            return None
        writer, transport, protocol = direct
        if writer._closing or protocol._paused or transport.is_closing():
            return None
        return transport

    async def close(self, *, code: int = WSCloseCode.OK, message: bytes = b"", drain: bool = True) -> bool:
        if self.relay_close is None and self.close_code is None and not self.closed:
            self.relay_close = (code, message.decode("utf-8", "replace"))
        if self._direct is not None:  # nothing may be written directly after the close frame
            self._direct = None
            if self._watched is not None:
                _changed(self._watched)
        if code == WSCloseCode.MESSAGE_TOO_BIG and not self.closed:
            text = frame_too_large(refused_size(self), self.max_frame_bytes)
            if self.relay_close is None:  # aiohttp set the code itself: the log names our limit
                self.relay_close = (code, text.removeprefix("error: "))
            with contextlib.suppress(Exception):
                async with asyncio.timeout(NOTICE_TIMEOUT_S):
                    await self.send_str(messages.notice(text))
        return await super().close(code=code, message=message, drain=drain)
