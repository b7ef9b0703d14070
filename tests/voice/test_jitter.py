"""Jitter buffer, playout clock, client roster and receiver (huddle.md §5.5, §6.5, §10.3)."""

from __future__ import annotations

import numpy as np
import pytest

from buzz.core.huddle_control import Joined, Left, RosterEntry
from buzz.core.huddle_wire import FrameHeader, client_frame, relay_frame
from buzz.voice.jitter import MISSING, JitterBuffer, PlayoutClock
from buzz.voice.receiver import Receiver
from buzz.voice.roster import ClientRoster

A, B, C = "a" * 64, "b" * 64, "c" * 64


def feed(buf: JitterBuffer, seqs: list[int], start_ms: float = 0.0) -> None:
    """Push packets whose payload is their seq, arriving in list order 20 ms apart."""
    for i, seq in enumerate(seqs):
        buf.push(
            seq & 0xFFFF, (seq * 960) & 0xFFFFFFFF, seq.to_bytes(4, "big", signed=True), start_ms + 20 * i
        )


def drain(buf: JitterBuffer, start_ms: float, slots: int) -> list[int | str | None]:
    out: list[int | str | None] = []
    for i in range(slots):
        slot = buf.pop(start_ms + 20 * i)
        if isinstance(slot, bytes):
            out.append(int.from_bytes(slot, "big", signed=True))
        else:
            out.append("missing" if slot is MISSING else None)
    return out


def test_waits_for_the_target_delay_then_plays_in_order() -> None:
    buf = JitterBuffer()
    assert buf.target_delay_ms == 40
    buf.push(0, 0, b"\x00\x00\x00\x00", 0.0)
    assert buf.pop(39.0) is None  # still buffering
    feed(buf, [1, 2, 3], start_ms=20.0)
    assert drain(buf, 40.0, 4) == [0, 1, 2, 3]


CASES = [
    # (arrival order, expected playout) — all arrive before playout starts at 100 ms
    ([0, 2, 1, 3], [0, 1, 2, 3]),
    ([0, 1, 3, 4], [0, 1, "missing", 3, 4]),
    ([0, 1, 1, 2], [0, 1, 2]),  # duplicate dropped
    ([65534, 65535, 0, 1], [65534, 65535, 65536, 65537]),  # u16 wrap (payload keeps the unwrapped seq)
]


@pytest.mark.parametrize(("arrivals", "expected"), CASES)
def test_reorder_loss_duplicate_wrap(arrivals: list[int], expected: list[int | str]) -> None:
    buf = JitterBuffer(min_delay_ms=100)
    for i, seq in enumerate(arrivals):
        payload_seq = seq + 65536 if arrivals[0] > 60000 and seq < 100 else seq
        buf.push(seq, (payload_seq * 960) & 0xFFFFFFFF, payload_seq.to_bytes(4, "big", signed=True), 5.0 * i)
    assert drain(buf, 100.0, len(expected)) == expected


def test_late_packet_is_dropped_and_counted() -> None:
    buf = JitterBuffer()
    feed(buf, [0, 2, 3])
    assert drain(buf, 60.0, 2) == [0, "missing"]
    buf.push(1, 960, b"late", 100.0)
    assert buf.stats.late == 1


def test_underrun_rebuffers() -> None:
    buf = JitterBuffer()
    feed(buf, [0, 1])
    assert drain(buf, 40.0, 3) == [0, 1, None]
    assert buf.stats.underruns == 1 and not buf.playing
    buf.push(2, 2 * 960, (2).to_bytes(4, "big"), 200.0)
    assert buf.target_delay_ms == 60  # the 160 ms late arrival raised the jitter estimate
    assert buf.pop(240.0) is None  # waiting the target delay again
    assert buf.pop(260.0) == (2).to_bytes(4, "big")


def test_capacity_caps_held_packets() -> None:
    buf = JitterBuffer()
    for seq in range(60):
        buf.push(seq, seq * 960, b"x", 0.0)
    assert len(buf) == 50 and buf.stats.overflow == 10


