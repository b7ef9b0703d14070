"""`--record-dir` recordings from the packets received, in `seq` order (decision 276).

Real libopus on both sides: a tone is encoded as a sender would, and what the recorder writes
is compared with decoding the same packets straight through in order.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from buzz.core.huddle_control import Joined, Left, RosterEntry
from buzz.core.huddle_wire import FRAME_SAMPLES, parse_relay_frame, relay_frame
from buzz.voice.opus import OpusDecoder, OpusEncoder
from buzz.voice.receiver import Receiver
from buzz.voice.recording import MAX_HOLE_SAMPLES, REORDER_WINDOW, PeerRecorder
from buzz.voice.sender import FrameSender
from buzz.voice.wav import PeerWavs, read_wav

LISTENER, SPEAKER, NEWCOMER = "a" * 64, "b" * 64, "c" * 64
FRAMES = 40


class Collected:
    """The recorder's sink: PCM per peer index, in the order written."""

    def __init__(self) -> None:
        self.pcm: dict[int, list[np.ndarray]] = {}

    def append(self, index: int, pcm: np.ndarray) -> None:
        self.pcm.setdefault(index, []).append(pcm)

    def samples(self, index: int) -> np.ndarray:
        return np.concatenate(self.pcm[index])


def tone_packets(frames: int = FRAMES) -> list[tuple[int, int, bytes]]:
    """(seq, ts_48k, opus packet) of a 440 Hz tone, as a real sender stamps them."""
    sender = FrameSender(OpusEncoder())
    t = np.arange(frames * FRAME_SAMPLES) / 48000
    pcm = (np.sin(2 * np.pi * 440 * t) * 8000).astype(np.int16)
    out = []
    for i in range(frames):
        for message in sender.frame(pcm[i * FRAME_SAMPLES : (i + 1) * FRAME_SAMPLES]):
            frame = parse_relay_frame(relay_frame(3, message), 2)
            assert frame is not None and frame.header is not None
            out.append((frame.header.seq, frame.header.ts_48k, frame.opus_packet))
    return out


def straight(packets: list[tuple[int, int, bytes]]) -> list[np.ndarray]:
    decoder = OpusDecoder()
    return [decoder.decode(p) for _, _, p in packets]


def record(packets: list[tuple[int, int, bytes]], index: int = 3) -> tuple[Collected, PeerRecorder]:
    sink = Collected()
    recorder = PeerRecorder(sink, OpusDecoder)
    for seq, ts, packet in packets:
        recorder.packet(index, seq, ts, packet)
    recorder.close()
    return sink, recorder


def test_in_order_packets_are_recorded_whole() -> None:
    packets = tone_packets()
    sink, recorder = record(packets)
    assert np.array_equal(sink.samples(3), np.concatenate(straight(packets)))
    assert recorder.late == 0


def test_reordered_packets_are_written_in_seq_order() -> None:
    packets = tone_packets()
    shuffled = [*packets[:5], packets[7], packets[5], packets[6], *packets[8:]]
    sink, _ = record(shuffled)
    assert np.array_equal(sink.samples(3), np.concatenate(straight(packets)))


def test_a_lost_packet_is_one_frame_of_silence_in_its_place() -> None:
    packets = tone_packets()
    kept = packets[:10] + packets[11:]
    sink, _ = record(kept)
    heard = sink.samples(3)
    assert len(heard) == FRAMES * FRAME_SAMPLES  # the timeline is the sender's
    assert not heard[10 * FRAME_SAMPLES : 11 * FRAME_SAMPLES].any()
    decoded = straight(kept)
    assert np.array_equal(heard[: 10 * FRAME_SAMPLES], np.concatenate(decoded[:10]))


def test_a_lost_packet_is_skipped_once_the_reorder_window_fills() -> None:
    packets = tone_packets(REORDER_WINDOW + 10)
    sink = Collected()
    recorder = PeerRecorder(sink, OpusDecoder)
    for seq, ts, packet in packets[:2] + packets[3:]:
        recorder.packet(3, seq, ts, packet)
    # before the end: everything but the last few held packets is already written
    assert sum(len(p) for p in sink.pcm[3]) >= (REORDER_WINDOW - 10) * FRAME_SAMPLES
    recorder.packet(3, *packets[2])  # too late: its place was written as silence
    assert recorder.late == 1


def test_a_paused_sender_is_silence_as_long_as_its_timestamps_say_bounded() -> None:
    packets = tone_packets(4)
    seq, ts, packet = packets[3]
    paused = [*packets[:3], (seq, ts + 48000, packet)]  # 1 s more before the 4th frame
    sink, _ = record(paused)
    assert len(sink.samples(3)) == 4 * FRAME_SAMPLES + 48000
    hostile = [*packets[:3], (seq, ts + 2**30, packet)]
    sink, _ = record(hostile)
    assert len(sink.samples(3)) == 4 * FRAME_SAMPLES + MAX_HOLE_SAMPLES


def test_recording_does_not_depend_on_the_playout_clock(tmp_path: Path) -> None:
    """A receiving loop that stalled: a second of packets lands at one instant and playout
    ticks only afterwards. The jitter buffer skips the backlog; the recording keeps it all."""
    packets = tone_packets(50)
    wavs = PeerWavs(tmp_path)
    recorder = PeerRecorder(wavs, OpusDecoder)
    receiver = Receiver(protocol_version=2, tap=recorder)
    receiver.on_control(Joined(2, LISTENER, 0, (RosterEntry(0, LISTENER), RosterEntry(3, SPEAKER))))
    sender = FrameSender(OpusEncoder())
    t = np.arange(50 * FRAME_SAMPLES) / 48000
    tone = (np.sin(2 * np.pi * 440 * t) * 8000).astype(np.int16)
    for i in range(50):
        for message in sender.frame(tone[i * FRAME_SAMPLES : (i + 1) * FRAME_SAMPLES]):
            assert receiver.on_frame(relay_frame(3, message), 0.0)
    played = np.concatenate(
        [receiver.tick(1000.0 + 10 * k).get(3, np.zeros(0, np.int16)) for k in range(100)]
    )
    recorder.close()
    wavs.close()
    recorded, rate = read_wav(tmp_path / "peer-3.wav")
    assert rate == 48000
    assert np.array_equal(recorded, np.concatenate(straight(packets)))
    assert np.count_nonzero(played) < np.count_nonzero(recorded)  # playout lost the backlog


def test_a_new_occupant_of_an_index_starts_a_new_stream() -> None:
    packets = tone_packets(5)
    sink = Collected()
    recorder = PeerRecorder(sink, OpusDecoder)
    receiver = Receiver(protocol_version=3, tap=recorder)
    receiver.on_control(Joined(3, LISTENER, 0, (RosterEntry(0, LISTENER), RosterEntry(3, SPEAKER))))
    recorder.packet(3, *packets[0])
    recorder.packet(3, *packets[2])  # held: seq 1 may still come
    receiver.on_control(Left(4, SPEAKER, 3))  # the speaker left: what was held is written
    assert sum(len(p) for p in sink.pcm[3]) == 3 * FRAME_SAMPLES
    recorder.packet(3, *packets[0])  # a newcomer restarts at seq 0: not "late"
    assert recorder.late == 0
