"""The mesh media envelope (huddle.md §9.7) and its Redis batches (docs/decisions.md 80)."""

from __future__ import annotations

import uuid

from buzz.core.mesh_envelope import (
    BATCH,
    FANOUT,
    HEADER_LEN,
    INGRESS,
    MIN_LEN,
    NO_PEER,
    Envelope,
    fixed_part,
    pack_batch,
    pack_fast,
    split_batch,
    unpack,
)

OWNER, SENDER = "a" * 64, "b" * 64


def envelope(seq: int = 5, frame: bytes = b"\x00\x01\x00\x00\x03\xc0\xec\x00\x78") -> Envelope:
    return Envelope(FANOUT, str(uuid.uuid4()), 7, OWNER, SENDER, seq, 3, 2, frame)


def test_layout_offsets_and_round_trip() -> None:
    env = envelope()
    data = env.pack()
    assert data[0] == 0x01 and data[1] == FANOUT
    assert data[2:18] == uuid.UUID(env.session_id).bytes
    assert int.from_bytes(data[18:26], "big") == 7
    assert data[26:58].hex() == OWNER and data[58:90].hex() == SENDER
    assert int.from_bytes(data[90:98], "big") == 5
    assert (data[98], data[HEADER_LEN]) == (3, 2)
    assert data[HEADER_LEN:] == env.payload  # bytes 99… are the single-process relay message
    assert unpack(data) == env


def test_fast_pack_is_byte_identical() -> None:
    env = envelope(seq=2**64 + 9)
    fixed = fixed_part(env.direction, env.session_id, env.generation, env.owner, env.sender)
    assert pack_fast(fixed, env.seq, env.target_index, env.author_index, env.frame) == env.pack()


def test_short_or_unknown_envelopes_are_refused() -> None:
    data = Envelope(INGRESS, str(uuid.uuid4()), 1, OWNER, SENDER, 0, NO_PEER, 0, b"\x78").pack()
    assert len(data) == MIN_LEN and unpack(data) is not None
    assert unpack(data[:-1]) is None
    assert unpack(b"\x02" + data[1:]) is None  # unknown env_version
    assert unpack(data[:1] + b"\x03" + data[2:]) is None  # unknown direction


def test_batches_split_back_and_a_lone_envelope_stays_bare() -> None:
    one, two = envelope(1).pack(), envelope(2).pack()
    assert pack_batch([one]) == one  # §9.9 as written: one envelope per message
    batch = pack_batch([one, two])
    assert batch[0] == BATCH
    assert split_batch(batch) == [one, two]
    assert split_batch(one) == [one]


def test_a_batch_whose_lengths_do_not_add_up_is_dropped_whole() -> None:
    batch = pack_batch([envelope(1).pack(), envelope(2).pack()])
    assert split_batch(batch[:-1]) is None  # truncated
    assert split_batch(batch + b"\x00") is None  # a dangling length byte
    assert split_batch(bytes((BATCH,)) + b"\x00\x00") is None  # a zero-length part
    assert split_batch(bytes((BATCH,))) is None  # empty