def test_backlog_beyond_target_is_skipped() -> None:
    buf = JitterBuffer()
    for seq in range(20):  # a 400 ms burst
        buf.push(seq, seq * 960, (seq).to_bytes(4, "big"), 0.0)
    first = buf.pop(1000.0)
    assert isinstance(first, bytes)
    assert int.from_bytes(first, "big") > 0 and buf.stats.skipped > 0


def test_target_delay_adapts_to_jitter_and_is_clamped() -> None:
    buf = JitterBuffer()
    rng = np.random.default_rng(1)
    for seq in range(200):
        buf.push(seq, seq * 960, b"x", seq * 20 + float(rng.uniform(0, 60)))
        if len(buf) > 40:
            buf.pop(seq * 20.0)
    assert 40 < buf.target_delay_ms <= 200
    wild = JitterBuffer()
    for seq in range(100):
        wild.push(seq, seq * 960, b"x", seq * 20 + (500.0 if seq % 2 else 0.0))
    assert wild.target_delay_ms == 200


def test_sequence_jump_restarts_the_buffer() -> None:
    buf = JitterBuffer()
    feed(buf, [0, 1])
    buf.push(30000, 0, b"new", 100.0)
    assert buf.stats.resyncs == 1 and len(buf) == 1


@pytest.mark.parametrize(
    ("times", "ticks"),
    [
        ([0.0], [1]),
        ([0.0, 5.0, 10.0, 35.0], [1, 0, 1, 2]),
        ([0.0, 300.0], [1, 30]),  # 290 ms late: catch up
        ([0.0, 400.0, 405.0, 410.0], [1, 1, 0, 1]),  # 390 ms late: reset the schedule
    ],
)
def test_playout_clock(times: list[float], ticks: list[int]) -> None:
    clock = PlayoutClock()
    assert [clock.due(t) for t in times] == ticks


def test_roster_applies_newer_revisions_only() -> None:
    roster = ClientRoster()
    change = roster.apply(Joined(5, B, 1, (RosterEntry(0, A), RosterEntry(1, B))))
    assert change is not None and change.joined == {0, 1} and roster.self_index == 1
    assert roster.apply(Joined(5, C, 2, (RosterEntry(2, C),))) is None  # not newer
    change = roster.apply(Joined(6, C, 0, (RosterEntry(0, C), RosterEntry(1, B))))
    assert change is not None and change.reset == {0} and change.joined == {0}  # index 0 changed pubkey
    change = roster.apply(Left(7, C, 0))
    assert change is not None and change.reset == {0} and 0 not in roster and roster.self_index == 1


class FakeDecoder:
    """Decodes a packet to 960 copies of its first byte; conceals as -1."""

    def decode(self, packet: bytes) -> np.ndarray:
        return np.full(960, packet[0], np.int16)

    def conceal(self) -> np.ndarray:
        return np.full(960, -1, np.int16)


def frame(index: int, seq: int, value: int, *, dtx: bool = False) -> bytes:
    header = FrameHeader(seq, seq * 960, -20, 0x01 if dtx else 0)
    return relay_frame(index, client_frame(header, bytes([value])))


def joined_ab() -> Joined:
    return Joined(1, A, 0, (RosterEntry(0, A), RosterEntry(3, B)))


def test_receiver_drops_unknown_and_short_frames() -> None:
    rx = Receiver(FakeDecoder, protocol_version=2)
    assert not rx.on_frame(frame(3, 0, 7), 0.0)  # no roster yet
    rx.on_control(joined_ab())
    assert rx.on_frame(frame(3, 0, 7), 0.0)
    assert not rx.on_frame(frame(9, 0, 7), 0.0)  # index not in roster
    assert not rx.on_frame(frame(3, 1, 7)[:9], 0.0)  # 9 bytes: no payload
    assert rx.dropped == 3


