"""NIP-01 wire messages: one text frame in → one typed client message; relay messages → text.

Sans-I/O (style.md §1): `parse_client_message` never touches a socket and never raises
anything but `ProtocolViolation` (→ NOTICE, connection survives) or a BuzzError subclass the
caller maps to OK/CLOSED. Source rules: relay.md §7.1 item 3, §7.2, §7.5 item 1.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import orjson

from buzz.core.errors import BadFilter, Invalid, MalformedEvent, Refusal
from buzz.core.event import Event, is_valid_unicode
from buzz.core.filters import Filter
from buzz.core.limits import MAX_FILTERS, MAX_SUBID_LENGTH


class ProtocolViolation(Exception):
    """The frame is not a usable client message; answered NOTICE `invalid message: <reason>`."""

    def __str__(self) -> str:
        return f"invalid message: {self.args[0]}"


class UnanswerableEvent(ProtocolViolation):
    """An EVENT/AUTH whose id cannot be written back (a lone surrogate): its one answer is a
    NOTICE `invalid: malformed event: …` that does not echo the id (issue 9 item 10)."""

    def __str__(self) -> str:
        return f"invalid: malformed event: {self.args[0]}"


@dataclass(frozen=True, slots=True)
class EventMessage:
    type: Literal["EVENT"]
    event: Event


@dataclass(frozen=True, slots=True)
class BadEventMessage:
    """An EVENT whose event failed the shape check but carries a string id (relay.md §2.1)."""

    type: Literal["EVENT"]
    event_id: str
    error: MalformedEvent


@dataclass(frozen=True, slots=True)
class ReqMessage:
    type: Literal["REQ", "COUNT"]
    sub_id: str
    filters: tuple[Filter, ...]


@dataclass(frozen=True, slots=True)
class BadReqMessage:
    """A REQ/COUNT with a valid sub id but unusable filters; answered CLOSED <sub> <error>."""

    type: Literal["REQ", "COUNT"]
    sub_id: str
    error: Invalid


@dataclass(frozen=True, slots=True)
class CloseMessage:
    type: Literal["CLOSE"]
    sub_id: str


@dataclass(frozen=True, slots=True)
class AuthMessage:
    type: Literal["AUTH"]
    event: Event


ClientMessage = EventMessage | BadEventMessage | ReqMessage | BadReqMessage | CloseMessage | AuthMessage

SUBID_ERROR = Refusal(Invalid, "subscription id must be 1-64 characters")


def _check_sub_id(value: Any) -> str:
    # A sub id is echoed in every answer: one that cannot be written as UTF-8 (a lone
    # surrogate) cannot even be refused with CLOSED, so it gets a NOTICE.
    if not isinstance(value, str) or not is_valid_unicode(value):
        raise ProtocolViolation("subscription id must be a string of valid Unicode")
    return value


def sub_id_ok(sub_id: str) -> bool:
    """1–64 code points, any Unicode (relay.md §7.2)."""
    return 1 <= len(sub_id) <= MAX_SUBID_LENGTH


def _no_constants(name: str) -> object:
    raise ValueError(f"{name} is not valid JSON")  # NaN, Infinity: orjson refuses them too


E = TypeVar("E", bound=BaseException)


def _bare(exc: E) -> E:
    """`exc` without its traceback, to be kept in a message for its text: the traceback's
    frames would hold the caller's locals (the frame text, the message holding `exc`), a
    reference cycle that keeps every refused frame alive until a full garbage collection."""
    return exc.with_traceback(None)


def parse_client_message(frame: str | bytes) -> ClientMessage:
    """Decode one frame. Raises ProtocolViolation for anything that is not a client message."""
    try:
        msg = orjson.loads(frame)
    except orjson.JSONDecodeError as exc:
        # orjson refuses lone surrogate escapes outright; stdlib json keeps them so the event
        # check can answer `OK false "invalid: malformed event: …"` with the event's id.
        try:
            msg = json.loads(frame, parse_constant=_no_constants)
        except (ValueError, UnicodeDecodeError, RecursionError):
            # RecursionError: a frame nested deeper than the parser's stack is just bad input.
            raise ProtocolViolation(f"not valid JSON ({exc.msg})") from None
    if not isinstance(msg, list) or not msg:
        raise ProtocolViolation("frame must be a non-empty JSON array")
    kind = msg[0]
    if kind == "EVENT" or kind == "AUTH":
        if len(msg) != 2:
            raise ProtocolViolation(f"{kind} takes exactly one event")
        try:
            event = Event.from_json(msg[1])
        except MalformedEvent as exc:
            eid = msg[1].get("id") if isinstance(msg[1], dict) else None
            if isinstance(eid, str) and is_valid_unicode(eid):
                return BadEventMessage(kind, eid, _bare(exc))  # type: ignore[arg-type]
            if isinstance(eid, str):
                raise UnanswerableEvent("id is not valid Unicode (unpaired surrogate)") from None
            raise ProtocolViolation(exc.detail) from None
        return EventMessage("EVENT", event) if kind == "EVENT" else AuthMessage("AUTH", event)
    if kind == "REQ" or kind == "COUNT":
        if len(msg) < 2:
            raise ProtocolViolation(f"{kind} needs a subscription id")
        sub_id = _check_sub_id(msg[1])
        if not sub_id_ok(sub_id):
            return BadReqMessage(kind, sub_id, SUBID_ERROR())
        raw = msg[2:]
        if not raw:
            return BadReqMessage(kind, sub_id, Invalid("at least one filter is required"))
        if len(raw) > MAX_FILTERS:
            return BadReqMessage(kind, sub_id, Invalid(f"too many filters (max {MAX_FILTERS})"))
        try:
            return ReqMessage(kind, sub_id, tuple(Filter.parse(f) for f in raw))
        except BadFilter as exc:
            return BadReqMessage(kind, sub_id, _bare(exc))
    if kind == "CLOSE":
        if len(msg) != 2:
            raise ProtocolViolation("CLOSE takes exactly one subscription id")
        return CloseMessage("CLOSE", _check_sub_id(msg[1]))
    raise ProtocolViolation(
        f"unknown message type {kind!r}" if isinstance(kind, str) else "message type must be a string"
    )


# -- relay → client ---------------------------------------------------------------------------
def _scrub(value: Any) -> Any:
    """`value` with every lone surrogate in its strings replaced by U+FFFD."""
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    if isinstance(value, dict):
        return {_scrub(k): _scrub(v) for k, v in value.items()}
    return value


def _dump(obj: Any) -> str:
    """Every answer can be written: ids and sub ids are checked at parse time, and a reason
    that quotes a lone surrogate goes out with U+FFFD in its place (issue 9 item 10)."""
    try:
        return orjson.dumps(obj).decode()
    except orjson.JSONEncodeError:
        return orjson.dumps(_scrub(obj)).decode()


def ok(event_id: str, accepted: bool, message: str = "") -> str:
    return _dump(["OK", event_id, accepted, message])


def json_string(text: str) -> str:
    """`text` as a JSON string (a lone surrogate written as U+FFFD, like every answer)."""
    return _dump(text)


def event(sub_id: str, event_json: str) -> str:
    """`["EVENT", sub, <event>]` splicing pre-serialized event JSON (fan-out serializes once)."""
    return f'["EVENT",{_dump(sub_id)},{event_json}]'


def eose(sub_id: str) -> str:
    return _dump(["EOSE", sub_id])


def closed(sub_id: str, message: str) -> str:
    return _dump(["CLOSED", sub_id, message])


def notice(message: str) -> str:
    return _dump(["NOTICE", message])


def auth_challenge(challenge: str) -> str:
    return _dump(["AUTH", challenge])


def count(sub_id: str, n: int) -> str:
    return _dump(["COUNT", sub_id, {"count": n}])
