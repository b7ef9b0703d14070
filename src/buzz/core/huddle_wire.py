"""Huddle audio socket wire format and room admission, with no I/O (huddle.md §2–§7, §11.1).

Four parts, each usable on its own by the relay's aiohttp handler or by the client:

- constants: the §11.1 table as named values (seconds are float, sizes in bytes);
- media frames: the v2 8-byte header (§6.1), the relay's ingress size rule (§6.2), the 1-byte
  `peer_index` prefix of relay → client frames (§6.3) and the client's receive rule (§6.5);
- control messages: the JSON text messages of the socket (§3, §4.2, §5.5–§5.7) as frozen
  dataclasses with `to_text()` and two parsers, one per direction;
- `Room` / `RoomRegistry`: the §5 admission and cleanup decisions. The relay wraps each call in
  the room's admission lock and owns the sockets and queues (the `sink` it passes in).

Errors: `HuddleWireError` (a ValueError) for a message the client must refuse (§10.1). The relay
never raises on client input: `parse_client_message` returns None for anything to ignore (§3.3),
`read_client_message` an `Ignored` that says why.
"""

from __future__ import annotations

import collections
import enum
import re
import secrets
import struct
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

import orjson

from buzz.core.keys import is_hex

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


def _is_int(value: object) -> bool:
    return type(value) is int  # JSON true/false are not integers


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


# -- §3–§5 control messages -----------------------------------------------------------------------
def _dumps(obj: Mapping[str, Any]) -> str:
    return orjson.dumps(obj).decode()


@dataclass(frozen=True, slots=True)
class Challenge:
    """Relay → client, first message after the upgrade (§3.1); `challenge` is 64 lowercase hex."""

    challenge: str
    type: Literal["challenge"] = "challenge"

    @classmethod
    def fresh(cls) -> Challenge:
        """A new challenge: 32 bytes from the OS CSPRNG as 64 lowercase hex, one per socket."""
        return cls(secrets.token_hex(CHALLENGE_BYTES))

    def to_text(self) -> str:
        return _dumps({"type": "challenge", "challenge": self.challenge})


@dataclass(frozen=True, slots=True)
class Auth:
    """Client → relay answer to the challenge (§3.2). `event` is the signed kind 22242 object.

    `protocol_version` is an int 0–255, DEFAULT_PROTOCOL_VERSION when the message omits it.
    """

    event: Mapping[str, Any]
    protocol_version: int = CURRENT_PROTOCOL_VERSION
    parent_channel_id: str | None = None
    type: Literal["auth"] = "auth"

    def to_text(self) -> str:
        return _dumps(
            {
                "type": "auth",
                "parent_channel_id": self.parent_channel_id,
                "protocol_version": self.protocol_version,
                "event": dict(self.event),
            }
        )


@dataclass(frozen=True, slots=True)
class Leave:
    """Client → relay: end the session, no reply (§5.7)."""

    type: Literal["leave"] = "leave"

    def to_text(self) -> str:
        return _dumps({"type": "leave"})


@dataclass(frozen=True, slots=True, order=True)
class RosterEntry:
    """One seat in a roster; entries sort by `peer_index` (§5.5)."""

    peer_index: int
    pubkey: str
    epoch: int = 0

    def to_json(self, with_epoch: bool = False) -> dict[str, Any]:
        obj: dict[str, Any] = {"pubkey": self.pubkey, "peer_index": self.peer_index}
        if with_epoch:
            obj["epoch"] = self.epoch
        return obj


@dataclass(frozen=True, slots=True)
class Joined:
    """Relay → every peer after an admission (§5.5). `peers` is the full roster, sorted by index."""

    revision: int
    pubkey: str
    peer_index: int
    peers: tuple[RosterEntry, ...]
    epoch: int = 0
    type: Literal["joined"] = "joined"

    def to_text(self, protocol_version: int = 2) -> str:
        """The JSON for a receiver of `protocol_version`: v3 adds `epoch` (§6.6)."""
        v3 = protocol_version >= 3
        obj: dict[str, Any] = {
            "type": "joined",
            "revision": self.revision,
            "pubkey": self.pubkey,
            "peer_index": self.peer_index,
            "peers": [p.to_json(v3) for p in self.peers],
        }
        if v3:
            obj["epoch"] = self.epoch
        return _dumps(obj)


