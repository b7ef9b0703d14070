"""What the harness looks up on the relay: channels and profiles (agents.md §4.2 item 6, §4.6).

- Channel discovery: `{"kinds":[39002],"#p":[A]}` gives the member channels (their `d`
  values), `{"kinds":[39000],"#d":[…]}` their name, type and archived state. A missing or
  unrecognized type is kept as `unknown`.
- Profiles (kind 0), cached for at most `PROFILE_TTL_S` (300 s) and fetched with a
  `LOOKUP_TIMEOUT_S` (2 s) bound: display names for prompts, "is an agent" (a valid NIP-OA `auth`
  tag on the kind 0) and sibling checks (that tag names our owner). A failed or timed-out lookup
  counts as "no profile": not a sibling, not an agent.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from buzz.agent.prompts import ChannelInfo, Person
from buzz.client.views import display_name
from buzz.core.channel_id import is_channel_id
from buzz.core.event import Event
from buzz.core.nip_oa import owner_of

log = logging.getLogger(__name__)

PROFILE_TTL_S = 300.0
LOOKUP_TIMEOUT_S = 2.0
KNOWN_CHANNEL_TYPES = frozenset({"stream", "forum", "dm", "workflow"})

Query = Callable[[Iterable[Mapping[str, Any]], float], Awaitable[list[Event]]]


def channel_info(meta: Event) -> ChannelInfo:
    """A 39000 → ChannelInfo (relay.md §4.6 item 1): `name`, `["t", type]`, `archived`."""
    channel_type = meta.first_tag("t") or "unknown"
    if channel_type not in KNOWN_CHANNEL_TYPES:
        channel_type = "unknown"
    return ChannelInfo(
        id=meta.d_tag,
        name=meta.first_tag("name") or meta.d_tag,
        type=channel_type,
        archived=meta.first_tag("archived") == "true",
    )


def newest_by_d(events: Iterable[Event]) -> dict[str, Event]:
    """The newest event per `d` value (ties: lowest id), for addressable relay state."""
    out: dict[str, Event] = {}
    for ev in events:
        cur = out.get(ev.d_tag)
        if cur is None or (ev.created_at, cur.id) > (cur.created_at, ev.id):
            out[ev.d_tag] = ev
    return out


async def discover_channels(query: Query, agent: str, timeout: float = 10.0) -> dict[str, ChannelInfo]:
    """Startup step 6: the agent's member channels with their metadata, archived ones included
    (`info.archived`: not served, but served once unarchived). Raises whatever `query` raises."""
    members = newest_by_d(await query([{"kinds": [39002], "#p": [agent]}], timeout))
    ids = [d for d, ev in members.items() if is_channel_id(d) and agent in ev.tag_values("p")]
    if not ids:
        return {}
    metas = newest_by_d(await query([{"kinds": [39000], "#d": ids}], timeout))
    out: dict[str, ChannelInfo] = {}
    for cid in ids:
        meta = metas.get(cid)
        out[cid] = channel_info(meta) if meta is not None else ChannelInfo(cid, cid, "unknown")
    return out


async def fetch_channel(query: Query, channel: str, timeout: float = 10.0) -> ChannelInfo | None:
    """One channel's 39000 metadata (after a 44100), or None when it is not served."""
    metas = newest_by_d(await query([{"kinds": [39000], "#d": [channel]}], timeout))
    meta = metas.get(channel)
    return channel_info(meta) if meta is not None else None


@dataclass(frozen=True, slots=True)
class Profile:
    """A looked-up author: display name, and the owner named by a valid `auth` tag (agents)."""

    pubkey: str
    display_name: str | None
    owner: str | None

    @property
    def person(self) -> Person:
        return Person(self.pubkey, self.display_name, self.owner is not None)


class Profiles:
    """Kind 0 cache with a bounded lookup (2 s) and a TTL (300 s). Time from `clock`."""

    def __init__(self, query: Query, clock: Callable[[], float] = time.monotonic) -> None:
        self._query = query
        self._clock = clock
        self._cache: dict[str, tuple[float, Profile]] = {}

    async def get_many(self, pubkeys: Iterable[str]) -> dict[str, Profile]:
        """Profiles of `pubkeys`; unknown or failed lookups give an empty profile."""
        now = self._clock()
        wanted = list(dict.fromkeys(pubkeys))
        missing = [pk for pk in wanted if pk not in self._cache or self._cache[pk][0] <= now]
        if missing:
            await self._fetch(missing, now)
        return {pk: self._cache.get(pk, (0.0, Profile(pk, None, None)))[1] for pk in wanted}

    async def get(self, pubkey: str) -> Profile:
        return (await self.get_many([pubkey]))[pubkey]

    async def _fetch(self, pubkeys: list[str], now: float) -> None:
        try:
            events = await asyncio.wait_for(
                self._query([{"kinds": [0], "authors": pubkeys}], LOOKUP_TIMEOUT_S), LOOKUP_TIMEOUT_S
            )
        except Exception as exc:  # timeouts and errors count as "no profile" (§4.6 item 1)
            log.info("profile lookup failed: %s", exc)
            return  # not cached: the next event retries
        newest: dict[str, Event] = {}
        for ev in events:
            cur = newest.get(ev.pubkey)
            if ev.kind == 0 and (cur is None or (ev.created_at, cur.id) > (cur.created_at, ev.id)):
                newest[ev.pubkey] = ev
        expires = now + PROFILE_TTL_S
        for pk in pubkeys:
            ev = newest.get(pk)
            profile = (
                Profile(pk, display_name(ev), owner_of(ev)) if ev is not None else Profile(pk, None, None)
            )
            self._cache[pk] = (expires, profile)

    async def is_sibling(self, author: str, agent: str, owner: str) -> bool:
        """§4.6 item 1: `author` ≠ A and its newest kind 0 carries exactly one `auth` tag that
        verifies against that event and names `owner`."""
        if author == agent:
            return False
        return (await self.get(author)).owner == owner

    def forget(self, pubkey: str) -> None:
        self._cache.pop(pubkey, None)


MEMBERS_TTL_S = 60.0


class Members:
    """Channel member sets from the relay's 39002 (for `--respond-to members`), cached for
    `MEMBERS_TTL_S` and fetched with the `LOOKUP_TIMEOUT_S` bound; a failed lookup admits
    nobody new (fail closed) and is not cached."""

    def __init__(self, query: Query, clock: Callable[[], float] = time.monotonic) -> None:
        self._query = query
        self._clock = clock
        self._cache: dict[str, tuple[float, frozenset[str]]] = {}

    async def is_member(self, channel: str, pubkey: str) -> bool:
        now = self._clock()
        cached = self._cache.get(channel)
        if cached is None or cached[0] <= now:
            try:
                events = await asyncio.wait_for(
                    self._query([{"kinds": [39002], "#d": [channel]}], LOOKUP_TIMEOUT_S), LOOKUP_TIMEOUT_S
                )
            except Exception as exc:
                log.info("member lookup of %s failed: %s", channel, exc)
                return False
            latest = newest_by_d(events).get(channel)
            members = frozenset(latest.tag_values("p")) if latest is not None else frozenset()
            cached = (now + MEMBERS_TTL_S, members)
            self._cache[channel] = cached
        return pubkey in cached[1]
