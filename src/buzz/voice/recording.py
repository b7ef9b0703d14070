"""`--record-dir` recordings: each remote peer's packets as received, in sequence order
(huddle.md §10.3 output; decision 276).

A recording is not a tap on playout. The playout clock hides or skips audio that arrives late
(the jitter buffer skips a backlog, the clock resets after a stall), so a receiving loop stalled
by a busy machine recorded words missing even though every packet arrived. Here each packet is
decoded by the peer's own recording decoder and appended in `seq` order; silence is written only
where the sender's stream has a hole: a `seq` that never came, or a `ts_48k` step larger than the
audio written (a sender that paused). Holes are bounded so a hostile timestamp cannot fill a disk.

Pure apart from the sink: `PeerRecorder` takes packets and hands PCM to `append(index, pcm)`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np

from buzz.core.huddle_wire import FRAME_SAMPLES, JITTER_MAX_PACKETS
from buzz.voice.jitter import RESYNC_FRAMES
from buzz.voice.receiver import Decoder

REORDER_WINDOW = JITTER_MAX_PACKETS  # packets held while waiting for a missing `seq` (1 s)
MAX_HOLE_SAMPLES = RESYNC_FRAMES * FRAME_SAMPLES  # 5 s: the longest silence one hole writes


class PcmSink(Protocol):
    def append(self, index: int, pcm: np.ndarray) -> None: ...


def _signed(delta: int, bits: int) -> int:
    half = 1 << (bits - 1)
    return ((delta + half) & ((1 << bits) - 1)) - half


class StreamRecording:
    """One peer's stream: reorders within `REORDER_WINDOW`, decodes, fills holes with silence."""

    def __init__(self, decoder: Decoder, write: Callable[[np.ndarray], None]) -> None:
        self.decoder = decoder
        self.write = write
        self.late = 0  # packets that came after their place was written (dropped)
        self.hole_samples = 0  # silence written for holes in the stream
        self._held: dict[int, tuple[int, bytes]] = {}  # ext seq → (ts_48k, packet)
        self._next: int | None = None  # ext seq to write next
        self._high: int | None = None
        self._next_ts: int | None = None  # ts_48k the next packet has when nothing is missing

    def push(self, seq: int, ts_48k: int, packet: bytes) -> None:
        ext = seq if self._high is None else self._high + _signed(seq - self._high, 16)
        if self._high is not None and abs(ext - self._high) > RESYNC_FRAMES:
            self.flush()  # the sender restarted: a new stream, no silence across the jump
            self._next = self._high = self._next_ts = None
            ext = seq
        if self._next is not None and ext < self._next:
            self.late += 1
            return
        if ext in self._held:
            return
        self._held[ext] = (ts_48k, packet)
        self._high = ext if self._high is None else max(self._high, ext)
        if self._next is None:
            self._next = ext
        self._drain(force=False)

    def flush(self) -> None:
        """Write everything held, holes as silence (the stream ended or restarted)."""
        self._drain(force=True)

    def _drain(self, *, force: bool) -> None:
        while self._held:
            assert self._next is not None
            if self._next not in self._held:
                if not force and len(self._held) <= REORDER_WINDOW:
                    return  # the missing packet may still come
                self._next = min(self._held)  # it never came: a real hole
            ts_48k, packet = self._held.pop(self._next)
            self._fill_hole(ts_48k)
            pcm = self.decoder.decode(packet)
            self.write(pcm)
            self._next += 1
            self._next_ts = (ts_48k + max(len(pcm), FRAME_SAMPLES)) & 0xFFFFFFFF

    def _fill_hole(self, ts_48k: int) -> None:
        if self._next_ts is None:
            return
        gap = _signed(ts_48k - self._next_ts, 32)
        if gap <= 0:
            return
        silence = min(gap, MAX_HOLE_SAMPLES)
        self.hole_samples += silence
        self.write(np.zeros(silence, np.int16))


class PeerRecorder:
    """Every remote peer's received packets → `sink.append(peer_index, pcm)`, in `seq` order.

    `reset(index)` starts a new stream for an index whose occupant changed (a new decoder, no
    hole across the change); `close()` writes what is still held.
    """

    def __init__(self, sink: PcmSink, decoder_factory: Callable[[], Decoder]) -> None:
        self.sink = sink
        self._factory = decoder_factory
        self._streams: dict[int, StreamRecording] = {}

    def packet(self, index: int, seq: int, ts_48k: int, packet: bytes) -> None:
        stream = self._streams.get(index)
        if stream is None:
            stream = self._streams[index] = StreamRecording(
                self._factory(), lambda pcm: self.sink.append(index, pcm)
            )
        stream.push(seq, ts_48k, packet)

    def reset(self, index: int) -> None:
        stream = self._streams.pop(index, None)
        if stream is not None:
            stream.flush()

    @property
    def late(self) -> int:
        return sum(s.late for s in self._streams.values())

    def close(self) -> None:
        for stream in self._streams.values():
            stream.flush()
