"""Huddle audio socket wire format, with no I/O (huddle.md §2, §6, §11.1).

The huddle's pure core is three modules, each usable on its own by the relay's aiohttp handler
or by the client:

- this one: the §11.1 table as named values (seconds are float, sizes in bytes) and the media
  frames: the v2 8-byte header (§6.1), the relay's ingress size rule (§6.2), the 1-byte
  `peer_index` prefix of relay → client frames (§6.3) and the client's receive rule (§6.5);
- `huddle_control`: the JSON text messages of the socket (§3, §4.2, §5.5–§5.7) as frozen
  dataclasses with `to_text()` and two parsers, one per direction;
- `huddle_admission`: `Room` / `RoomRegistry`, the §5 admission and cleanup decisions.

Errors: `HuddleWireError` (a ValueError) for a message the client must refuse (§10.1).
"""

from __future__ import annotations

import enum
import re
import struct
from dataclasses import dataclass

# -- §11.1 constants ------------------------------------------------------------------------------
HUDDLE_AUDIO_PATH = "/huddle/{channel_id}/audio"
AUTH_TIMEOUT = 5.0  # s, relay wait for `auth` (§3.2)
CHALLENGE_BYTES = 32  # sent as 64 lowercase hex (§3.1)
AUTH_MAX_SKEW = 60  # s, |now - created_at| of the 22242 event (§3.4)
MAX_WEBSOCKET_MESSAGE_BYTES = 8192  # parser cap, aiohttp max_msg_size (§2.3)
MAX_TEXT_FRAME_BYTES = 8192  # longer text is ignored (§2.3)
MAX_AUDIO_FRAME_BYTES = 4096  # inbound binary above this is dropped (§2.3, §6.2)
HEARTBEAT_INTERVAL = 30.0  # s, first tick at once (§2.4)
MAX_MISSED_PONGS = 3
CURRENT_PROTOCOL_VERSION = 3  # highest accepted: v3 of §6.6 (per-index epoch)
DEFAULT_PROTOCOL_VERSION = 1  # when `auth` omits protocol_version (§3.2)
MAX_PEERS_PER_ROOM = 25  # seat cap, checked before index allocation (§5.3)
MAX_PEER_INDEX = 254  # valid indices are 0..254
NO_PEER_INDEX = 255  # never assigned; "no peer" in §9
AUDIO_QUEUE_CAPACITY = 8  # frames (160 ms) per peer, drop the oldest when full (§7.2, issue 13)
AUDIO_BUDGET_MS = 200  # issue 13: audio buffered per receiver, queue + transport + kernel send queue
# What a seat may send (issue 24 item 15, docs/limits.md), as token buckets per seat. Frames
# fanned out: 50 frames/s is a live microphone, half as much again so that a sender whose
# frames were held back (a stall of its own, the network's, the relay's) refills its burst within
# 4 s, a burst of 2 s for one catching up after a stall; beyond it they are dropped, counted, not
# logged. Messages read: ten times that; beyond it the socket is not read until the bucket
# refills, so a flood costs the relay a bounded number of reads (TCP slows the sender down).
SEAT_FRAME_RATE = 75  # frames/s fanned out, on average
SEAT_FRAME_BURST = 100  # frames at once
SEAT_READ_RATE = 500  # messages/s read, on average
SEAT_READ_BURST = 500  # messages at once
CONTROL_QUEUE_CAPACITY = 32  # messages per peer, warn when full (§7.3)
WS_CONTROL_QUEUE = 8  # per-socket writer queues, control written first (§7.4)
WS_AUDIO_QUEUE = 16
V2_HEADER_LEN = 8  # bytes (§6.1)
FRAME_SAMPLES = 960  # 20 ms at 48 kHz
TS_STEP = 960  # ts_48k increment per frame
RELAY_PREFIX_LEN = 1  # [peer_index] for v1 and v2
RELAY_PREFIX_LEN_V3 = 2  # [peer_index][epoch]
EPOCH_MODULUS = 256
LEASE_TTL = 30.0  # s (§9.3)
LEASE_RENEW_INTERVAL = 10.0  # s (§9.5)
LEASE_PROFILE = "huddle-control"
OWNER_READY_RETRY_DELAY = 0.020  # s, x OWNER_READY_RETRY_ATTEMPTS (§9.4)
OWNER_READY_RETRY_ATTEMPTS = 25
LEASE_RELEASE_RETRIES = 5  # backoff LEASE_RELEASE_BACKOFF * 2**n (§9.5)
LEASE_RELEASE_BACKOFF = 0.025  # s
MESH_ENVELOPE_VERSION = 1
MESH_HEADER_LEN = 99  # bytes (§9.7)
MESH_READY_REFRESH = 15.0  # s, registry TTL MESH_READY_TTL (§9.9)
MESH_READY_TTL = 45.0
MESH_CONTROL_KEEPALIVE = 5.0  # s, stream closed after MESH_CONTROL_SILENCE
MESH_CONTROL_SILENCE = 15.0
HUDDLE_CHANNEL_TTL = 3600  # s (§8.4)
MAX_HUDDLE_AGENTS = 20
CLIENT_CHALLENGE_TIMEOUT = 5.0  # s, client waits for `challenge` (§10.1)
CLIENT_JOINED_TIMEOUT = 5.0  # s, after `auth` until `joined`
CLIENT_HANDSHAKE_TIMEOUT = 15.0  # s, whole handshake including signing
CLIENT_MAX_MESSAGE_BYTES = 65536  # client parser cap
CLIENT_MAX_CHALLENGE_CHARS = 4096
CLIENT_MAX_ROSTER = 256
CLIENT_MAX_ERROR_DISPLAY = 240  # characters of an error `message` shown to a user (§4.3)
OPUS_BITRATE = 32000  # bit/s, application VOIP, DTX on (§10.2)
DTX_MAX_PACKET = 2  # bytes; packets this small are flagged DTX
JITTER_MIN_DELAY_MS = 40  # adaptive per-peer target delay range (§10.3)
JITTER_MAX_DELAY_MS = 200
JITTER_MAX_PACKETS = 50
PLAYOUT_TICK_MS = 10  # 480 samples at 48 kHz
PLAYOUT_TICK_SAMPLES = 480
PLAYOUT_STALL_RESET_MS = 300
IDLE_PEER_GRACE_MS = 500
SPEAKER_TICK_MS = 500
STT_SAMPLE_RATE = 16000  # Hz (§10.4)
AGENT_REFRESH = 15.0  # s (§10.5)
STT_QUEUE_DEPTH = 50  # batches of about 100 ms
VAD_FRAME = 320  # samples, 20 ms at 16 kHz
VAD_THRESHOLD = 0.5
SILENCE_FLUSH_MS = 300
MAX_UTTERANCE_SAMPLES = 480_000  # 30 s at 16 kHz
TTS_SAMPLE_RATE = 24000  # Hz (§10.6)
TTS_MAX_CHUNK_CHARS = 200
TTS_QUEUE_DEPTH = 8
TTS_LEAD_IN_MS = 20
TTS_FADE_OUT_MS = 8
TTS_SENTENCE_GAP_MS = 100
BARGE_IN_LOCAL_MS = 320  # (§10.7)
BARGE_IN_MIN_MS = 300  # issue 13: speech needed before local or remote barge-in stops TTS
BARGE_IN_GAP_MS = 200  # a remote talk spurt ends after this long without a non-DTX frame
BARGE_IN_REMOTE_FRAMES = 5  # non-DTX frames in one BARGE_IN_REMOTE_WINDOW_MS window
BARGE_IN_REMOTE_WINDOW_MS = 500
FLOOR_RELEASE_MS = 500
TTS_CANCEL_LATENCY_MS = 20
TTS_COOLDOWN_MS = 50

