"""The mesh media envelope of huddle.md §9.7, without I/O.

`[env_version 0x01][direction][session 16][generation u64][owner 32][sender 32][seq u64]
[target_index][author_index][frame…]`: bytes 0–98 are the fenced header, bytes 99 onward are the
single-process relay → client message, so the payload always begins with the author's index.

Batches (docs/decisions.md, "mesh media batches"): one Redis message may carry several envelopes
for one receiver, `[0xB1]` then `[u16 length][envelope]…`; a lone envelope is sent bare, as
§9.9 says. The envelopes inside are unchanged, each checked on its own.
"""

from __future__ import annotations

import functools
import struct
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

ENV_VERSION = 0x01
INGRESS, FANOUT = 0x01, 0x02
NO_PEER = 0xFF  # target_index of an ingress envelope
HEADER_LEN = 99
MIN_LEN = 101  # header + author_index + at least one frame byte
_HEAD = struct.Struct(">BB16sQ32s32sQB")
FIXED_LEN = 90  # version … sender: the same for every envelope of one stream
_TAIL = struct.Struct(">QBB")  # seq, target_index, author_index
BATCH = 0xB1  # first byte of a batch (never a valid env_version)
_LEN = struct.Struct(">H")
MAX_BATCH_BYTES = 60_000  # a batch is cut before it grows past this


@dataclass(frozen=True, slots=True)
class Envelope:
    direction: int
    session_id: str  # canonical channel UUID
    generation: int
    owner: str  # runtime id hex
    sender: str  # runtime id hex
    seq: int
    target_index: int
    author_index: int
    frame: bytes  # the client frame exactly as received

    def pack(self) -> bytes:
        head = _HEAD.pack(
            ENV_VERSION,
            self.direction,
            uuid.UUID(self.session_id).bytes,
            self.generation,
            bytes.fromhex(self.owner),
            bytes.fromhex(self.sender),
            self.seq % 2**64,
            self.target_index,
        )
        return head + bytes((self.author_index,)) + self.frame

    @property
    def payload(self) -> bytes:
        """`[author_index][frame]`: what a v1/v2 client receives."""
        return bytes((self.author_index,)) + self.frame


def fixed_part(direction: int, session_id: str, generation: int, owner: str, sender: str) -> bytes:
    """Bytes 0–89 (version … sender), packed once per stream: `pack_fast` adds the rest."""
    return _HEAD.pack(
        ENV_VERSION, direction, uuid.UUID(session_id).bytes, generation, bytes.fromhex(owner),
        bytes.fromhex(sender), 0, 0,
    )[:FIXED_LEN]  # fmt: skip


def pack_fast(fixed: bytes, seq: int, target_index: int, author_index: int, frame: bytes) -> bytes:
    """The same bytes as `Envelope.pack`, from a `fixed_part` (the per-frame hot path)."""
    return fixed + _TAIL.pack(seq % 2**64, target_index, author_index) + frame


@functools.lru_cache(maxsize=1024)
def _fixed(raw: bytes) -> tuple[int, str, int, str, str]:
    _v, direction, session, generation, owner, sender = struct.unpack(">BB16sQ32s32s", raw)
    return direction, str(uuid.UUID(bytes=session)), generation, owner.hex(), sender.hex()


def unpack(data: bytes) -> Envelope | None:
    """The envelope, or None when shorter than MIN_LEN or of an unknown version/direction
    (the receiver drops and counts it)."""
    if len(data) < MIN_LEN or data[0] != ENV_VERSION or data[1] not in (INGRESS, FANOUT):
        return None
    direction, session, generation, owner, sender = _fixed(bytes(data[:FIXED_LEN]))
    seq, target, author = _TAIL.unpack_from(data, FIXED_LEN)
    return Envelope(direction, session, generation, owner, sender, seq, target, author,
                    bytes(data[HEADER_LEN + 1 :]))  # fmt: skip


def pack_batch(envelopes: Sequence[bytes]) -> bytes:
    """One message for several envelopes to one receiver; a single one is returned bare."""
    if len(envelopes) == 1:
        return envelopes[0]
    parts = [bytes((BATCH,))]
    for env in envelopes:
        parts += (_LEN.pack(len(env)), env)
    return b"".join(parts)


def split_batch(data: bytes) -> list[bytes] | None:
    """The envelopes of one received message: `[data]` for a bare envelope, the parts of a
    batch, or None when a batch's lengths do not add up (the whole message is dropped)."""
    if not data or data[0] != BATCH:
        return [data]
    out, pos, end = [], 1, len(data)
    while pos < end:
        if pos + 2 > end:
            return None
        (n,) = _LEN.unpack_from(data, pos)
        pos += 2
        if n == 0 or pos + n > end:
            return None
        out.append(data[pos : pos + n])
        pos += n
    return out or None
