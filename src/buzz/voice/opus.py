"""Opus 48 kHz mono, one 20 ms packet per 960 samples, through PyAV's libopus (huddle.md §10.2–3).

PCM at this boundary is int16 of shape (960,). PyAV's libopus decoder hands back int16 or
float32 planar frames depending on the build; both are converted to int16.

DTX: FFmpeg's libopus wrapper exposes no DTX switch, so `sender` marks silence itself (see there).
Concealment: a TOC-only packet (1 byte) makes libopus run packet-loss concealment, so
`OpusDecoder.conceal` feeds one with the last packet's configuration instead of an empty packet,
which PyAV would read as end of stream.
"""

from __future__ import annotations

import av
import numpy as np

from buzz.core.huddle_wire import FRAME_SAMPLES, OPUS_BITRATE
from buzz.voice.pcm import SAMPLE_RATE, as_int16


class OpusEncoder:
    """libopus encoder: application VOIP, `bitrate` bit/s, 20 ms frames at 48 kHz mono."""

    def __init__(self, bitrate: int = OPUS_BITRATE) -> None:
        ctx = av.CodecContext.create("libopus", "w")
        ctx.sample_rate = SAMPLE_RATE
        ctx.layout = "mono"
        ctx.format = "s16"
        ctx.bit_rate = bitrate
        ctx.options = {"application": "voip"}
        ctx.open()
        self._ctx = ctx
        self._pts = 0

    def encode(self, pcm: np.ndarray) -> list[bytes]:
        """Encode one frame of 960 int16 samples; returns the packets it produced (normally one).

        Raises ValueError for a frame of the wrong length.
        """
        frame_pcm = np.ascontiguousarray(as_int16(pcm)).reshape(1, -1)
        if frame_pcm.shape[1] != FRAME_SAMPLES:
            raise ValueError(f"expected {FRAME_SAMPLES} samples, got {frame_pcm.shape[1]}")
        frame = av.AudioFrame.from_ndarray(frame_pcm, format="s16", layout="mono")
        frame.sample_rate = SAMPLE_RATE
        frame.pts = self._pts
        self._pts += FRAME_SAMPLES
        return [bytes(packet) for packet in self._ctx.encode(frame)]


class OpusDecoder:
    """libopus decoder for one remote peer; recreate it when the peer changes (§10.3)."""

    def __init__(self) -> None:
        ctx = av.CodecContext.create("libopus", "r")
        ctx.sample_rate = SAMPLE_RATE
        ctx.layout = "mono"
        ctx.open()
        self._ctx = ctx
        self._toc: int | None = None

    def decode(self, packet: bytes) -> np.ndarray:
        """Decode one packet to int16 samples (960 for a 20 ms packet; empty if undecodable)."""
        if not packet:
            return self.conceal()
        self._toc = packet[0]
        try:
            frames = self._ctx.decode(av.Packet(packet))
        except av.error.FFmpegError:
            return self.conceal()
        if not frames:
            return np.zeros(0, np.int16)
        return np.concatenate([as_int16(f.to_ndarray()) for f in frames])

    def conceal(self) -> np.ndarray:
        """One packet's worth of loss concealment (960 samples); silence before any packet."""
        if self._toc is None:
            return np.zeros(FRAME_SAMPLES, np.int16)
        # Frame-count code 0 ("one frame") with the last configuration, no frame data.
        frames = self._ctx.decode(av.Packet(bytes((self._toc & 0xFC,))))
        if not frames:
            return np.zeros(FRAME_SAMPLES, np.int16)
        return np.concatenate([as_int16(f.to_ndarray()) for f in frames])
