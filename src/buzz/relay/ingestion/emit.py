"""Relay-emitted workspace events (relay.md §4.6) and the follow-ups of a channel change.

After a committed change to a channel or its members, `Emitter.apply` runs, in order:
invalidate this process's membership cache (§4.3 item 4), revoke live subscriptions that lost
access (§4.7), publish the channel state 39000–39003, the membership notices 44100/44101 and an
optional 40099 system message. Every event is signed with the relay key, stored through
`store.insert` (the relay's internal path: no client checks, same storage) and fanned out
through the normal access-checked fan-out. Failures are logged, never raised (§8 item 17).

State versions get `created_at = max(now, previous + 1)` under a per-channel lock, so a later
state always wins the §3.1 tie rule, even for several changes within one second (§4.6 item 2).

The change commits before its follow-ups run, so a crash in between leaves the state events
missing or stale. `repair` republishes exactly those, from the rows; it runs for every channel
at start and for the channel of a creator's repeated 9007 (issue 9 item 5).
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import orjson

from buzz.core.event import Event
from buzz.core.filters import Filter
from buzz.core.keys import public_key
from buzz.core.stored import relay_signed
from buzz.relay.auth.access import ChannelAccess
from buzz.relay.auth.revocation import revoke_unreadable
from buzz.relay.delivery.fanout import FanOut
from buzz.store.base import SYSTEM, Channel, EventStore, InsertOutcome, Member

log = logging.getLogger(__name__)

GROUP_METADATA, GROUP_ADMINS, GROUP_MEMBERS, GROUP_ROLES = 39000, 39001, 39002, 39003
STATE_KINDS = (GROUP_METADATA, GROUP_ADMINS, GROUP_MEMBERS, GROUP_ROLES)
REPAIR_BATCH = 250  # channels per state read at start: 4 kinds × 250 = MAX_LIMIT
MEMBER_ADDED, MEMBER_REMOVED = 44100, 44101
SYSTEM_MESSAGE = 40099
ROLES = ("owner", "admin", "member", "guest", "bot")  # relay.md §4.1 item 4, ladder order
ELEVATED_ROLES = frozenset({"owner", "admin"})


@dataclass(frozen=True, slots=True)
class ChannelChange:
    """What one committed change needs announced (relay.md §4.6).

    `added` / `removed`: pubkeys that became / stopped being active members (44100 / 44101).
    `system`: content of a 40099 system message, or None. `state`: publish 39000–39002
    (False after 9008: the channel is gone). `created`: also publish 39003 (it never changes).
    """

    channel_id: str
    actor: str
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    system: Mapping[str, object] | None = None
    state: bool = True
    created: bool = False


# -- state tags (relay.md §4.6 item 1) ------------------------------------------------------------
# Every state version also carries `["h", C]` after its `d`: a `#h` filter matches by the event's
# own tags (NIP-01, decision 174), and channel events reach live subscriptions only through a
# filter naming their channel (relay.md §6.3 item 3). A version stored without it differs from
# the rows, so `repair_all` republishes it at the next start.
def _state_key(channel_id: str) -> list[list[str]]:
    return [["d", channel_id], ["h", channel_id]]


def metadata_tags(channel: Channel, members: Sequence[Member]) -> list[list[str]]:
    """39000: d, h, name, about, private/public, closed, t, topic, purpose, archived, ttl; a DM
    also gets `hidden` and one `p` per member."""
    tags = [*_state_key(channel.id), ["name", channel.name]]
    if channel.about:
        tags.append(["about", channel.about])
    tags += [
        ["private" if channel.visibility == "private" else "public"],
        ["closed"],
        ["t", channel.channel_type],
    ]
    if channel.topic:
        tags.append(["topic", channel.topic])
    if channel.purpose:
        tags.append(["purpose", channel.purpose])
    if channel.archived_at is not None:
        tags.append(["archived", "true"])
    if channel.ttl_seconds is not None:
        tags.append(["ttl", str(channel.ttl_seconds)])
    if channel.channel_type == "dm":
        tags.append(["hidden"])
        tags += [["p", m.pubkey] for m in members]
    return tags


def admins_tags(channel_id: str, members: Sequence[Member]) -> list[list[str]]:
    """39001: one `["p", pk, role]` per active owner or admin."""
    return _state_key(channel_id) + [["p", m.pubkey, m.role] for m in members if m.role in ELEVATED_ROLES]


def members_tags(channel_id: str, members: Sequence[Member]) -> list[list[str]]:
    """39002: one `["p", pk, "", role]` per active member."""
    return _state_key(channel_id) + [["p", m.pubkey, "", m.role] for m in members]


def roles_tags(channel_id: str) -> list[list[str]]:
    """39003: the five role names."""
    return _state_key(channel_id) + [["role", r] for r in ROLES]


def state_versions(
    channel: Channel, members: Sequence[Member], roles: bool
) -> list[tuple[int, list[list[str]]]]:
    """(kind, tags) of 39000–39002, and 39003 when `roles`, for these rows."""
    versions = [
        (GROUP_METADATA, metadata_tags(channel, members)),
        (GROUP_ADMINS, admins_tags(channel.id, members)),
        (GROUP_MEMBERS, members_tags(channel.id, members)),
    ]
    if roles:
        versions.append((GROUP_ROLES, roles_tags(channel.id)))
    return versions


def notice_content(kind: int, channel_id: str, actor: str) -> str:
    """44100/44101 content, compact JSON in the order of relay.md §4.6 item 3."""
    kind_name = "member_added" if kind == MEMBER_ADDED else "member_removed"
    return orjson.dumps({"type": kind_name, "channel_id": channel_id, "actor": actor}).decode()


class Emitter:
    """Publishes the relay's own workspace events for one relay process."""

    def __init__(
        self,
        store: EventStore,
        fanout: FanOut,
        access: ChannelAccess,
        secret_key: str,
        connections: Iterable[object],
    ) -> None:
        self._store = store
        self._fanout = fanout
        self._access = access
        self._secret_key = secret_key
        self._connections = connections
        self.pubkey = public_key(secret_key)
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    async def apply(self, change: ChannelChange) -> None:
        """The follow-ups of one committed change, in order (module docstring). Never raises."""
        channel_id = change.channel_id
        self._access.invalidate(channel_id, _only_reader(change))  # also tells replicas (§12.4 item 5)
        await _logged("revocation", revoke_unreadable(self._connections, self._access, channel_id))
        if change.state:
            await _logged("channel state", self.channel_state(channel_id, roles=change.created))
        for pubkey in change.added:
            await _logged("44100", self.member_notice(MEMBER_ADDED, pubkey, channel_id, change.actor))
        for pubkey in change.removed:
            await _logged("44101", self.member_notice(MEMBER_REMOVED, pubkey, channel_id, change.actor))
        if change.system is not None:
            await _logged("40099", self.system_message(channel_id, change.system))

    async def channel_state(self, channel_id: str, roles: bool = False, repair: bool = False) -> int:
        """Publish 39000–39002 (and 39003 when `roles`) from the current rows; nothing for a
        missing or deleted channel (§4.6 item 5). With `repair`, only the kinds whose newest
        stored version is missing or differs from the rows are published. Returns how many
        versions were published. Raises StoreError."""
        lock = self._locks.get(channel_id)
        if lock is None:
            lock = self._locks[channel_id] = asyncio.Lock()
        async with lock:
            channel = await self._store.get_channel(channel_id)
            if channel is None:
                return 0
            versions = state_versions(channel, await self._store.active_members(channel_id), roles)
            if repair:
                stored = (await self._stored_state([channel_id])).get(channel_id, {})
                versions = [(kind, tags) for kind, tags in versions if stored.get(kind) != tags]
            for kind, tags in versions:
                previous = await self._store.latest_created_at(kind, self.pubkey, channel_id)
                now = int(time.time())
                created_at = now if previous is None else max(now, previous + 1)
                await self._publish(Event.create(self._secret_key, kind, "", tags, created_at), channel_id)
            return len(versions)

    async def repair(self, channel_id: str) -> int:
        """Publish whatever of 39000–39003 a crash between a channel change's commit and its
        follow-up left missing or stale (issue 9 item 5). Returns the versions published."""
        return await self.channel_state(channel_id, roles=True, repair=True)

    async def repair_all(self) -> int:
        """`repair` every live channel whose stored state differs from its rows (at start).

        Compared in bulk (two reads for the rows, one per REPAIR_BATCH channels for the state);
        only differing channels are re-read and republished under their lock. Logs, never
        raises; returns the versions published."""
        try:
            channels = await self._store.live_channels()
            stale: list[str] = []
            for start in range(0, len(channels), REPAIR_BATCH):
                batch = channels[start : start + REPAIR_BATCH]
                stored = await self._stored_state([channel.id for channel, _ in batch])
                for channel, members in batch:
                    have = stored.get(channel.id, {})
                    if any(have.get(kind) != tags for kind, tags in state_versions(channel, members, True)):
                        stale.append(channel.id)
        except Exception:
            log.exception("channel state repair: reading the channels failed")
            return 0
        published = 0
        for channel_id in stale:
            try:
                published += await self.repair(channel_id)
            except Exception:
                log.exception("channel state repair of %s failed", channel_id)
        if published:
            log.warning(
                "channel state repair: %d version(s) republished over %d channel(s)", published, len(stale)
            )
        return published

    async def _stored_state(self, channel_ids: Sequence[str]) -> dict[str, dict[int, list[list[str]]]]:
        """channel → kind → tags of the newest live relay-signed 39000–39003 (one query; at
        most REPAIR_BATCH channels, so the four kinds fit one `limit`)."""
        f = Filter(
            kinds=frozenset(STATE_KINDS), authors=frozenset({self.pubkey}), tags={"d": frozenset(channel_ids)}
        )
        out: dict[str, dict[int, list[list[str]]]] = {}
        for stored in await self._store.query([f], SYSTEM):  # newest first (§6.4 item 2)
            d = stored.event.first_tag("d")
            if d is not None:
                out.setdefault(d, {}).setdefault(stored.event.kind, [list(t) for t in stored.event.tags])
        return out

    async def member_notice(self, kind: int, target: str, channel_id: str, actor: str) -> None:
        """44100 / 44101: a global, p-gated notice `["p", target]`, `["h", C]` (§4.6 item 3)."""
        content = notice_content(kind, channel_id, actor)
        event = Event.create(self._secret_key, kind, content, [["p", target], ["h", channel_id]])
        await self._publish(event, None)

    async def system_message(self, channel_id: str, body: Mapping[str, object]) -> None:
        """40099 into the channel; content is `body` as compact JSON (§4.6 item 4)."""
        event = Event.create(
            self._secret_key, SYSTEM_MESSAGE, orjson.dumps(dict(body)).decode(), [["h", channel_id]]
        )
        await self._publish(event, channel_id)

    async def _publish(self, event: Event, channel_id: str | None) -> None:
        stored = relay_signed(event, channel_id)
        if await self._store.insert(stored) is not InsertOutcome.STORED:
            log.warning("relay-emitted event %s (kind %d) lost its key; not fanned out", event.id, event.kind)
            return
        await self._fanout.publish(stored)


def _only_reader(change: ChannelChange) -> str | None:
    """The one pubkey whose access `change` alters (a single removal), else None (any reader)."""
    if change.state and not change.added and len(change.removed) == 1:
        return change.removed[0]
    return None


async def _logged(what: str, step: Awaitable[object]) -> None:
    try:
        await step
    except Exception:
        log.exception("follow-up %s failed", what)
