"""Per-seat queues, the socket writer and audio fan-out (huddle.md §6.2–§6.4, §7).

Each admitted seat owns a `PeerSink`:

- `audio`: the room audio queue, capacity 8 frames (160 ms). Fan-out puts without waiting. What
  is buffered for one receiver is bounded in time (issue 13): the frames in this queue plus
  those already written but still in the transport's buffer or not yet sent by the kernel
  (`SIOCOUTQNSD`) stay within 200 ms (10 frames); beyond that, and beyond the 8-frame queue, the
  oldest queued frame is dropped for that receiver only and counted (§7.2). The writer holds
  audio back while 5 frames are still unsent, so a receiver that stops reading never finds
  seconds of stale audio in the socket buffers when it resumes, and gets the newest next.
- `control`: the room control queue, capacity 32 (`joined`, `left`). A full queue drops the
  message, logs a warning naming room and peer, counts it and closes that socket (§7.3).
- `socket_control`: Ping/Pong for this socket, capacity 8 (§7.4); failing to queue one closes.

One writer task per socket drains them in priority order: socket control, then room control,
then audio (§7.4, checklist 32). The room audio queue doubles as the writer's audio queue, so a
frame waits in one queue, not two (docs/decisions.md).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import fcntl
import logging
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal

from aiohttp import web

from buzz.core.huddle_wire import (
    AUDIO_BUDGET_MS,
    AUDIO_QUEUE_CAPACITY,
    CONTROL_QUEUE_CAPACITY,
    FRAME_SAMPLES,
    WS_CONTROL_QUEUE,
    FrameHeader,
    Ingress,
    ingress_verdict,
    relay_frame,
)

log = logging.getLogger(__name__)

SocketControl = tuple[Literal["ping", "pong"], bytes]

DROPPED_METRIC = "huddle_audio_frames_dropped_total"
FORWARDED_METRIC = "huddle_audio_frames_forwarded_total"
FLUSHED_METRIC = "huddle_audio_frames_flushed_total"  # a leaver's frames removed from queues
FRAME_MS = FRAME_SAMPLES * 1000 // 48000  # 20 ms per Opus frame
AUDIO_BUDGET_FRAMES = AUDIO_BUDGET_MS // FRAME_MS  # 10
# The writer stops handing audio to the socket at half the budget: frames in the kernel can no
# longer be dropped, so keeping the other half in our queue means a receiver that resumes gets
# the newest frames next, not only the oldest.
WRITE_AHEAD_FRAMES = AUDIO_BUDGET_FRAMES // 2  # 5
BUDGET_POLL_S = 0.010  # how often a writer held back by the budget looks at the socket again


def _ws_frame_bytes(payload: int) -> int:
    """Bytes of an unmasked, uncompressed server WebSocket frame carrying `payload` bytes."""
    return payload + (2 if payload < 126 else 4 if payload < 65536 else 10)


# Linux SIOCOUTQNSD (linux/sockios.h): bytes in the send queue not yet sent. SIOCOUTQ also
# counts bytes sent but not yet acknowledged, which on loopback includes everything behind a
# delayed ACK (up to 40 ms): a writer that hands several frames to the socket at once then
# saw its budget spent and held audio back while the receiver had it all (docs/decisions.md).
SIOCOUTQNSD = 0x894B


def _kernel_unsent(transport: asyncio.BaseTransport | None) -> int:
    """Bytes in the kernel's send queue for this socket not yet sent (Linux SIOCOUTQNSD); 0
    when unknown."""
    sock = transport.get_extra_info("socket") if transport is not None else None
    if sock is None:
        return 0
    with contextlib.suppress(OSError, ValueError, AttributeError):
        raw = fcntl.ioctl(sock.fileno(), SIOCOUTQNSD, b"\0\0\0\0")
        return int(struct.unpack("i", raw)[0])
    return 0


@dataclass(slots=True)
class HuddleStats:
    """Relay-wide counters (exported names as keys of `counters`)."""

    counters: collections.Counter[str] = field(default_factory=collections.Counter)

    def count(self, name: str, n: int = 1) -> None:
        self.counters[name] += n


class PeerSink:
    """The queues and counters of one seat; `label` names room and peer in logs."""

    __slots__ = (
        "_closed",
        "_direct",
        "_on_close",
        "_sent_ends",
        "_wake",
        "_written",
        "_ws",
        "audio",
        "audio_dropped",
        "control",
        "control_dropped",
        "epoch",
        "inflight",
        "label",
        "last_level_dbov",
        "protocol_version",
        "room_stats",
        "socket_control",
        "stats",
    )

    def __init__(
        self,
        label: str,
        stats: HuddleStats,
        room_stats: collections.Counter[str],
        on_close: Callable[[int, bytes], None],
        protocol_version: int = 2,
    ) -> None:
        self.label = label
        self.protocol_version = protocol_version
        self.epoch = 0  # of this seat's index, set once admitted (v3 prefix of its frames)
        self.inflight = 0  # audio frames written but not yet out of the transport and kernel
        self._written = 0  # bytes handed to the transport
        self._sent_ends: collections.deque[int] = collections.deque()  # end offset per audio frame
        self.stats = stats
        self.room_stats = room_stats
        self.audio: collections.deque[bytes] = collections.deque()
        self.control: collections.deque[str] = collections.deque()
        self.socket_control: collections.deque[SocketControl] = collections.deque()
        self.audio_dropped = 0
        self.control_dropped = 0
        self.last_level_dbov: int | None = None
        self._wake = asyncio.Event()
        self._closed = False
        self._on_close = on_close
        self._ws: web.WebSocketResponse | None = None  # set by the running writer
        self._direct: asyncio.WriteTransport | None = None

    # -- producers (never wait) ------------------------------------------------------------
    def offer_audio(self, message: bytes) -> bool:
        """Queue one relay → client frame, dropping the oldest beyond the 8-frame queue or the
        200 ms budget (counted per peer, room and relay). False when the new frame itself had to
        go (the whole budget is still unsent in the socket)."""
        audio = self.audio
        audio.append(message)
        self.stats.counters[FORWARDED_METRIC] += 1
        depth = len(audio)
        if depth > AUDIO_QUEUE_CAPACITY or depth > AUDIO_BUDGET_FRAMES - self.inflight:
            self._pump()
            self._trim()
        self._wake.set()
        return bool(audio) and audio[-1] is message

    def _pump(self) -> None:
        """A full queue before the writer's turn (a burst: a mesh batch, frames of many speakers
        read in one loop pass): write what the budget allows now, as the writer would, instead
        of dropping. Only with no control message waiting, so audio never overtakes a `joined`
        or `left` (§7.4 order)."""
        direct, ws = self._direct, self._ws
        if direct is None or ws is None or self._closed or self.control or self.socket_control:
            return
        if _closing(ws, direct):
            return
        self._refresh_inflight(direct)
        room = WRITE_AHEAD_FRAMES - self.inflight
        if room > 0:
            direct.write(self._take_frames(room))

    def _trim(self) -> None:
        room = max(0, AUDIO_BUDGET_FRAMES - self.inflight)
        while self.audio and (len(self.audio) > AUDIO_QUEUE_CAPACITY or len(self.audio) > room):
            self.audio.popleft()
            self._count_drop()

    def _count_drop(self) -> None:
        self.audio_dropped += 1
        self.room_stats[DROPPED_METRIC] += 1
        self.stats.count(DROPPED_METRIC)

    def flush_index(self, peer_index: int) -> int:
        """Remove queued frames of `peer_index` (a leaver), before its `left` or the `joined` of
        the index's next occupant is queued (issue 13); returns how many went."""
        kept = [m for m in self.audio if m[0] != peer_index]
        flushed = len(self.audio) - len(kept)
        if flushed:
            self.audio = collections.deque(kept)
            self.stats.count(FLUSHED_METRIC, flushed)
        return flushed

    def offer_control(self, text: str) -> bool:
        """Queue a `joined`/`left`; a full queue warns, counts and closes the socket (§7.3)."""
        if self._closed:
            return False
        if len(self.control) >= CONTROL_QUEUE_CAPACITY:
            self.control_dropped += 1
            self.stats.count("huddle_control_messages_dropped_total")
            log.warning("huddle control queue full, closing: %s", self.label)
            self.close(1008, b"control queue overflow")
            return False
        self.control.append(text)
        self._wake.set()
        return True

    def offer_socket_control(self, item: SocketControl) -> bool:
        """Queue a Ping or Pong; a full queue closes the socket (§2.4, §7.4)."""
        if len(self.socket_control) >= WS_CONTROL_QUEUE:
            log.warning("huddle socket control queue full, closing: %s", self.label)
            self.close(1008, b"control queue overflow")
            return False
        self.socket_control.append(item)
        self._wake.set()
        return True

    def close(self, code: int, reason: bytes) -> None:
        """Ask the socket to close (once); the writer stops."""
        if not self._closed:
            self._closed = True
            self._wake.set()
            self._on_close(code, reason)

    # -- the writer ----------------------------------------------------------------------------
    def _refresh_inflight(self, transport: asyncio.BaseTransport | None) -> None:
        """Count the audio frames whose bytes are still in the transport or the kernel."""
        unsent = _kernel_unsent(transport)
        writable = _writable(transport)
        if writable is not None:
            unsent += writable.get_write_buffer_size()
        delivered = self._written - unsent
        while self._sent_ends and self._sent_ends[0] <= delivered:
            self._sent_ends.popleft()
        self.inflight = len(self._sent_ends)

    async def run_writer(
        self, ws: web.WebSocketResponse, transport: asyncio.BaseTransport | None = None
    ) -> None:
        """Write queued messages until closed: socket control, room control, then audio.

        `transport` is the socket's transport, used to see how much audio is still unsent; audio
        waits in the queue (where the oldest can be dropped) while the budget is spent there.
        Each wake-up hands every audio frame the budget allows to the transport in one write
        (one send system call), framed here: with 23 speakers a receiver gets ~1,150 frames/s,
        and one `send_bytes` each was most of the relay's time per frame (docs/decisions.md 87).
        """
        direct = _writable(transport)
        self._ws, self._direct = ws, direct  # `_pump` writes only while this writer runs
        loop = asyncio.get_running_loop()
        try:
            while not self._closed:
                if self.socket_control:
                    what, data = self.socket_control.popleft()
                    await (ws.ping(data) if what == "ping" else ws.pong(data))
                    self._written += _ws_frame_bytes(len(data))
                elif self.control:
                    text = self.control.popleft()
                    await ws.send_str(text)
                    self._written += _ws_frame_bytes(len(text.encode()))
                elif self.audio:
                    self._refresh_inflight(transport)
                    self._trim()
                    if not self.audio:
                        continue
                    room = WRITE_AHEAD_FRAMES - self.inflight
                    if room <= 0:
                        await self._hold(loop)
                        continue
                    if direct is None or _closing(ws, direct):
                        message = self.audio.popleft()
                        self._written += _ws_frame_bytes(len(message))
                        self._sent_ends.append(self._written)
                        await ws.send_bytes(message)
                        continue
                    direct.write(self._take_frames(room))
                else:
                    self._wake.clear()
                    await self._wake.wait()
        finally:
            self._ws = self._direct = None

    def _take_frames(self, room: int) -> bytes:
        """Up to `room` queued audio frames as consecutive WebSocket binary frames (RFC 6455
        §5.2: FIN + opcode 2, unmasked, uncompressed: huddle sockets never negotiate deflate)."""
        parts: list[bytes] = []
        audio, ends = self.audio, self._sent_ends
        written = self._written
        for _ in range(min(room, len(audio))):
            message = audio.popleft()
            size = len(message)
            if size < 126:
                parts.append(bytes((0x82, size)))
                written += size + 2
            else:
                parts.append(_HEAD16.pack(0x82, 126, size) if size < 65536 else _HEAD64.pack(0x82, 127, size))
                written += size + (4 if size < 65536 else 10)
            parts.append(message)
            ends.append(written)
        self._written = written
        return b"".join(parts)

    async def _hold(self, loop: asyncio.AbstractEventLoop) -> None:
        """Wait for a new offer or BUDGET_POLL_S, whichever comes first (no task per wait)."""
        self._wake.clear()
        timer = loop.call_later(BUDGET_POLL_S, self._wake.set)
        try:
            await self._wake.wait()
        finally:
            timer.cancel()


