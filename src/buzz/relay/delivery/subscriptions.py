"""Live subscriptions and the index that finds which ones an event could match.

Source rules: relay.md §6.3 item 3 (live scope), §7.5 items 4 and 8 (replace, register
before the stored query), §12.1 (delivery at most once per subscription). The hold buffer of
the stored phase is bounded in bytes like the send queue (§7.9, issue 9 item 2): a client that
stops reading while its stored results go out is closed, not buffered for.

Each filter is filed under one bucket key chosen from its most selective field (a tag value,
else an author, else a kind, else the wildcard bucket). An event looks up only the buckets its
own tags, author and kind name, so a new event is checked against subscriptions that could
match it instead of every subscription. The final decision is always `Filter.matches`, the
same function the stored path uses.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, Protocol

from buzz.core import messages
from buzz.core.event import Event
from buzz.core.filters import Filter, tag_index
from buzz.core.limits import SEND_BUFFER_BYTES
from buzz.core.visibility import Reader
from buzz.relay.delivery.bus_topics import named_channels
from buzz.relay.transport.websocket import text_frame

BucketKey = tuple[str, str] | tuple[str, int] | tuple[str]
WILDCARD: BucketKey = ("*",)
FRAME_CACHE_BYTES = 256 << 10  # per event being fanned out: frames kept for reuse by sub id
HELD_ENTRY_OVERHEAD = 200  # bytes per held match besides its JSON: id string, tuple, list slot


class LiveEvent:
    """One accepted event on its way to every matching subscription: serialized once, and
    each `["EVENT",<sub id>,<event>]` built from it by concatenation — as a WebSocket frame
    for a socket that takes it at once (once per distinct subscription id: clients often
    share ids, and then a thousand subscribers get the same bytes), as text for the send
    queue otherwise."""

    __slots__ = ("_cached", "_frames", "_tail", "id", "json")

    def __init__(self, event_id: str, event_json: str) -> None:
        self.id = event_id
        self.json = event_json
        self._tail = f",{event_json}]".encode()
        self._frames: dict[bytes, bytes] = {}  # JSON-encoded sub id → its frame
        self._cached = 0  # bytes of frames in `_frames`, at most FRAME_CACHE_BYTES

    def frame(self, sub_id_json: bytes) -> bytes:
        """The TEXT frame for the subscription whose JSON-encoded id is `sub_id_json`."""
        frame = self._frames.get(sub_id_json)
        if frame is None:
            frame = text_frame(b'["EVENT",', sub_id_json, self._tail)
            # Bounded: distinct ids of a large event must not each keep a copy alive.
            if self._cached + len(frame) <= FRAME_CACHE_BYTES:
                self._frames[sub_id_json] = frame
                self._cached += len(frame)
        return frame

    def text(self, sub_id: str) -> str:
        return messages.event(sub_id, self.json)


class Subscriber(Protocol):
    """What a subscription needs from its connection."""

    @property
    def reader(self) -> Reader:
        """Whose rights decide what the subscription is sent (`ChannelAccess.visible`)."""
        ...

    # The transport while a frame written to it now cannot wait (not paused, nothing queued
    # ahead, not closing), else None: live fan-out writes there directly (`FanOut`).
    direct: Any

    def send(self, text: str) -> None: ...

    def send_live(self, sub_id: str, sub_id_json: bytes, live: LiveEvent) -> None:
        """`send` of `live` for a live match (may go straight to the socket when nothing waits
        in the queue)."""
        ...

    def overflow(self) -> None:
        """A buffer this subscriber fills is full: close it as a slow consumer (§7.9)."""
        ...


@dataclass(eq=False)
class Subscription:
    """One REQ: its filters, owner, and the hold buffer used until EOSE (§7.5 item 8).

    The hold buffer takes at most `max_held_bytes` (JSON `str` memory plus
    HELD_ENTRY_OVERHEAD per match); the match that would exceed it empties the buffer and
    calls `conn.overflow()` instead.
    """

    conn: Subscriber
    sub_id: str
    filters: tuple[Filter, ...]
    max_held_bytes: int = SEND_BUFFER_BYTES
    live: bool = False  # False while the stored query runs: matches are held, not sent
    held: list[tuple[str, str]] = field(default_factory=list)  # (event id, event JSON)
    held_bytes: int = 0
    overflowed: bool = False
    sent_ids: set[str] = field(default_factory=set)  # ids sent before EOSE
    sub_id_json: bytes = field(init=False)  # the id as it appears in an EVENT message

    def __post_init__(self) -> None:
        self.sub_id_json = messages.json_string(self.sub_id).encode()

    def deliver(self, live: LiveEvent) -> None:
        """Send now when live; hold until EOSE otherwise."""
        if self.live:
            self.conn.send_live(self.sub_id, self.sub_id_json, live)
            return
        if self.overflowed:
            return
        size = sys.getsizeof(live.json) + HELD_ENTRY_OVERHEAD
        if self.held_bytes + size > self.max_held_bytes:
            self.overflowed = True
            self.take_held()
            self.conn.overflow()
            return
        self.held.append((live.id, live.json))
        self.held_bytes += size

    def take_held(self) -> list[tuple[str, str]]:
        """Empty the hold buffer, returning what it held in arrival order."""
        held, self.held, self.held_bytes = self.held, [], 0
        return held


def _bucket_keys(flt: Filter) -> list[BucketKey]:
    if flt.tags:
        # Prefer #h (channel subscriptions are the common case), then the smallest tag set.
        name = "h" if "h" in flt.tags else min(flt.tags, key=lambda n: len(flt.tags[n]))
        return [("#" + name, v) for v in flt.tags[name]]
    if flt.authors is not None:
        return [("a", a) for a in flt.authors]
    if flt.kinds is not None:
        return [("k", k) for k in flt.kinds]
    return [WILDCARD]


class ChannelListener(Protocol):
    """Told which channels local filters name in `#h` (the Redis bus's topic references,
    relay.md §12.4 item 3): one `acquire` per added subscription and channel, one `release`
    when it goes."""

    def acquire(self, channel_id: str) -> None: ...

    def release(self, channel_id: str) -> None: ...


def filter_key(flt: Filter) -> tuple[object, ...]:
    """What decides whether `flt` matches a live event: equal keys match the same events, so
    one `Filter.matches` answers for every subscription holding such a filter (`limit` and
    `search` are not matching clauses)."""
    tags = tuple(sorted(flt.tags.items())) if flt.tags else ()
    return (flt.ids, flt.authors, flt.kinds, tags, flt.since, flt.until)


class _Group:
    """The subscriptions holding one filter (by `filter_key`) in one bucket."""

    __slots__ = ("filter", "members")

    def __init__(self, flt: Filter) -> None:
        self.filter = flt
        self.members: dict[tuple[Subscription, int], None] = {}  # (sub, filter index), in order


class SubscriptionIndex:
    """Bucketed registry of live filters. Not thread-safe; lives on the event loop.

    Within a bucket, subscriptions with equal filters (`filter_key`) share one group, so an
    event is matched once per distinct filter rather than once per subscription: a thousand
    clients of one channel cost one `Filter.matches`.
    """

    def __init__(self) -> None:
        self._buckets: dict[BucketKey, dict[tuple[object, ...], _Group]] = {}
        self._keys: dict[Subscription, list[tuple[BucketKey, tuple[object, ...]]]] = {}
        self.listener: ChannelListener | None = None  # set by the Redis bus (relay.md §12.4)
        self._channels: dict[Subscription, frozenset[str]] = {}  # what was acquired, per sub

    def __len__(self) -> int:
        return len(self._keys)

    def add(self, sub: Subscription) -> None:
        keys: list[tuple[BucketKey, tuple[object, ...]]] = []
        for i, flt in enumerate(sub.filters):
            if flt.is_empty_match:
                continue  # a present empty list matches nothing (relay.md §6.1 item 2)
            fkey = filter_key(flt)
            for key in _bucket_keys(flt):
                groups = self._buckets.setdefault(key, {})
                group = groups.get(fkey)
                if group is None:
                    group = groups[fkey] = _Group(flt)
                group.members[(sub, i)] = None
                keys.append((key, fkey))
        self._keys[sub] = keys
        if self.listener is not None:
            channels = self._channels[sub] = named_channels(sub.filters)
            for channel_id in channels:
                self.listener.acquire(channel_id)

    def remove(self, sub: Subscription) -> None:
        for channel_id in self._channels.pop(sub, ()):
            if self.listener is not None:
                self.listener.release(channel_id)
        for key, fkey in self._keys.pop(sub, ()):
            groups = self._buckets.get(key)
            group = groups.get(fkey) if groups is not None else None
            if group is None:
                continue
            for entry in [e for e in group.members if e[0] is sub]:
                del group.members[entry]
            if not group.members:
                del groups[fkey]  # type: ignore[index]
                if not groups:
                    del self._buckets[key]

    def matching(self, event: Event, channel_id: str | None) -> list[Subscription]:
        """Subscriptions with a filter that matches `event` under the live scope rule (§6.3 item 3),
        each once, in the order their groups are found."""
        if not self._buckets:
            return []  # no live subscription at all: nothing to look up
        idx = tag_index(event)
        keys: list[BucketKey] = [("a", event.pubkey), ("k", event.kind), WILDCARD]
        for name, values in idx.items():
            keys.extend(("#" + name, v) for v in values)
        out: list[Subscription] = []
        seen: set[Subscription] = set()
        for key in keys:
            groups = self._buckets.get(key)
            if not groups:
                continue
            for group in groups.values():
                flt = group.filter
                # Live scope: channel events only through a filter naming their channel.
                if channel_id is not None and channel_id not in flt.channels:
                    continue
                if not flt.matches(event, idx):
                    continue
                for sub, _ in group.members:
                    if sub not in seen:
                        seen.add(sub)
                        out.append(sub)
        return out
