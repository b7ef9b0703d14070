"""The Redis bus wire format (relay.md §12.4), with no I/O: topic names, payloads, echo cache.

Topics, for a workspace `W` (`BUZZ_WORKSPACE_ID`):

    buzz:W:global          global events        {"v":1,"channel_id":null,"event":{…}}
    buzz:W:channel:<C>     events of channel C  {"v":1,"channel_id":"<C>","event":{…}}
    buzz:W:control         access changes       {"v":1,"type":"access_changed","channel_id":"<C>","pubkey":"<hex>"|null}
    buzz:W:presence:<pk>   (a key, not a topic) the newest 20001 of `pk`, TTL 90 s (§12.2 item 2)

Payloads are compact UTF-8 JSON. Decoding raises `BadPayload` (a ValueError) for anything that
is not exactly one of these shapes; the receiver logs and drops it.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable
from dataclasses import dataclass

import orjson

from buzz.core.channel_id import is_channel_id
from buzz.core.errors import MalformedEvent
from buzz.core.event import Event
from buzz.core.keys import is_hex

WIRE_VERSION = 1
ECHO_CACHE_TTL_S = 60.0  # relay.md §17
ECHO_CACHE_MAX = 500_000  # ids; the oldest go first beyond this (memory bound)
ACCESS_CHANGED = "access_changed"


class BadPayload(ValueError):
    """A bus message that is not a §12.4 payload; the text says what is wrong."""


@dataclass(frozen=True, slots=True)
class Topics:
    """The topic and key names of one workspace (relay.md §12.4 item 1)."""

    workspace: str

    @property
    def global_(self) -> str:
        """The topic of global events (channel_id null)."""
        return f"buzz:{self.workspace}:global"

    @property
    def control(self) -> str:
        """The topic of `access_changed` messages."""
        return f"buzz:{self.workspace}:control"

    def channel(self, channel_id: str) -> str:
        """The topic of channel `channel_id`'s events."""
        return f"buzz:{self.workspace}:channel:{channel_id}"

    def for_event(self, channel_id: str | None) -> str:
        """The topic an event of `channel_id` (None = global) is published on."""
        return self.global_ if channel_id is None else self.channel(channel_id)

    def presence_key(self, pubkey: str) -> str:
        """The key holding `pubkey`'s newest 20001 (§12.2 item 2)."""
        return f"buzz:{self.workspace}:presence:{pubkey}"


@dataclass(frozen=True, slots=True)
class AccessChanged:
    """A control message: `channel_id` changed; `pubkey` is the one reader affected, or None
    when any reader may be (relay.md §12.4 item 5)."""

    channel_id: str
    pubkey: str | None = None


# -- encoding ---------------------------------------------------------------------------------------
def encode_event(event_json: str | bytes, channel_id: str | None) -> bytes:
    """`{"v":1,"channel_id":…,"event":…}` around an already serialized event."""
    if isinstance(event_json, str):
        event_json = event_json.encode()
    return b'{"v":1,"channel_id":%s,"event":%s}' % (orjson.dumps(channel_id), event_json)


def encode_event_bytes(event: Event, channel_id: str | None) -> bytes:
    """`encode_event` of `event` serialized once, straight to bytes."""
    return encode_event(orjson.dumps(event.to_dict()), channel_id)


def encode_access_changed(change: AccessChanged) -> bytes:
    """`{"v":1,"type":"access_changed","channel_id":…,"pubkey":…}`."""
    return orjson.dumps(
        {"v": WIRE_VERSION, "type": ACCESS_CHANGED, "channel_id": change.channel_id, "pubkey": change.pubkey}
    )


# -- decoding ---------------------------------------------------------------------------------------
def _object(data: bytes | str) -> dict[str, object]:
    try:
        body = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise BadPayload(f"not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise BadPayload("payload must be a JSON object")
    if body.get("v") != WIRE_VERSION:
        raise BadPayload(f"unsupported payload version {body.get('v')!r}")
    return body


def decode_event(data: bytes | str) -> tuple[Event, str | None]:
    """(event, channel_id) of an event payload. Raises BadPayload. The event's id and
    signature are not checked again: Redis is trusted infrastructure (§12.4 item 4)."""
    return _event_of(_object(data))


_ID_KEY = b'"id":"'


def echo_id(data: bytes) -> str | None:
    """The event id of an event payload read off its raw bytes, before any parsing: the 64
    characters after the first `"id":"`, or None when there is no such key.

    In a §12.4 payload the only JSON objects are the wrapper (keys `v`, `channel_id`, `event`)
    and the event; tags are arrays, and a `"` inside any string is escaped, so the first
    `"id":"` is the event's `id` key whatever order the keys come in. A receiver that finds the
    id in its echo cache drops the message unparsed (decision 352); any other message is parsed
    and checked in full, so a payload this misreads is at worst parsed as before."""
    at = data.find(_ID_KEY)
    if at < 0:
        return None
    start = at + len(_ID_KEY)
    return data[start : start + 64].decode("ascii", "replace")


def _event_of(body: dict[str, object]) -> tuple[Event, str | None]:
    channel_id = body.get("channel_id")
    if channel_id is not None and not is_channel_id(channel_id):
        raise BadPayload("channel_id must be a canonical UUID or null")
    try:
        event = Event.from_json(body.get("event"))
    except MalformedEvent as exc:
        raise BadPayload(str(exc)) from None
    return event, channel_id  # type: ignore[return-value]


def decode_control(data: bytes | str) -> AccessChanged:
    """The access change of a control payload. Raises BadPayload (also for unknown types)."""
    body = _object(data)
    if body.get("type") != ACCESS_CHANGED:
        raise BadPayload(f"unknown control type {body.get('type')!r}")
    channel_id, pubkey = body.get("channel_id"), body.get("pubkey")
    if not is_channel_id(channel_id):
        raise BadPayload("channel_id must be a canonical UUID")
    if pubkey is not None and not is_hex(pubkey, 64):  # type: ignore[arg-type]
        raise BadPayload("pubkey must be 64 lowercase hex or null")
    return AccessChanged(channel_id, pubkey)  # type: ignore[arg-type]


# -- echo suppression (relay.md §12.4 items 2 and 4) -------------------------------------------------
class EchoCache:
    """Event ids seen recently, each for `ttl_s` seconds. `clock` returns seconds (monotonic).

    Insertion order is expiry order, so expiring is popping from the front. Beyond `max_size`
    ids the oldest are forgotten early.
    """

    def __init__(
        self,
        ttl_s: float = ECHO_CACHE_TTL_S,
        max_size: int = ECHO_CACHE_MAX,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ttl = ttl_s
        self._max = max_size
        self._clock = clock
        self._expiry: collections.OrderedDict[str, float] = collections.OrderedDict()

    def __len__(self) -> int:
        self._expire(self._clock())
        return len(self._expiry)

    def __contains__(self, event_id: object) -> bool:
        now = self._clock()
        self._expire(now)
        return event_id in self._expiry

    def add(self, event_id: str) -> None:
        """Remember `event_id` for the next `ttl_s` seconds (restarting its time if present)."""
        now = self._clock()
        self._expire(now)
        self._expiry.pop(event_id, None)
        self._expiry[event_id] = now + self._ttl
        while len(self._expiry) > self._max:
            self._expiry.popitem(last=False)

    def discard(self, event_id: str) -> None:
        """Forget `event_id` (its publication failed); an unknown id is ignored."""
        self._expiry.pop(event_id, None)

    def _expire(self, now: float) -> None:
        while self._expiry:
            event_id, expires = next(iter(self._expiry.items()))
            if expires > now:
                return
            del self._expiry[event_id]
