"""Capture PCM → v2 client frames (huddle.md §6.1, §10.2).

Shapes: one call takes one 20 ms frame, 960 samples at 48 kHz, float32 in [−1, 1] or int16.

DTX: PyAV's libopus wrapper cannot switch DTX on, so the sender does what libopus DTX does on the
wire: after `DTX_HANGOVER_FRAMES` consecutive frames at or below `DTX_LEVEL_DBOV` it sends the
TOC byte alone (a 1-byte packet the receiver's decoder conceals as silence). Packets of 2 bytes
or fewer carry the DTX flag (§10.2), whoever made them small.
"""

from __future__ import annotations

import math
from typing import Protocol

import numpy as np

from buzz.core.huddle_wire import (
    DTX_MAX_PACKET,
    FLAG_DTX,
    FRAME_SAMPLES,
    LEVEL_SILENCE_DBOV,
    TS_STEP,
    FrameHeader,
    client_frame,
)
from buzz.voice.pcm import as_float, as_int16, pad_to

DTX_LEVEL_DBOV = -60  # frames at or below this level count as silence for DTX
DTX_HANGOVER_FRAMES = 10  # 200 ms of silence before DTX packets start (as libopus does)


class Encoder(Protocol):
    def encode(self, pcm: np.ndarray) -> list[bytes]: ...


def level_dbov(pcm: np.ndarray) -> int:
    """round(20·log10(RMS)) of a frame, clamped to −127…0; −127 for empty or silent input (§10.2)."""
    samples = as_float(pcm).astype(np.float64)
    if samples.size == 0:
        return LEVEL_SILENCE_DBOV
    rms = math.sqrt(float(np.mean(samples * samples)))
    if rms <= 0.0:
        return LEVEL_SILENCE_DBOV
    return max(LEVEL_SILENCE_DBOV, min(0, round(20.0 * math.log10(rms))))


def pad_frame(pcm: np.ndarray) -> np.ndarray:
    """Zero-pad a short last frame to 960 samples (§10.2)."""
    return pad_to(pcm, FRAME_SAMPLES)


class FrameSender:
    """Stamps encoded frames: `seq` +1 and `ts_48k` +960 per frame that encoded (§10.2)."""

    def __init__(self, encoder: Encoder, *, seq: int = 0, ts_48k: int = 0) -> None:
        self._encoder = encoder
        self.seq = seq
        self.ts_48k = ts_48k
        self._silent_frames = 0

    def frame(self, pcm: np.ndarray) -> list[bytes]:
        """Encode one 20 ms frame (zero-padded if short); returns the binary messages to send."""
        pcm = pad_frame(pcm)
        level = level_dbov(pcm)
        self._silent_frames = self._silent_frames + 1 if level <= DTX_LEVEL_DBOV else 0
        messages = []
        for packet in self._encoder.encode(as_int16(pcm)):
            if self._silent_frames > DTX_HANGOVER_FRAMES and packet:
                packet = bytes((packet[0] & 0xFC,))
            flags = FLAG_DTX if len(packet) <= DTX_MAX_PACKET else 0
            messages.append(client_frame(FrameHeader(self.seq, self.ts_48k, level, flags), packet))
            self.seq = (self.seq + 1) & 0xFFFF
            self.ts_48k = (self.ts_48k + TS_STEP) & 0xFFFFFFFF
        return messages
