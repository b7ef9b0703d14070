"""Which pubkeys are agents in a huddle channel (huddle.md §10.5 item 2, §10.6).

Agents are the members with role `bot` in the channel's relay-signed member list (kind 39002,
`#d` = channel id, limit 1; tags `["p", <hex>, "", <role>]`, relay.md §4.6). The list is cached,
refreshed on connect and at most every 15 s; a failed refresh keeps the previous list.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from buzz.client.views import display_name
from buzz.core.event import Event
from buzz.core.huddle_wire import AGENT_REFRESH
from buzz.core.keys import is_hex

log = logging.getLogger(__name__)

GROUP_MEMBERS_KIND = 39002
BOT_ROLE = "bot"

Query = Callable[[Sequence[Mapping[str, Any]]], Awaitable[list[Event]]]


def bots_in(member_list: Event) -> frozenset[str]:
    """The `bot` pubkeys of one 39002 event (64 lowercase hex only)."""
    return frozenset(
        tag[1]
        for tag in member_list.tags
        if len(tag) >= 4 and tag[0] == "p" and tag[3] == BOT_ROLE and is_hex(tag[1], 64)
    )


class AgentDirectory:
    """The agents of one channel. `query` is the host's REQ (e.g. `RelayClient.query`)."""

    def __init__(
        self,
        query: Query,
        channel_id: str,
        *,
        refresh_s: float = AGENT_REFRESH,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._query = query
        self.channel_id = channel_id
        self.refresh_s = refresh_s
        self._clock = clock
        self._agents: frozenset[str] = frozenset()
        self._fetched_at: float | None = None

    @property
    def agents(self) -> frozenset[str]:
        """The cached list, without refreshing."""
        return self._agents

    async def refresh(self) -> frozenset[str]:
        """Fetch the list now; on failure keep (and return) the previous one."""
        try:
            events = await self._query([{"kinds": [GROUP_MEMBERS_KIND], "#d": [self.channel_id], "limit": 1}])
        except Exception as exc:
            log.warning("agent list refresh failed, keeping the previous list: %s", exc)
            return self._agents
        self._fetched_at = self._clock()
        newest = max(events, key=lambda e: (e.created_at, e.id), default=None)
        self._agents = bots_in(newest) if newest is not None else frozenset()
        return self._agents

    async def current(self) -> frozenset[str]:
        """The agents present now: the cache, refreshed when older than 15 s."""
        if self._fetched_at is None or self._clock() - self._fetched_at >= self.refresh_s:
            return await self.refresh()
        return self._agents


GROUP_METADATA_KIND = 39000
PROFILE_KIND = 0


async def room_vocabulary(query: Query, channel_id: str) -> tuple[list[str], str | None]:
    """(display names of the channel's members, the channel's name) from the relay: the
    newest 39002 (every `p`, any role), their kind 0 profiles (`display_name`, else `name`),
    and the newest 39000's `name` tag. What the recogniser may be told (issue 13)."""
    lists = await query([{"kinds": [GROUP_MEMBERS_KIND], "#d": [channel_id], "limit": 1}])
    newest = max(lists, key=lambda e: (e.created_at, e.id), default=None)
    members = sorted(
        {t[1] for t in newest.tags if len(t) >= 2 and t[0] == "p" and is_hex(t[1], 64)} if newest else set()
    )
    names: list[str] = []
    if members:
        profiles = await query([{"kinds": [PROFILE_KIND], "authors": members}])
        latest: dict[str, Event] = {}
        for profile in profiles:
            if profile.pubkey not in latest or profile.created_at > latest[profile.pubkey].created_at:
                latest[profile.pubkey] = profile
        for pubkey in members:
            if pubkey in latest and (name := display_name(latest[pubkey])):
                names.append(name)
    metadata = await query([{"kinds": [GROUP_METADATA_KIND], "#d": [channel_id], "limit": 1}])
    meta = max(metadata, key=lambda e: (e.created_at, e.id), default=None)
    channel = next((t[1] for t in meta.tags if len(t) >= 2 and t[0] == "name"), None) if meta else None
    return names, channel
