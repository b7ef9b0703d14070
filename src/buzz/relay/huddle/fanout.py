"""Per-seat queues, the socket writer and audio fan-out (huddle.md §6.2–§6.4, §7).

Each admitted seat owns a `PeerSink`:

- `audio`: the room audio queue, capacity 8 frames (160 ms). Fan-out puts without waiting; a
  full queue drops the new frame for that receiver only and counts it (§7.2).
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
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal

from aiohttp import web

from buzz.core.huddle_wire import (
    AUDIO_QUEUE_CAPACITY,
    CONTROL_QUEUE_CAPACITY,
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
        "_on_close",
        "_wake",
        "audio",
        "audio_dropped",
        "control",
        "control_dropped",
        "label",
        "last_level_dbov",
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
    ) -> None:
        self.label = label
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

    # -- producers (never wait) ------------------------------------------------------------
    def offer_audio(self, message: bytes) -> bool:
        """Queue one relay → client frame; False (counted per peer, room and relay) when full."""
        if len(self.audio) >= AUDIO_QUEUE_CAPACITY:
            self.audio_dropped += 1
            self.room_stats[DROPPED_METRIC] += 1
            self.stats.count(DROPPED_METRIC)
            return False
        self.audio.append(message)
        self.stats.count(FORWARDED_METRIC)
        self._wake.set()
        return True

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
    async def run_writer(self, ws: web.WebSocketResponse) -> None:
        """Write queued messages until closed: socket control, room control, then audio."""
        while not self._closed:
            if self.socket_control:
                what, data = self.socket_control.popleft()
                await (ws.ping(data) if what == "ping" else ws.pong(data))
            elif self.control:
                await ws.send_str(self.control.popleft())
            elif self.audio:
                await ws.send_bytes(self.audio.popleft())
            else:
                self._wake.clear()
                await self._wake.wait()


def forward(
    frame: bytes, protocol_version: int, peer_index: int, receivers: Iterable[PeerSink], sender: PeerSink
) -> Ingress:
    """Apply the ingress rule (§6.2) and fan a client frame out to `receivers` (§6.3, §6.4).

    The header is read for telemetry only (level kept on the sender's sink); size is the only
    reason to drop. `receivers` must exclude the sender's own seat. Never waits.
    """
    verdict = ingress_verdict(frame, protocol_version)
    if verdict is not Ingress.FORWARD:
        return verdict
    if protocol_version >= 2:
        header = FrameHeader.read(frame)
        if header is not None:
            sender.last_level_dbov = header.level_dbov
    message = relay_frame(peer_index, frame)
    for sink in receivers:
        sink.offer_audio(message)
    return verdict
