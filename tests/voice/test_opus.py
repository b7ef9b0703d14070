"""Opus round trip through PyAV and the v2 frame sender (huddle.md §6.1, §10.2, checklist 45)."""

from __future__ import annotations

import numpy as np
import pytest

from buzz.core.huddle_wire import FLAG_DTX, FRAME_SAMPLES, FrameHeader
from buzz.voice.opus import OpusDecoder, OpusEncoder
from buzz.voice.pcm import as_int16, pad_to
from buzz.voice.sender import DTX_HANGOVER_FRAMES, FrameSender, level_dbov

RATE = 48000


def tone(seconds: float, freq: float = 440.0, amplitude: float = 0.3) -> np.ndarray:
    t = np.arange(int(RATE * seconds)) / RATE
    return (amplitude * np.sin(2 * np.pi * freq * t) * 32767).astype(np.int16)


def rms(pcm: np.ndarray) -> float:
    return float(np.sqrt(np.mean(pcm.astype(np.float64) ** 2)))


def test_tone_round_trip() -> None:
    source = tone(1.0)
    encoder, decoder = OpusEncoder(), OpusDecoder()
    packets = [
        p for i in range(0, len(source), FRAME_SAMPLES) for p in encoder.encode(source[i : i + FRAME_SAMPLES])
    ]
    assert len(packets) == 50
    assert all(20 <= len(p) <= 200 for p in packets[1:])  # about 80 bytes at 32 kbit/s
    decoded = np.concatenate([decoder.decode(p) for p in packets])
    assert decoded.dtype == np.int16 and len(decoded) == len(source)
    steady = decoded[RATE // 5 :]
    assert 0.7 < rms(steady) / rms(source) < 1.3
    spectrum = np.abs(np.fft.rfft(steady))
    assert abs(np.argmax(spectrum) * RATE / len(steady) - 440) < 10


def test_concealment_fills_a_gap_and_decays() -> None:
    encoder, decoder = OpusEncoder(), OpusDecoder()
    assert not decoder.conceal().any()  # before any packet: silence
    source = tone(0.2)
    for i in range(0, len(source), FRAME_SAMPLES):
        for packet in encoder.encode(source[i : i + FRAME_SAMPLES]):
            decoder.decode(packet)
    gaps = [decoder.conceal() for _ in range(5)]
    assert all(len(g) == FRAME_SAMPLES for g in gaps)
    assert rms(gaps[0]) > 0.3 * rms(source) > rms(gaps[-1])


def test_encoder_rejects_wrong_frame_length() -> None:
    with pytest.raises(ValueError):
        OpusEncoder().encode(np.zeros(480, np.int16))


def test_pcm_conversions() -> None:
    planar = np.array([[0.0, 0.5, -1.0, 2.0]], np.float32)  # PyAV's float32 planar layout
    assert as_int16(planar).tolist() == [0, 16384, -32767, 32767]
    assert pad_to(np.ones(3, np.int16), 5).tolist() == [1, 1, 1, 0, 0]


@pytest.mark.parametrize(
    ("pcm", "level"),
    [
        (np.zeros(960, np.float32), -127),
        (np.zeros(0, np.float32), -127),
        (np.ones(960, np.float32), 0),
        (np.full(960, 0.1, np.float32), -20),
        (np.full(960, 3277, np.int16), -20),
        (np.full(960, 1e-9, np.float32), -127),  # -180 dBov clamps
    ],
)
def test_level_dbov(pcm: np.ndarray, level: int) -> None:
    assert level_dbov(pcm) == level


def test_sender_stamps_seq_ts_level_and_dtx() -> None:
    sender = FrameSender(OpusEncoder(), seq=65534, ts_48k=0xFFFFFFFF - 959)
    speech = tone(0.1)
    messages = [
        m for i in range(0, len(speech), FRAME_SAMPLES) for m in sender.frame(speech[i : i + FRAME_SAMPLES])
    ]
    silent = [
        m for _ in range(DTX_HANGOVER_FRAMES + 3) for m in sender.frame(np.zeros(FRAME_SAMPLES, np.float32))
    ]
    headers = [FrameHeader.read(m) for m in messages + silent]
    assert [h.seq for h in headers[:4] if h] == [65534, 65535, 0, 1]
    assert [h.ts_48k for h in headers[:3] if h] == [0xFFFFFFFF - 959, 0, 960]
    assert {h.level_dbov for h in headers[:5] if h} <= {-13, -14}
    assert all(h is not None and h.level_dbov == -127 for h in headers[5:])
    for message, header in zip(messages + silent, headers, strict=True):
        assert header is not None
        assert header.dtx == (len(message) - 8 <= 2)  # the flag follows the packet size
    assert silent[-1][8:] and len(silent[-1]) - 8 == 1 and silent[-1][7] == FLAG_DTX
    third = headers[2]
    assert third is not None and len(messages[2]) - 8 > 2 and not third.dtx


def test_sender_pads_a_short_last_frame() -> None:
    sender = FrameSender(OpusEncoder())
    assert len(sender.frame(tone(0.005))) == 1 and sender.ts_48k == 960
