"""Relay frames → per-peer 10 ms PCM buffers (huddle.md §6.5, §10.3).

Shapes: each tick yields 480 int16 samples (10 ms at 48 kHz) per active peer, one stream per
peer so simultaneous speakers stay separate (one player, or one WAV, per peer).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np

from buzz.core.huddle_control import Joined, Left, Roster
from buzz.core.huddle_wire import (
    CURRENT_PROTOCOL_VERSION,
    IDLE_PEER_GRACE_MS,
    PLAYOUT_TICK_SAMPLES,
    SPEAKER_TICK_MS,
    parse_relay_frame,
)
from buzz.voice.jitter import JitterBuffer
from buzz.voice.roster import ClientRoster


class Decoder(Protocol):
    def decode(self, packet: bytes) -> np.ndarray: ...
    def conceal(self) -> np.ndarray: ...


class PacketTap(Protocol):
    """Sees every accepted packet in arrival order, beside playout (the `--record-dir` recorder)."""

    def packet(self, index: int, seq: int, ts_48k: int, packet: bytes) -> None: ...
    def reset(self, index: int) -> None: ...


class PeerPlayout:
    """One remote peer: jitter buffer + decoder + the half-packet left over between ticks."""

    def __init__(self, decoder: Decoder) -> None:
        self.jitter = JitterBuffer()
        self.decoder = decoder
        self.last_arrival_ms: float | None = None
        self.last_voice_ms: float | None = None  # last non-DTX frame, for speaking indicators
        self._pcm = np.zeros(0, np.int16)

    def push(self, seq: int, ts_48k: int, packet: bytes, dtx: bool, now_ms: float) -> None:
        self.last_arrival_ms = now_ms
        if not dtx:
            self.last_voice_ms = now_ms
        self.jitter.push(seq, ts_48k, packet, now_ms)

    def active(self, now_ms: float) -> bool:
        """False once silent for 500 ms with an empty buffer: stop pulling it (§10.3)."""
        if len(self.jitter) or self._pcm.size:
            return True
        return self.last_arrival_ms is not None and now_ms - self.last_arrival_ms < IDLE_PEER_GRACE_MS

    def pull(self, now_ms: float, samples: int = PLAYOUT_TICK_SAMPLES) -> np.ndarray:
        """Exactly `samples` int16 samples; silence where nothing is ready."""
        while self._pcm.size < samples:
            slot = self.jitter.pop(now_ms)
            if slot is None:
                pad = np.zeros(samples - self._pcm.size, np.int16)
                out, self._pcm = np.concatenate([self._pcm, pad]), np.zeros(0, np.int16)
                return out
            pcm = self.decoder.decode(slot) if isinstance(slot, bytes) else self.decoder.conceal()
            self._pcm = np.concatenate([self._pcm, pcm])
        out, self._pcm = self._pcm[:samples], self._pcm[samples:]
        return out


def default_decoder() -> Decoder:
    from buzz.voice.opus import OpusDecoder

    return OpusDecoder()


class Receiver:
    """Applies §6.5 to relay frames, keeps one PeerPlayout per roster index, mixes nothing."""

    def __init__(
        self,
        decoder_factory: Callable[[], Decoder] = default_decoder,
        protocol_version: int = CURRENT_PROTOCOL_VERSION,
        tap: PacketTap | None = None,
    ) -> None:
        self.roster = ClientRoster()
        self.tap = tap
        self.protocol_version = protocol_version
        self.dropped = 0
        self._factory = decoder_factory
        self._peers: dict[int, PeerPlayout] = {}

    def on_control(self, message: Joined | Left | Roster) -> None:
        """Apply a roster message; recreate the decoder and jitter buffer of indices that left or
        changed pubkey or epoch, so a new occupant never continues the previous one's stream."""
        change = self.roster.apply(message)
        if change is not None:
            for index in change.reset:
                self._peers.pop(index, None)
                if self.tap is not None:
                    self.tap.reset(index)

    def on_frame(self, message: bytes, now_ms: float) -> bool:
        """Take one relay → client binary message; False when §6.5 / §6.6 say drop it: too short,
        an index not in the roster, or (v3) an epoch other than the index's current one."""
        frame = parse_relay_frame(message, self.protocol_version)
        if frame is None or frame.header is None or not self.roster.holds(frame.peer_index, frame.epoch):
            self.dropped += 1
            return False
        peer = self._peers.get(frame.peer_index)
        if peer is None:
            peer = self._peers[frame.peer_index] = PeerPlayout(self._factory())
        header = frame.header
        if self.tap is not None:
            self.tap.packet(frame.peer_index, header.seq, header.ts_48k, frame.opus_packet)
        peer.push(header.seq, header.ts_48k, frame.opus_packet, header.dtx, now_ms)
        return True

    def tick(self, now_ms: float) -> dict[int, np.ndarray]:
        """One 10 ms playout tick: 480 samples for every active peer, keyed by `peer_index`."""
        return {i: p.pull(now_ms) for i, p in self._peers.items() if p.active(now_ms)}

    def speaking(self, now_ms: float) -> set[int]:
        """Indices that sent a non-DTX frame in the last 500 ms (DTX never counts, §6.5)."""
        return {
            i
            for i, p in self._peers.items()
            if p.last_voice_ms is not None and now_ms - p.last_voice_ms < SPEAKER_TICK_MS
        }