FLAG_DTX = 0x01
FLAGS_RESERVED = 0xFE
LEVEL_SILENCE_DBOV = -127
REVISION_MODULUS = 2**64

_UUID_RE = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_HEADER = struct.Struct(">HIbB")


class HuddleWireError(ValueError):
    """A message the client must refuse (huddle.md §10.1); raised by `parse_server_message`."""


def is_canonical_uuid(value: object) -> bool:
    """True for a str in the 8-4-4-4-12 hex form (§2.1 channel ids, §3.2 parent_channel_id)."""
    return isinstance(value, str) and _UUID_RE.match(value) is not None


# -- §6 media frames ------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class FrameHeader:
    """The v2 header (huddle.md §6.1): `seq` u16, `ts_48k` u32, `level_dbov` i8, `flags` u8.

    `level_dbov` is in dBov, −127 (silence) … 0. `flags` bit 0 is DTX; bits 1–7 are reserved
    and kept as received.
    """

    seq: int
    ts_48k: int
    level_dbov: int = LEVEL_SILENCE_DBOV
    flags: int = 0

    @property
    def dtx(self) -> bool:
        return bool(self.flags & FLAG_DTX)

    def pack(self) -> bytes:
        """The 8 header bytes. Raises ValueError when a field is outside its wire range."""
        if not (0 <= self.seq <= 0xFFFF and 0 <= self.ts_48k <= 0xFFFFFFFF and 0 <= self.flags <= 0xFF):
            raise ValueError(f"header field out of range: {self}")
        if not LEVEL_SILENCE_DBOV <= self.level_dbov <= 0:
            raise ValueError(f"level_dbov must be -127..0, got {self.level_dbov}")
        return _HEADER.pack(self.seq, self.ts_48k, self.level_dbov, self.flags)

    @classmethod
    def read(cls, frame: bytes) -> FrameHeader | None:
        """Read the header at the start of a client frame, for telemetry only (§6.2 item 3).

        Returns None when `frame` is shorter than 8 bytes. A `level_dbov` outside −127…0 reads
        as −127; reserved flag bits are kept. Never a reason to drop a frame.
        """
        if len(frame) < V2_HEADER_LEN:
            return None
        seq, ts, level, flags = _HEADER.unpack_from(frame)
        if not LEVEL_SILENCE_DBOV <= level <= 0:
            level = LEVEL_SILENCE_DBOV
        return cls(seq, ts, level, flags)