def test_receiver_ticks_480_samples_per_peer_in_order() -> None:
    rx = Receiver(FakeDecoder, protocol_version=2)
    rx.on_control(joined_ab())
    for seq in range(4):
        rx.on_frame(frame(3, seq, 10 + seq), seq * 20.0)
    out = [rx.tick(40.0 + 10 * i)[3] for i in range(8)]
    assert all(len(buf) == 480 for buf in out)
    assert [int(buf[0]) for buf in out] == [10, 10, 11, 11, 12, 12, 13, 13]


def test_receiver_idle_peer_and_speaking() -> None:
    rx = Receiver(FakeDecoder, protocol_version=2)
    rx.on_control(joined_ab())
    rx.on_frame(frame(3, 0, 1, dtx=True), 0.0)
    assert rx.speaking(10.0) == set()  # DTX never marks speaking
    rx.on_frame(frame(3, 1, 1), 20.0)
    assert rx.speaking(30.0) == {3}
    assert rx.speaking(600.0) == set()
    for t in range(60, 200, 10):
        rx.tick(float(t))
    assert 3 in rx.tick(200.0)  # within the idle grace
    assert rx.tick(600.0) == {}  # silent for 500 ms with an empty buffer: not pulled


def test_receiver_resets_peer_state_on_left() -> None:
    rx = Receiver(FakeDecoder, protocol_version=2)
    rx.on_control(joined_ab())
    rx.on_frame(frame(3, 0, 1), 0.0)
    rx.on_control(Left(2, B, 3))
    assert rx.tick(100.0) == {}
    assert not rx.on_frame(frame(3, 1, 1), 120.0)


class CountingDecoder(FakeDecoder):
    made = 0

    def __init__(self) -> None:
        CountingDecoder.made += 1
        self.serial = CountingDecoder.made


def v3_frame(index: int, epoch: int, seq: int, value: int) -> bytes:
    return relay_frame(index, client_frame(FrameHeader(seq, seq * 960, -20, 0), bytes([value])), epoch)


def test_index_reuse_gets_a_fresh_decoder_and_stale_epochs_are_dropped() -> None:
    """Issue 13 item 5: Bob (index 3, epoch 0) leaves, Carol gets index 3 with epoch 1."""
    rx = Receiver(CountingDecoder)
    rx.on_control(Joined(1, A, 0, (RosterEntry(0, A), RosterEntry(3, B, 0)), 0))
    assert rx.on_frame(v3_frame(3, 0, 0, 1), 0.0)
    rx.tick(40.0)
    bobs = rx._peers[3].decoder
    rx.on_control(Left(2, B, 3, 0))
    assert 3 not in rx._peers  # decoder and jitter buffer of the leaver are gone
    assert not rx.on_frame(v3_frame(3, 0, 1, 1), 60.0)  # index not in the roster now
    carol = "cc" * 32
    rx.on_control(Joined(3, carol, 3, (RosterEntry(0, A), RosterEntry(3, carol, 1)), 1))
    assert not rx.on_frame(v3_frame(3, 0, 2, 1), 80.0)  # Bob's frame still in flight: old epoch
    assert rx.on_frame(v3_frame(3, 1, 0, 2), 100.0)
    assert rx._peers[3].decoder is not bobs and rx._peers[3].jitter is not None
    assert rx.dropped == 2
    assert not rx.on_frame(v3_frame(3, 1, 1, 2)[:10], 120.0)  # v3: 10 bytes carry no payload


def test_joined_with_a_new_epoch_for_the_same_pubkey_resets_that_slot() -> None:
    roster = ClientRoster()
    roster.apply(Joined(1, A, 0, (RosterEntry(0, A), RosterEntry(3, B, 0))))
    change = roster.apply(Joined(2, B, 3, (RosterEntry(0, A), RosterEntry(3, B, 1)), 1))
    assert change is not None and change.reset == frozenset({3}) and change.joined == frozenset({3})
    assert roster.holds(3, 1) and not roster.holds(3, 0)
