"""The relay's WebSocket at the frame level (autobahn-style cases, issue 30 item 2), spoken by a
raw socket client: the frames are built one by one (the `websockets` package's client-side
sans-I/O framing), so fragments, control frames between them, invalid UTF-8, oversized frames
and sockets that just go can be sent as no WebSocket client library would send them.

Each case runs on both layers (`BUZZ_WEBSOCKET_LAYER`): the lean one must answer as aiohttp's did.
"""

from __future__ import annotations

import asyncio
import base64
import os
import socket
from collections import deque
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlsplit

import orjson
import pytest
from websockets.frames import Close, Frame, Opcode
from websockets.protocol import Protocol, Side

from buzz.core.event import Event
from buzz.relay.relay import Relay
from tests.support.deadline import scaled
from tests.support.relay import Identity, RunningRelay, relay_on

MAX_FRAME = 4096


class RawSocket:
    """A WebSocket client that writes whatever frames it is given, masked as a client must
    (unless told otherwise), and reads the server's frames one at a time."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.parser = Protocol(Side.CLIENT, max_size=None)  # reads the server's frames
        self.frames: deque[Frame] = deque()
        self.eof = False

    @classmethod
    async def connect(cls, url: str, first: bytes = b"") -> RawSocket:
        """Open and upgrade; `first` is written in the same packet as the handshake."""
        parts = urlsplit(url)
        reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
        key = base64.b64encode(os.urandom(16)).decode()
        writer.write(
            (
                f"GET / HTTP/1.1\r\nHost: {parts.netloc}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
            ).encode()
            + first
        )
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), scaled(10))
        assert head.startswith(b"HTTP/1.1 101"), head
        return cls(reader, writer)

    def send(self, opcode: Opcode, data: bytes, *, fin: bool = True, mask: bool = True) -> None:
        self.writer.write(Frame(opcode, data, fin=fin).serialize(mask=mask, extensions=[]))

    def send_text(self, message: object) -> None:
        self.send(Opcode.TEXT, orjson.dumps(message))

    async def frame(self) -> Frame | None:
        """The server's next frame; None once it closed the TCP connection."""
        while not self.frames:
            if self.eof:
                return None
            data = await asyncio.wait_for(self.reader.read(65536), scaled(10))
            if data:
                self.parser.receive_data(data)
            else:
                self.eof = True
                self.parser.receive_eof()
            self.parser.data_to_send()  # its own pongs and echoes are not sent: this client says only what it is told
            self.frames.extend(self.parser.events_received())
        return self.frames.popleft()

    async def message(self) -> list:
        """The next text message, as JSON (control frames skipped)."""
        while True:
            frame = await self.frame()
            assert frame is not None, "closed before a message"
            if frame.opcode is Opcode.TEXT:
                return orjson.loads(frame.data)

    async def close_frame(self) -> tuple[Close, list[list]]:
        """Read up to the server's close frame: its code and reason, and the messages before it;
        then the server closes the TCP connection."""
        before = []
        while True:
            frame = await self.frame()
            assert frame is not None, "TCP closed without a close frame"
            if frame.opcode is Opcode.CLOSE:
                close = Close.parse(frame.data)
                assert await self.frame() is None  # a server closes the TCP connection itself
                return close, before
            if frame.opcode is Opcode.TEXT:
                before.append(orjson.loads(frame.data))

    def close(self) -> None:
        self.writer.close()