def client_frame(header: FrameHeader, opus_packet: bytes) -> bytes:
    """A v2 client → relay binary message: header then the Opus packet (≥ 1 byte, §6.1)."""
    if not opus_packet:
        raise ValueError("a v2 frame needs at least one Opus byte")
    return header.pack() + opus_packet


class Ingress(enum.Enum):
    """The relay's verdict on one inbound binary message (huddle.md §6.2): size is the only reason."""

    FORWARD = "forward"
    TOO_LARGE = "too_large"  # over MAX_AUDIO_FRAME_BYTES: drop with a warning log
    TOO_SHORT = "too_short"  # v2/v3 frame of 8 bytes or fewer: header missing or empty payload


def ingress_verdict(frame: bytes, protocol_version: int) -> Ingress:
    """Decide whether the relay forwards `frame` from a socket speaking `protocol_version`."""
    if len(frame) > MAX_AUDIO_FRAME_BYTES:
        return Ingress.TOO_LARGE
    if protocol_version >= 2 and len(frame) <= V2_HEADER_LEN:
        return Ingress.TOO_SHORT
    return Ingress.FORWARD


def relay_frame(peer_index: int, frame: bytes, epoch: int | None = None) -> bytes:
    """The relay → client message `[peer_index][frame exactly as received]` (§6.3, v1 and v2),
    or `[peer_index][epoch][frame]` for a v3 receiver (§6.6) when `epoch` is given."""
    if not 0 <= peer_index <= MAX_PEER_INDEX:
        raise ValueError(f"peer_index must be 0..254, got {peer_index}")
    if epoch is None:
        return bytes((peer_index,)) + frame
    return bytes((peer_index, epoch % EPOCH_MODULUS)) + frame


def prefix_len(protocol_version: int) -> int:
    """Bytes the relay puts before a client frame for a receiver of this version (§6.3, §6.6)."""
    return RELAY_PREFIX_LEN_V3 if protocol_version >= 3 else RELAY_PREFIX_LEN


def same_media_format(a: int, b: int) -> bool:
    """Whether clients of versions `a` and `b` can share a room (issue 13: v2 and v3 do).

    v2 and v3 send the same client → relay frames (8-byte header); only the relay → client
    prefix and the epoch fields differ, and the relay produces those per receiver. v1 has no
    header, so it shares a room only with v1.
    """
    return (a >= 2) == (b >= 2)


@dataclass(frozen=True, slots=True)
class ReceivedFrame:
    """One relay → client frame split into its parts. `header` is None on a v1 room."""

    peer_index: int
    header: FrameHeader | None
    opus_packet: bytes
    epoch: int = 0


def parse_relay_frame(
    message: bytes, protocol_version: int = CURRENT_PROTOCOL_VERSION
) -> ReceivedFrame | None:
    """Split a relay → client binary message (§6.3), or None when §6.5 says drop it.

    v3: 10 bytes or fewer is dropped, the second byte is the epoch. v2: 9 bytes or fewer (no
    payload) is dropped. v1: the prefix must be followed by at least one Opus byte. The roster
    check (unknown `peer_index` or epoch) is the caller's, it holds the roster.
    """
    if protocol_version >= 3:
        if len(message) <= RELAY_PREFIX_LEN_V3 + V2_HEADER_LEN:
            return None
        header = FrameHeader.read(message[RELAY_PREFIX_LEN_V3:])
        body = message[RELAY_PREFIX_LEN_V3 + V2_HEADER_LEN :]
        return ReceivedFrame(message[0], header, body, message[1])
    if protocol_version >= 2:
        if len(message) <= RELAY_PREFIX_LEN + V2_HEADER_LEN:
            return None
        header = FrameHeader.read(message[RELAY_PREFIX_LEN:])
        return ReceivedFrame(message[0], header, message[RELAY_PREFIX_LEN + V2_HEADER_LEN :])
    if len(message) <= RELAY_PREFIX_LEN:
        return None
    return ReceivedFrame(message[0], None, message[RELAY_PREFIX_LEN:])
