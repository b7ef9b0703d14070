"""Live fan-out writes frames it builds itself (`text_frame`): each must be the TEXT frame
aiohttp's own writer sends for `send_str` on an uncompressed server socket, at every length
class of RFC 6455 §5.2 (7-bit, 16-bit and 64-bit payload lengths)."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp._websocket.writer import WebSocketWriter

from buzz.relay.transport.websocket import text_frame


class _Transport:
    def __init__(self) -> None:
        self.data = bytearray()

    def write(self, data: bytes) -> None:
        self.data += data

    def is_closing(self) -> bool:
        return False


class _Protocol:
    _paused = False


@pytest.mark.parametrize("size", [0, 125, 126, 65535, 65536, 70000])
async def test_text_frame_is_what_aiohttp_sends(size: int) -> None:
    text = "é" + "x" * (size - 2) if size >= 2 else "x" * size  # `size` bytes of UTF-8
    data = text.encode()
    assert len(data) == size
    transport = _Transport()
    writer = WebSocketWriter(_Protocol(), transport, compress=0)  # type: ignore[arg-type]
    await writer.send_frame(data, 0x1)
    await asyncio.sleep(0)
    assert text_frame(data[: len(data) // 2], data[len(data) // 2 :]) == bytes(transport.data)
