"""The relay's WebSocket: aiohttp's, plus the NOTICE before an oversized frame's close.

relay.md §7.1 item 2 (and issue 9 item 9): a frame larger than `BUZZ_MAX_FRAME_BYTES` is
answered `NOTICE "error: frame too large (<n> > <max> bytes)"`, then closed with 1009.
aiohttp refuses such a frame from its header, before buffering any of it (so memory stays
bounded), and closes the socket itself; this subclass speaks just before that close.
"""

from __future__ import annotations

import asyncio
import contextlib
import re

from aiohttp import WSCloseCode, web

from buzz.core import messages

NOTICE_TIMEOUT_S = 1.0  # a peer that does not read must not hold the close up
_SIZE = re.compile(r"Message size (\d+)")


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

    def __init__(self, max_frame_bytes: int, **kw: object) -> None:
        # aiohttp refuses a frame of max_msg_size bytes itself; the relay's limit admits it.
        super().__init__(max_msg_size=max_frame_bytes + 1, **kw)  # type: ignore[arg-type]
        self.max_frame_bytes = max_frame_bytes

    def _refused_size(self) -> int | None:
        # The reader's pending WebSocketError says "Message size N exceeds limit M" (aiohttp ≥ 3.10).
        reader = getattr(self, "_reader", None)
        exc = reader.exception() if reader is not None else None
        match = _SIZE.search(str(exc)) if exc is not None else None
        return int(match.group(1)) if match else None

    async def close(self, *, code: int = WSCloseCode.OK, message: bytes = b"", drain: bool = True) -> bool:
        if self.relay_close is None and self.close_code is None and not self.closed:
            self.relay_close = (code, message.decode("utf-8", "replace"))
        if code == WSCloseCode.MESSAGE_TOO_BIG and not self.closed:
            text = frame_too_large(self._refused_size(), self.max_frame_bytes)
            with contextlib.suppress(Exception):
                async with asyncio.timeout(NOTICE_TIMEOUT_S):
                    await self.send_str(messages.notice(text))
        return await super().close(code=code, message=message, drain=drain)