def _writable(transport: asyncio.BaseTransport | None) -> asyncio.WriteTransport | None:
    """The transport as a write transport, by its methods: uvloop's (what `buzz relay serve`
    runs) are not subclasses of `asyncio.WriteTransport`, which hid them from the budget's
    buffer count and the batched write."""
    if all(hasattr(transport, name) for name in ("write", "get_write_buffer_size", "is_closing")):
        return transport  # type: ignore[return-value]
    return None


def _closing(ws: web.WebSocketResponse, transport: asyncio.WriteTransport) -> bool:
    """True once either side started the close handshake: aiohttp then writes (or refuses)."""
    return ws.closed or transport.is_closing() or bool(getattr(ws, "_closing", False))


_HEAD16 = struct.Struct(">BBH")
_HEAD64 = struct.Struct(">BBQ")


def forward(
    frame: bytes, protocol_version: int, peer_index: int, receivers: Iterable[PeerSink], sender: PeerSink
) -> Ingress:
    """Apply the ingress rule (§6.2) and fan a client frame out to `receivers` (§6.3, §6.4).

    The header is read for telemetry only (level kept on the sender's sink); size is the only
    reason to drop. `receivers` must exclude the sender's own seat. Each receiver gets the prefix
    of its own version: `[index]` (v1, v2) or `[index][epoch]` (v3). Never waits.
    """
    verdict = ingress_verdict(frame, protocol_version)
    if verdict is not Ingress.FORWARD:
        return verdict
    if protocol_version >= 2:
        header = FrameHeader.read(frame)
        if header is not None:
            sender.last_level_dbov = header.level_dbov
    plain: bytes | None = None
    fenced: bytes | None = None
    for sink in receivers:
        if sink.protocol_version >= 3:
            fenced = fenced or relay_frame(peer_index, frame, sender.epoch)
            sink.offer_audio(fenced)
        else:
            plain = plain or relay_frame(peer_index, frame)
            sink.offer_audio(plain)
    return verdict