@dataclass(frozen=True, slots=True)
class Left:
    """Relay → remaining peers after a removal (§5.6)."""

    revision: int
    pubkey: str
    peer_index: int
    epoch: int = 0
    type: Literal["left"] = "left"

    def to_text(self, protocol_version: int = 2) -> str:
        """The JSON for a receiver of `protocol_version`: v3 adds `epoch` (§6.6)."""
        obj: dict[str, Any] = {
            "type": "left",
            "revision": self.revision,
            "pubkey": self.pubkey,
            "peer_index": self.peer_index,
        }
        if protocol_version >= 3:
            obj["epoch"] = self.epoch
        return _dumps(obj)


@dataclass(frozen=True, slots=True)
class Roster:
    """Relay → v3 client: a full replacement of the client's roster (§6.6)."""

    revision: int
    peers: tuple[RosterEntry, ...]
    type: Literal["roster"] = "roster"

    def to_text(self) -> str:
        return _dumps(
            {"type": "roster", "revision": self.revision, "peers": [p.to_json(True) for p in self.peers]}
        )


FenceReason = Literal["stale_generation", "no_active_lease", "owner_mismatch", "future_generation"]
_FENCE_REASONS: frozenset[str] = frozenset(
    ("stale_generation", "no_active_lease", "owner_mismatch", "future_generation")
)


@dataclass(frozen=True, slots=True)
class ErrorMessage:
    """Relay → client `error`, always followed by close (§4.2). Build with the constructors below.

    Optional members appear on the wire only when set. Clients branch on `code`, never on
    `message` (§4.3).
    """

    message: str
    code: str | None = None
    current_version: int | None = None
    pinned_version: int | None = None
    requested_version: int | None = None
    fence_reason: str | None = None
    type: Literal["error"] = "error"

    def to_text(self) -> str:
        obj: dict[str, Any] = {"type": "error"}
        if self.code is not None:
            obj["code"] = self.code
        obj["message"] = self.message
        for name in ("current_version", "pinned_version", "requested_version", "fence_reason"):
            value = getattr(self, name)
            if value is not None:
                obj[name] = value
        return _dumps(obj)

    @property
    def display(self) -> str:
        """At most 240 characters of `message`, for showing to a user (§4.3)."""
        return self.message[:CLIENT_MAX_ERROR_DISPLAY]


# The uncoded §4.2 errors (steps 1, 2, 3, 5) and the coded ones without parameters.
AUTH_FAILED = ErrorMessage("auth failed")
NOT_RELAY_MEMBER = ErrorMessage("restricted: not a relay member")
NOT_A_MEMBER = ErrorMessage("not a member")
HUDDLE_HAS_ENDED = ErrorMessage("huddle has ended")
RELAY_DRAINING = ErrorMessage("relay is draining; reconnect", code="huddle_relay_draining")
AUDIO_UNAVAILABLE = ErrorMessage(
    "huddle audio unavailable in this deployment", code="huddle_audio_unavailable"
)
OWNER_UNREACHABLE = ErrorMessage("could not reach the huddle owner", code="huddle_owner_unreachable")
ROOM_FULL = ErrorMessage("room participant capacity reached", code="room_full")
ROOM_ENDED = ErrorMessage("huddle has ended", code="room_ended")


def join_rate_limited(limit: int, window_s: float) -> ErrorMessage:
    """This project's refusal of a member's join beyond its join rate (docs/decisions.md 133):
    every join and leave stores a 48101 and a 48102, so churn is bounded per member. Coded
    `rate_limited`, a code §4.3 does not list: clients do not retry it automatically."""
    return ErrorMessage(
        f"rate-limited: too many huddle joins ({limit} per {window_s:g} s per member); wait before joining again",
        code="rate_limited",
    )


def join_rejected(fence_reason: FenceReason | None = None) -> ErrorMessage:
    """`join_rejected` (§4.2 steps 4 and 7); `fence_reason` when the owner refused on fencing."""
    return ErrorMessage("huddle join rejected", code="join_rejected", fence_reason=fence_reason)


def unsupported_version(requested: int, current: int = CURRENT_PROTOCOL_VERSION) -> ErrorMessage:
    """`unsupported_version` for a requested version 0 or above the relay maximum (§4.1 step 6)."""
    return ErrorMessage(
        f"huddle audio protocol v{requested} not supported; relay max is v{current}",
        code="unsupported_version",
        current_version=current,
    )


