"""The JSON text messages of the huddle audio socket, with no I/O (huddle.md §3, §4.2,
§5.5–§5.7): frozen dataclasses with `to_text()`, and two parsers, one per direction.

The relay never raises on client input: `parse_client_message` returns None for anything to
ignore (§3.3), `read_client_message` an `Ignored` that says why. The client refuses a bad
relay message: `parse_server_message` raises `HuddleWireError` (§10.1).
"""

from __future__ import annotations

import enum
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from buzz.core.huddle_wire import (
    CHALLENGE_BYTES,
    CLIENT_MAX_CHALLENGE_CHARS,
    CLIENT_MAX_ERROR_DISPLAY,
    CLIENT_MAX_MESSAGE_BYTES,
    CLIENT_MAX_ROSTER,
    CURRENT_PROTOCOL_VERSION,
    DEFAULT_PROTOCOL_VERSION,
    EPOCH_MODULUS,
    MAX_PEER_INDEX,
    MAX_TEXT_FRAME_BYTES,
    REVISION_MODULUS,
    HuddleWireError,
    is_canonical_uuid,
)
from buzz.core.keys import is_hex


def _is_int(value: object) -> bool:
    return type(value) is int  # JSON true/false are not integers


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
