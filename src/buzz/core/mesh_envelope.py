"""The mesh media envelope of huddle.md §9.7, without I/O.

`[env_version 0x01][direction][session 16][generation u64][owner 32][sender 32][seq u64]
[target_index][author_index][frame…]`: bytes 0–98 are the fenced header, bytes 99 onward are the
single-process relay → client message, so the payload always begins with the author's index.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

ENV_VERSION = 0x01
INGRESS, FANOUT = 0x01, 0x02
NO_PEER = 0xFF  # target_index of an ingress envelope
HEADER_LEN = 99
MIN_LEN = 101  # header + author_index + at least one frame byte
_HEAD = struct.Struct(">BB16sQ32s32sQB")


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


def unpack(data: bytes) -> Envelope | None:
    """The envelope, or None when shorter than MIN_LEN or of an unknown version/direction
    (the receiver drops and counts it)."""
    if len(data) < MIN_LEN or data[0] != ENV_VERSION or data[1] not in (INGRESS, FANOUT):
        return None
    _v, direction, session, generation, owner, sender, seq, target = _HEAD.unpack_from(data)
    return Envelope(
        direction,
        str(uuid.UUID(bytes=session)),
        generation,
        owner.hex(),
        sender.hex(),
        seq,
        target,
        data[HEADER_LEN],
        bytes(data[HEADER_LEN + 1 :]),
    )