def upgrade_required(pinned: int, requested: int) -> ErrorMessage:
    """`upgrade_required`: the room is pinned to another version (§5.4 VersionMismatch)."""
    return ErrorMessage(
        f"this huddle is using audio protocol v{pinned}; your client requested v{requested}",
        code="upgrade_required",
        pinned_version=pinned,
        requested_version=requested,
    )


def check_version(requested: int) -> ErrorMessage | None:
    """§4.1 step 6: None when 1 ≤ `requested` ≤ CURRENT_PROTOCOL_VERSION, else the error."""
    if 1 <= requested <= CURRENT_PROTOCOL_VERSION:
        return None
    return unsupported_version(requested)


class Retry(enum.Enum):
    """What a client may do after an `error` (huddle.md §4.3)."""

    NEVER = "never"  # MUST NOT retry automatically
    BACKOFF = "backoff"  # SHOULD reconnect with backoff
    WITH_VERSION = "with_version"  # MAY reconnect once with pinned_version / current_version


_RETRY_BY_CODE: Mapping[str, Retry] = {
    "huddle_relay_draining": Retry.BACKOFF,
    "huddle_owner_unreachable": Retry.BACKOFF,
    "join_rejected": Retry.BACKOFF,
    "upgrade_required": Retry.WITH_VERSION,
    "unsupported_version": Retry.WITH_VERSION,
}


def retry_advice(error: ErrorMessage) -> Retry:
    """The §4.3 reconnect rule for `error`, decided on `code` alone."""
    return _RETRY_BY_CODE.get(error.code or "", Retry.NEVER)


ClientMessage = Auth | Leave
ServerMessage = Challenge | Joined | Left | Roster | ErrorMessage


@dataclass(frozen=True, slots=True)
class Ignored:
    """A client text the relay ignores (§3.3, §5.7) and why: short ASCII, quoting nothing the
    client sent, so it fits a close frame's reason (`auth_timeout_close`)."""

    reason: str


def read_client_message(text: str | bytes) -> ClientMessage | Ignored:
    """Parse a client → relay text message; `Ignored(reason)` for anything the relay ignores
    (§3.3, §5.7): over 8192 bytes, bad JSON, a non-object, an unknown `type`, and an `auth`
    whose `event` is not an object, whose `parent_channel_id` is neither null nor a UUID, or
    whose `protocol_version` is not an integer 0–255. The event itself is checked by the NIP-42
    verifier."""
    try:
        raw = text.encode() if isinstance(text, str) else text
    except UnicodeEncodeError:  # a lone surrogate
        return Ignored("text is not valid Unicode")
    if len(raw) > MAX_TEXT_FRAME_BYTES:
        return Ignored(f"text over {MAX_TEXT_FRAME_BYTES} bytes")
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return Ignored("text is not JSON")
    if not isinstance(obj, dict):
        return Ignored("text is not a JSON object")
    kind = obj.get("type")
    if kind == "leave":
        return Leave()
    if kind != "auth":
        return Ignored("type is neither auth nor leave")
    event = obj.get("event")
    parent = obj.get("parent_channel_id")
    version = obj.get("protocol_version", DEFAULT_PROTOCOL_VERSION)
    if not isinstance(event, dict):
        return Ignored("auth: event is not an object")
    if parent is not None and not is_canonical_uuid(parent):
        return Ignored("auth: parent_channel_id is not a UUID")
    if not (_is_int(version) and 0 <= version <= 255):
        return Ignored("auth: protocol_version is not an integer 0-255")
    return Auth(event=event, protocol_version=version, parent_channel_id=parent)


def parse_client_message(text: str | bytes) -> ClientMessage | None:
    """Parse a client → relay text message; None for anything the relay ignores (§3.3, §5.7;
    `read_client_message` says why)."""
    msg = read_client_message(text)
    return None if isinstance(msg, Ignored) else msg


AUTH_TIMEOUT_CLOSE_CODE = 1008  # policy violation, as the main relay's authentication timeout
MAX_CLOSE_REASON_BYTES = 123  # RFC 6455 §5.5: a close frame's payload is at most 125 bytes


def auth_timeout_close(timeout_s: float, ignored: int, last: str | None) -> tuple[int, str]:
    """The close (code, reason) of a socket that sent no well-formed `auth` within `timeout_s`
    seconds (§3.3: no error message, so the close frame is the only place to say why). `ignored`
    counts the messages ignored meanwhile, `last` is why the last one was (e.g. "text is not
    JSON", "binary message before auth"). The reason is ASCII, at most 123 bytes."""
    reason = f"auth-required: no valid auth within {timeout_s:g} s"
    if ignored:
        reason += f"; ignored {ignored} message{'s' if ignored != 1 else ''}, last: {last}"
    return AUTH_TIMEOUT_CLOSE_CODE, reason[:MAX_CLOSE_REASON_BYTES]