@pytest.fixture(params=["lean", "aiohttp"])
async def relay(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[RunningRelay]:
    async with relay_on(tmp_path, websocket_layer=request.param, max_frame_bytes=MAX_FRAME) as running:
        yield running


@pytest.fixture
async def ws(relay: RunningRelay) -> AsyncIterator[RawSocket]:
    raw = await RawSocket.connect(relay.url)
    assert (await raw.message())[0] == "AUTH"
    yield raw
    raw.close()


def _req(sub_id: str) -> bytes:
    return orjson.dumps(["REQ", sub_id, {"kinds": [1], "limit": 1}])


def _answer(sub_id: str) -> list:
    """What `_req` is answered on a connection that has not authenticated: proof it was read."""
    return ["CLOSED", sub_id, "auth-required: not authenticated"]


async def test_a_fragmented_message_is_read_as_one(ws: RawSocket) -> None:
    req = _req("frag")
    ws.send(Opcode.TEXT, req[:5], fin=False)
    ws.send(Opcode.CONT, req[5:9], fin=False)
    ws.send(Opcode.CONT, req[9:])
    assert await ws.message() == _answer("frag")


async def test_control_frames_between_fragments_are_answered_and_the_message_completes(ws: RawSocket) -> None:
    req = _req("between")
    ws.send(Opcode.TEXT, req[:7], fin=False)
    ws.send(Opcode.PING, b"mid-message")
    ws.send(Opcode.PONG, b"unsolicited")
    ws.send(Opcode.CONT, req[7:])
    frame = await ws.frame()
    assert frame is not None and (frame.opcode, frame.data) == (Opcode.PONG, b"mid-message")
    assert await ws.message() == _answer("between")


async def test_a_fragmented_binary_message_that_is_utf8_is_read_as_text(ws: RawSocket) -> None:
    req = _req("bin")
    ws.send(Opcode.BINARY, req[:3], fin=False)
    ws.send(Opcode.CONT, req[3:])
    assert await ws.message() == _answer("bin")


async def test_invalid_utf8_text_closes_with_1007(ws: RawSocket) -> None:
    ws.send(Opcode.TEXT, b'["REQ","x",{"search":"\xff\xfe"}]')
    close, _ = await ws.close_frame()
    assert close.code == 1007


async def test_utf8_split_across_fragments_is_read_and_invalid_across_them_closes(ws: RawSocket) -> None:
    snowman = "☃".encode()  # three bytes: the first fragment ends inside the character
    req = b'["REQ","' + snowman + b'",{"kinds":[1],"limit":1}]'
    cut = req.index(snowman) + 1
    ws.send(Opcode.TEXT, req[:cut], fin=False)
    ws.send(Opcode.CONT, req[cut:])
    assert await ws.message() == _answer("☃")
    ws.send(Opcode.TEXT, req[:cut], fin=False)
    ws.send(Opcode.CONT, b"\x00" + req[cut + 2 :])  # the character's rest replaced: not UTF-8
    close, _ = await ws.close_frame()
    assert close.code == 1007


async def test_an_oversized_frame_gets_the_notice_then_1009(ws: RawSocket) -> None:
    ws.send(Opcode.TEXT, b'"' + b"x" * (MAX_FRAME + 100) + b'"')
    close, before = await ws.close_frame()
    assert close.code == 1009
    assert before[-1] == ["NOTICE", f"error: frame too large ({MAX_FRAME + 102} > {MAX_FRAME} bytes)"]


async def test_a_frame_of_exactly_the_limit_is_read(ws: RawSocket) -> None:
    req = _req("edge")
    padded = req[:-1] + b" " * (MAX_FRAME - len(req)) + req[-1:]  # JSON whitespace to the limit
    assert len(padded) == MAX_FRAME
    ws.send(Opcode.TEXT, padded)
    assert await ws.message() == _answer("edge")


async def test_fragments_over_the_limit_together_close_with_1009(ws: RawSocket) -> None:
    half = b"y" * (MAX_FRAME // 2 + 10)
    ws.send(Opcode.TEXT, b'"' + half, fin=False)
    ws.send(Opcode.CONT, half + b'"')
    close, before = await ws.close_frame()
    assert close.code == 1009
    assert before and before[-1][0] == "NOTICE" and before[-1][1].startswith("error: frame too large")


@pytest.mark.parametrize(
    "frames",
    [
        pytest.param([(Opcode.CONT, b"[]", True)], id="continuation-without-start"),
        pytest.param(
            [(Opcode.TEXT, b"[", False), (Opcode.TEXT, b"]", True)], id="new-message-inside-fragments"
        ),
    ],
)
async def test_protocol_errors_close_with_1002(ws: RawSocket, frames: list) -> None:
    for opcode, data, fin in frames:
        ws.send(opcode, data, fin=fin)
    close, _ = await ws.close_frame()
    assert close.code == 1002


async def test_a_control_frame_over_125_bytes_closes_with_1002(ws: RawSocket) -> None:
    ws.writer.write(b"\x89\xfe\x00\x7e" + os.urandom(4) + b"p" * 126)  # PING, 16-bit length 126, masked
    close, _ = await ws.close_frame()
    assert close.code == 1002


async def test_an_unmasked_client_frame_closes_with_1002(tmp_path: Path) -> None:
    """RFC 6455 §5.1: the server MUST close (the lean layer only: aiohttp's reader let such
    frames through)."""
    async with relay_on(tmp_path, websocket_layer="lean") as running:
        raw = await RawSocket.connect(running.url)
        try:
            assert (await raw.message())[0] == "AUTH"
            raw.send(Opcode.TEXT, _req("plain"), mask=False)
            close, _ = await raw.close_frame()
            assert close.code == 1002
        finally:
            raw.close()


async def test_a_fragmented_ping_closes_with_1002(ws: RawSocket) -> None:
    ws.writer.write(b"\x09\x80" + os.urandom(4))  # PING without FIN, masked, empty
    close, _ = await ws.close_frame()
    assert close.code == 1002


async def test_the_client_close_is_echoed_and_the_server_ends_the_tcp_connection(ws: RawSocket) -> None:
    ws.send(Opcode.CLOSE, Close(1000, "bye").serialize())
    close, _ = await ws.close_frame()
    assert close.code == 1000


async def test_frames_sent_with_the_handshake_are_read(relay: RunningRelay) -> None:
    first = Frame(Opcode.TEXT, _req("early")).serialize(mask=True, extensions=[])
    raw = await RawSocket.connect(relay.url, first=first)
    try:
        seen = [await raw.message(), await raw.message()]
        assert _answer("early") in seen
    finally:
        raw.close()


async def _no_connections(relay: Relay) -> None:
    while relay.connections:
        await asyncio.sleep(0.01)


@pytest.mark.parametrize("how", ["mid-fragment", "mid-frame", "reset"])
async def test_an_abrupt_close_frees_the_connection_and_others_are_served(
    relay: RunningRelay, alice: Identity, how: str
) -> None:
    raw = await RawSocket.connect(relay.url)
    assert (await raw.message())[0] == "AUTH"
    raw.send(Opcode.TEXT, _req("gone"), fin=False)
    if how == "mid-frame":
        raw.writer.write(Frame(Opcode.CONT, b"x" * 100).serialize(mask=True, extensions=[])[:20])
    await raw.writer.drain()
    if how == "reset":  # RST instead of FIN
        sock = raw.writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    raw.close()
    await asyncio.wait_for(_no_connections(relay.relay), scaled(10))
    async with relay.client(alice) as c:
        assert (await c.publish(Event.create(alice.secret, 1, "still serving"))).accepted


async def test_large_frames_and_fragments_back_to_back_are_all_read(ws: RawSocket) -> None:
    """Large frames make the lean layer renew the library's parser between frames (decision
    350): never inside a fragmented message, nor with a frame half read."""

    def padded(sub_id: str, size: int) -> bytes:
        req = _req(sub_id)
        return req[:-1] + b" " * (size - len(req)) + req[-1:]

    one, two, three = padded("one", 1000), padded("two", 1500), padded("three", 800)
    ws.send(Opcode.TEXT, one)
    await ws.writer.drain()
    ws.send(Opcode.TEXT, two[:700], fin=False)  # a large first fragment, alone in its write
    await ws.writer.drain()
    frame = Frame(Opcode.CONT, two[700:]).serialize(mask=True, extensions=[])
    ws.writer.write(frame[:10])  # the next frame's header without its payload
    await ws.writer.drain()
    ws.writer.write(frame[10:] + Frame(Opcode.TEXT, three).serialize(mask=True, extensions=[]))
    assert [await ws.message() for _ in range(3)] == [_answer("one"), _answer("two"), _answer("three")]
