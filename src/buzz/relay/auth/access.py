"""Channel readability and write access (relay.md §4.3), with a short membership cache.

`readable(C, r)`: C exists (not deleted) and is open or r is an active member. Lookups are
cached for at most MEMBERSHIP_CACHE_TTL_S; a change made by this process invalidates its own
cache at once; a failed lookup denies (fail closed). While `cache_enabled` is False (set by the
Redis bus while it cannot hear other replicas' changes) every answer comes from the store.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from buzz.core.kinds import BUILTIN, KindTable
from buzz.core.stored import StoredEvent
from buzz.core.visibility import Reader, visible_by_sets
from buzz.store.base import Channel, EventStore

log = logging.getLogger(__name__)

MEMBERSHIP_CACHE_TTL_S = 10.0
_FETCH: Any = object()  # "read the channel row from the store"


class ChannelAccess:
    def __init__(
        self, store: EventStore, ttl_s: float = MEMBERSHIP_CACHE_TTL_S, table: KindTable = BUILTIN
    ) -> None:
        self._store = store
        self._ttl = ttl_s
        self.table = table  # the relay's kinds: which are gated, for `visible`
        self._cache: dict[tuple[str, str | None], tuple[float, bool]] = {}
        # Set by the Redis bus: tells the other replicas (relay.md §12.4 item 5), (channel, pubkey).
        self.on_invalidate: Callable[[str, str | None], None] | None = None
        # The Redis bus turns this off while it misses other replicas' access changes.
        self.cache_enabled = True
        # Other caches of answers that depend on membership (the media access cache): told
        # whenever this one drops answers, here or on another replica.
        self.on_forget: list[Callable[[str | None], None]] = []

    def _cached(self, channel_id: str, reader: str | None) -> bool | None:
        """The cached `readable` answer, None when there is none (or it expired)."""
        hit = self._cache.get((channel_id, reader)) if self.cache_enabled else None
        if hit is not None and hit[0] > time.monotonic():
            return hit[1]
        return None

    async def readable(self, channel_id: str, reader: Reader) -> bool:
        """relay.md §4.3 item 1. Never raises: a failed lookup is False. A set of pubkeys (a
        connection that authenticated several) reads a channel any of them may read."""
        if isinstance(reader, frozenset):
            for one in sorted(reader):
                if await self.readable(channel_id, one):
                    return True
            return False
        key = (channel_id, reader)
        hit = self._cache.get(key) if self.cache_enabled else None
        now = time.monotonic()
        if hit is not None and hit[0] > now:
            return hit[1]
        try:
            ok = await self._lookup(channel_id, reader)
        except Exception:  # fail closed: a read failure is a denial, never "open"
            log.exception("membership lookup failed for channel %s", channel_id)
            return False
        if not self.cache_enabled:
            return ok
        if len(self._cache) > 100_000:
            self._cache.clear()
        self._cache[key] = (now + self._ttl, ok)
        return ok

    async def _lookup(self, channel_id: str, reader: str | None, channel: Any = _FETCH) -> bool:
        if channel is _FETCH:
            channel = await self._store.get_channel(channel_id)  # type: ignore[attr-defined]
        if channel is None or channel.deleted_at is not None:
            return False
        if channel.visibility == "open":
            return True
        if reader is None:
            return False
        member = await self._store.get_member(channel_id, reader)  # type: ignore[attr-defined]
        return member is not None and member.removed_at is None

    async def visible(self, stored: StoredEvent, reader: Reader) -> bool:
        """relay.md §5.3 items 2–6 for one event and one reader: the visibility sets
        (`visible_by_sets`), then `readable(C, reader)` for a channel event. The one per-event
        authorization used by live fan-out and presence reads; stored reads apply the same
        predicate with item 6 pushed into SQL (`buzz.store.clauses`). Never raises."""
        if isinstance(reader, frozenset):  # the union of each key's rights, event by event
            for one in sorted(reader):
                if await self.visible(stored, one):
                    return True
            return False
        if not visible_by_sets(stored.event, reader, self.table):
            return False
        return stored.channel_id is None or await self.readable(stored.channel_id, reader)

    def visible_known(self, stored: StoredEvent, reader: Reader) -> bool | None:
        """`visible` without awaiting: its answer when the sets decide or the membership cache
        holds `readable(C, reader)`, None when only the store can tell (then await `visible`).
        Live fan-out asks this first for each subscriber."""
        if isinstance(reader, frozenset):  # visible to one key is enough; unknown unless one says so
            answers = [self.visible_known(stored, one) for one in reader]
            return True if True in answers else False if all(a is False for a in answers) else None
        if not visible_by_sets(stored.event, reader, self.table):
            return False
        if stored.channel_id is None:
            return True
        return self._cached(stored.channel_id, reader)

    async def writable(self, channel_id: str, writer: str, channel: Channel | object | None = _FETCH) -> bool:
        """relay.md §4.3 item 2: the channel exists and is open or `writer` is an active member.

        Uncached: writes must see the newest membership. A failed lookup is False. `channel`:
        the row (or None) the caller has just read from the store, which saves a second read.
        """
        try:
            return await self._lookup(channel_id, writer, channel)
        except Exception:
            log.exception("membership lookup failed for channel %s", channel_id)
            return False

    async def archived(self, channel_id: str) -> bool:
        """True when the channel exists and is archived (an ended huddle's channel, huddle.md
        §8.4). Never raises: a failed lookup is False, so a database hiccup ends no huddle."""
        try:
            channel = await self._store.get_channel(channel_id)  # type: ignore[attr-defined]
        except Exception:
            log.exception("channel lookup failed for channel %s", channel_id)
            return False
        return channel is not None and channel.archived_at is not None

    def invalidate(self, channel_id: str | None = None, pubkey: str | None = None) -> None:
        """Drop cached answers for one channel (or all) after a change by this process, and
        announce the change of a channel to the other replicas when a bus is wired (relay.md
        §12.4 item 5); `pubkey` names the one reader affected, when only one is."""
        self.forget(channel_id)
        if channel_id is not None and self.on_invalidate is not None:
            self.on_invalidate(channel_id, pubkey)

    def forget(self, channel_id: str | None = None) -> None:
        """Drop cached answers for one channel (or all), announcing nothing (a change another
        replica made, relay.md §12.4 item 5)."""
        for listener in self.on_forget:
            listener(channel_id)
        if channel_id is None:
            self._cache.clear()
            return
        for key in [k for k in self._cache if k[0] == channel_id]:
            del self._cache[key]