def _field(obj: Mapping[str, Any], name: str, check: Any, what: str) -> Any:
    value = obj.get(name)
    if not check(value):
        raise HuddleWireError(f"{obj.get('type')}: {name} must be {what}")
    return value


def _is_index(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_PEER_INDEX


def _is_revision(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < REVISION_MODULUS


def _is_pubkey(value: object) -> bool:
    return is_hex(value, 64)


def _is_epoch(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < EPOCH_MODULUS


def _epoch(obj: Mapping[str, Any]) -> int:
    """A missing `epoch` means 0 (§6.6); a present one must be a u8."""
    if "epoch" not in obj:
        return 0
    return int(_field(obj, "epoch", _is_epoch, "an integer 0..255"))


def _parse_roster(value: Any) -> tuple[RosterEntry, ...]:
    if not isinstance(value, list) or len(value) > CLIENT_MAX_ROSTER:
        raise HuddleWireError(f"joined: peers must be a list of at most {CLIENT_MAX_ROSTER} entries")
    entries = []
    for item in value:
        if not isinstance(item, dict):
            raise HuddleWireError("joined: each peer must be an object")
        entries.append(
            RosterEntry(
                peer_index=_field(item, "peer_index", _is_index, "an integer 0..254"),
                pubkey=_field(item, "pubkey", _is_pubkey, "64 lowercase hex"),
                epoch=_epoch(item),
            )
        )
    if len({e.peer_index for e in entries}) != len(entries):
        raise HuddleWireError("joined: duplicate peer_index in peers")
    return tuple(sorted(entries))


def _parse_error(obj: Mapping[str, Any]) -> ErrorMessage:
    def optional(name: str, check: Any) -> Any:
        value = obj.get(name)
        return value if value is not None and check(value) else None

    message = obj.get("message")
    return ErrorMessage(
        message=message if isinstance(message, str) else "",
        code=optional("code", lambda v: isinstance(v, str)),
        current_version=optional("current_version", _is_int),
        pinned_version=optional("pinned_version", _is_int),
        requested_version=optional("requested_version", _is_int),
        fence_reason=optional("fence_reason", lambda v: v in _FENCE_REASONS),
    )


def parse_server_message(text: str | bytes) -> ServerMessage | None:
    """Parse a relay → client text message under the client rules of §10.1.

    Returns None for an unknown `type` (later versions add `roster`). Raises HuddleWireError for
    a message over 65 536 bytes, bad JSON, an empty or over-4096-character challenge, or a
    `joined`/`left` whose fields are malformed (roster over 256, duplicate indices, non-hex keys).
    """
    try:
        raw = text.encode() if isinstance(text, str) else text
    except UnicodeEncodeError:
        raise HuddleWireError("text is not valid Unicode") from None
    if len(raw) > CLIENT_MAX_MESSAGE_BYTES:
        raise HuddleWireError(f"message of {len(raw)} bytes exceeds {CLIENT_MAX_MESSAGE_BYTES}")
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise HuddleWireError(f"bad JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise HuddleWireError("message must be a JSON object")
    match obj.get("type"):
        case "challenge":
            challenge = obj.get("challenge")
            if not isinstance(challenge, str) or not 0 < len(challenge) <= CLIENT_MAX_CHALLENGE_CHARS:
                raise HuddleWireError("challenge: must be a non-empty string of at most 4096 characters")
            return Challenge(challenge)
        case "joined":
            return Joined(
                revision=_field(obj, "revision", _is_revision, "a u64"),
                pubkey=_field(obj, "pubkey", _is_pubkey, "64 lowercase hex"),
                peer_index=_field(obj, "peer_index", _is_index, "an integer 0..254"),
                peers=_parse_roster(obj.get("peers")),
                epoch=_epoch(obj),
            )
        case "left":
            return Left(
                revision=_field(obj, "revision", _is_revision, "a u64"),
                pubkey=_field(obj, "pubkey", _is_pubkey, "64 lowercase hex"),
                peer_index=_field(obj, "peer_index", _is_index, "an integer 0..254"),
                epoch=_epoch(obj),
            )
        case "roster":
            return Roster(
                revision=_field(obj, "revision", _is_revision, "a u64"),
                peers=_parse_roster(obj.get("peers")),
            )
        case "error":
            return _parse_error(obj)
        case _:
            return None


def revision_is_newer(new: int, old: int) -> bool:
    """Serial-number comparison of roster revisions modulo 2^64 (§5.5 client rule)."""
    delta = (new - old) % REVISION_MODULUS
    return 0 < delta < REVISION_MODULUS // 2


# -- §5 room admission ----------------------------------------------------------------------------
S = TypeVar("S")


@dataclass(frozen=True, slots=True)
class Peer(Generic[S]):
    """One admission (seat). `sink` is whatever the relay attached: its audio/control queues."""

    peer_id: str
    pubkey: str
    peer_index: int
    protocol_version: int
    sink: S
    epoch: int = 0

    @property
    def entry(self) -> RosterEntry:
        return RosterEntry(self.peer_index, self.pubkey, self.epoch)


class Refusal(enum.Enum):
    """Why `Room.admit` refused, in precedence order Ended > Full > VersionMismatch (§5.4)."""

    ENDED = "room_ended"
    FULL = "room_full"
    VERSION_MISMATCH = "upgrade_required"


@dataclass(frozen=True, slots=True)
class Refused:
    """A failed admission; the room is unchanged."""

    reason: Refusal
    requested: int
    pinned: int | None = None

    def error(self) -> ErrorMessage:
        """The §4.2 step 8 message for this refusal."""
        if self.reason is Refusal.ENDED:
            return ROOM_ENDED
        if self.reason is Refusal.FULL:
            return ROOM_FULL
        assert self.pinned is not None
        return upgrade_required(self.pinned, self.requested)


@dataclass(frozen=True, slots=True)
class Admitted(Generic[S]):
    """A successful admission: put `joined` on the control queue of every peer in `recipients`."""

    peer: Peer[S]
    revision: int
    joined: Joined
    recipients: tuple[Peer[S], ...]


@dataclass(frozen=True, slots=True)
class Removed(Generic[S]):
    """A removal (§5.8 step 1): broadcast `left` to `recipients`; `should_end` goes to one caller."""

    peer: Peer[S]
    revision: int
    left: Left
    recipients: tuple[Peer[S], ...]
    should_end: bool


@dataclass(eq=False)
class Room(Generic[S]):
    """Room state of huddle.md §5.2. Call every method under the room's admission lock.

    Pure: no asyncio, no sockets. The relay attaches a `sink` (its queues) to each admission and
    does the broadcasting the returned decisions describe. An exception inside a method marks
    the room unusable, and from then on it refuses every joiner with Ended (§5.4 item 1).
    """

    max_peers: int = MAX_PEERS_PER_ROOM
    peers: dict[str, Peer[S]] = field(default_factory=dict)
    # FIFO (issue 13, where the spec has a LIFO stack): the least recently freed index is reused
    # first, so an index rests as long as possible before it names someone else.
    free_indices: collections.deque[int] = field(default_factory=collections.deque)
    epochs: dict[int, int] = field(default_factory=dict)  # index → epoch of its latest occupancy
    next_fresh: int = 0
    pinned_version: int | None = None
    ended: bool = False
    revision: int = 0
    unusable: bool = False

    @property
    def is_empty(self) -> bool:
        return not self.peers

    def roster(self) -> tuple[RosterEntry, ...]:
        """The complete roster sorted by `peer_index`."""
        return tuple(sorted(p.entry for p in self.peers.values()))

    def receivers(self, sender_peer_id: str) -> Iterator[Peer[S]]:
        """Every peer except the sender's own admission (no echo by `peer_id`, §6.4)."""
        return (p for p in self.peers.values() if p.peer_id != sender_peer_id)

    def _refusal(self, version: int, index_available: bool) -> Refused | None:
        if self.ended or self.unusable:
            return Refused(Refusal.ENDED, version)
        if len(self.peers) >= self.max_peers or not index_available:
            return Refused(Refusal.FULL, version)
        if self.pinned_version is not None and not same_media_format(self.pinned_version, version):
            return Refused(Refusal.VERSION_MISMATCH, version, self.pinned_version)
        return None

    def admit(
        self, pubkey: str, version: int, sink: S, *, peer_id: str | None = None
    ) -> Admitted[S] | Refused:
        """`add_peer(pubkey, version)` of §5.4: Ended > Full > VersionMismatch, else admit.

        The index is the least recently freed one, else `next_fresh` while it is below 255. The
        version check accepts v2 and v3 in one room (`same_media_format`). `peer_id` defaults to
        a fresh UUIDv4.
        """
        index_available = bool(self.free_indices) or self.next_fresh <= MAX_PEER_INDEX
        refused = self._refusal(version, index_available)
        if refused is not None:
            return refused
        try:
            if self.free_indices:
                index = self.free_indices.popleft()
            else:
                index = self.next_fresh
                self.next_fresh += 1
            return self._insert(pubkey, version, sink, index, peer_id)
        except BaseException:
            self.unusable = True
            raise

    def admit_at_index(
        self, pubkey: str, version: int, sink: S, index: int, *, peer_id: str | None = None
    ) -> Admitted[S] | Refused:
        """Mirror-room admission at an owner-assigned index (§9.6 ingress step 2).

        Obeys the cap and the pin; Full when `index` is held locally. Takes `index` off the free
        stack and moves `next_fresh` past it.
        """
        if not 0 <= index <= MAX_PEER_INDEX:
            raise ValueError(f"peer_index must be 0..254, got {index}")
        taken = any(p.peer_index == index for p in self.peers.values())
        refused = self._refusal(version, not taken)
        if refused is not None:
            return refused
        try:
            if index in self.free_indices:
                self.free_indices.remove(index)
            self.next_fresh = max(self.next_fresh, index + 1)
            return self._insert(pubkey, version, sink, index, peer_id)
        except BaseException:
            self.unusable = True
            raise

    def _insert(self, pubkey: str, version: int, sink: S, index: int, peer_id: str | None) -> Admitted[S]:
        epoch = (self.epochs[index] + 1) % EPOCH_MODULUS if index in self.epochs else 0
        self.epochs[index] = epoch
        peer = Peer(peer_id or str(uuid.uuid4()), pubkey, index, version, sink, epoch)
        self.peers[peer.peer_id] = peer
        if self.pinned_version is None:
            self.pinned_version = version
        self.revision = (self.revision + 1) % REVISION_MODULUS
        joined = Joined(self.revision, pubkey, index, self.roster(), epoch)
        return Admitted(peer, self.revision, joined, tuple(self.peers.values()))

    def remove(self, peer_id: str) -> Removed[S] | None:
        """§5.8 step 1: remove, push the index, bump `revision`; None if `peer_id` is not seated.

        When the room becomes empty and was not ended, it is marked ended and `should_end` is
        True; of several last leavers exactly one sees it.
        """
        peer = self.peers.get(peer_id)
        if peer is None:
            return None
        try:
            del self.peers[peer_id]
            self.free_indices.append(peer.peer_index)
            self.revision = (self.revision + 1) % REVISION_MODULUS
            should_end = not self.peers and not self.ended
            if should_end:
                self.ended = True
        except BaseException:
            self.unusable = True
            raise
        left = Left(self.revision, peer.pubkey, peer.peer_index, peer.epoch)
        return Removed(peer, self.revision, left, tuple(self.peers.values()), should_end)

    def reopen(self) -> None:
        """Clear `ended` after a failed archive, so the room stays usable (§5.8 step 4)."""
        self.ended = False


@dataclass(eq=False)
class RoomRegistry(Generic[S]):
    """`(community_id, channel_id) → Room` (huddle.md §5.1). Atomic under the caller's lock."""

    rooms: dict[tuple[str, str], Room[S]] = field(default_factory=dict)

    def get_or_create(self, community_id: str, channel_id: str) -> Room[S]:
        key = (community_id, channel_id)
        room = self.rooms.get(key)
        if room is None:
            room = self.rooms[key] = Room()
        return room

    def reclaim(self, community_id: str, channel_id: str, room: Room[S]) -> bool:
        """Remove `room` only if it is still the registered one and empty; True when removed."""
        key = (community_id, channel_id)
        if self.rooms.get(key) is room and room.is_empty:
            del self.rooms[key]
            return True
        return False

    def by_channel(self, channel_id: str) -> Room[S] | None:
        """The one room carrying `channel_id`; None when none or several communities do (§9.8)."""
        found = [room for (_, channel), room in self.rooms.items() if channel == channel_id]
        return found[0] if len(found) == 1 else None
