"""Channels and members (agents.md §2.2; kinds of relay.md §4.5: 9007 create, 9021 join,
9022 leave, 9000 add/role, 9001 remove, 9002 rename/archive/unarchive, 9008 delete; state read back from the relay-signed 39000/39002 of
§4.6). Every call goes through the HTTP bridge and raises `buzz.client.errors` only."""

from __future__ import annotations

from buzz.client.errors import NotFound, UserError
from buzz.client.lookups import MEMBERS_KIND, METADATA_KIND, channel_members, channel_metadata, profiles
from buzz.client.models import (
    Channel,
    ChannelEvent,
    ChannelSummary,
    Member,
    MemberAdded,
    MemberRemoved,
)
from buzz.client.session import Session
from buzz.client.values import channel_arg, pubkey_arg
from buzz.client.views import channel_view, display_name, newest_per_channel, profile_view
from buzz.core.channel_id import new_channel_id

ROLES = ("owner", "admin", "member", "guest", "bot")
CREATE_KIND, JOIN_KIND, LEAVE_KIND, PUT_USER_KIND, REMOVE_USER_KIND = 9007, 9021, 9022, 9000, 9001
EDIT_METADATA_KIND, DELETE_KIND = 9002, 9008


class Channels:
    """The channel operations of one identity."""

    def __init__(self, session: Session) -> None:
        self._s = session

    async def create(
        self,
        name: str,
        channel_type: str = "stream",
        visibility: str = "open",
        description: str | None = None,
        ttl: int | None = None,
    ) -> ChannelEvent:
        """Publish a 9007 with a new UUID; the creator becomes owner. `ttl` in seconds (> 0).
        Raises UserError (empty name, bad ttl) or the relay's refusal."""
        if not name.strip().lstrip("#").strip():
            raise UserError("channel name is required")
        if ttl is not None and ttl <= 0:
            raise UserError("--ttl must be a positive number of seconds")
        channel_id = new_channel_id()
        tags = [["h", channel_id], ["name", name], ["visibility", visibility], ["channel_type", channel_type]]
        if description:
            tags.append(["about", description])
        if ttl is not None:
            tags.append(["ttl", str(ttl)])
        event = self._s.sign(CREATE_KIND, "", tags)
        await self._s.publish(event)
        return ChannelEvent(channel_id, event.id)

    async def listing(
        self, member: bool = False, visibility: str | None = None, limit: int = 500
    ) -> list[ChannelSummary]:
        """Readable non-DM channels (only mine with `member`), sorted by name, at most `limit`."""
        s = self._s
        mine = {e.d_tag for e in await s.query([{"kinds": [MEMBERS_KIND], "#p": [s.pubkey]}])}
        if member:
            metas = await s.query([{"kinds": [METADATA_KIND], "#d": sorted(mine)}]) if mine else []
        else:
            metas = await s.query([{"kinds": [METADATA_KIND]}])
        rows = []
        for channel_id, meta in newest_per_channel(metas).items():
            v = channel_view(meta)
            if v.type == "dm" or (visibility and v.visibility != visibility):
                continue
            rows.append(
                ChannelSummary(v.id, v.name, v.type, v.visibility, v.about, v.archived, channel_id in mine)
            )
        rows.sort(key=lambda r: (r.name.lower(), r.id))
        return rows[:limit]

    async def get(self, channel: str) -> Channel:
        """The channel's metadata and my role. Raises NotFound when it does not exist or is
        private to others."""
        channel_id = channel_arg(channel)
        meta = await channel_metadata(self._s, channel_id)
        if meta is None:
            raise NotFound(f"channel not found: {channel_id}")
        members = await channel_members(self._s, channel_id) or {}
        v = channel_view(meta)
        role = members.get(self._s.pubkey)
        return Channel(
            v.id, v.name, v.type, v.visibility, v.about, v.topic, v.purpose, v.archived, v.ttl_seconds,
            role is not None, role,
        )  # fmt: skip

    async def _channel_event(self, channel: str, kind: int, *tags: list[str]) -> ChannelEvent:
        channel_id = channel_arg(channel)
        event = self._s.sign(kind, "", [["h", channel_id], *tags])
        await self._s.publish(event)
        return ChannelEvent(channel_id, event.id)

    async def _membership(self, channel: str, kind: int) -> ChannelEvent:
        return await self._channel_event(channel, kind)

    async def rename(self, channel: str, name: str) -> ChannelEvent:
        """Rename a channel (9002 `name`; owners and admins). Raises UserError for an empty name."""
        if not name.strip().lstrip("#").strip():
            raise UserError("channel name is required")
        return await self._channel_event(channel, EDIT_METADATA_KIND, ["name", name])

    async def archive(self, channel: str) -> ChannelEvent:
        """Archive a channel (9002 `archived=true`; owners and admins): readable, no new writes."""
        return await self._channel_event(channel, EDIT_METADATA_KIND, ["archived", "true"])

    async def unarchive(self, channel: str) -> ChannelEvent:
        """Undo `archive` (9002 `archived=false`)."""
        return await self._channel_event(channel, EDIT_METADATA_KIND, ["archived", "false"])

    async def delete(self, channel: str) -> ChannelEvent:
        """Delete a channel (9008; its owner only): the channel and its events stop being served."""
        return await self._channel_event(channel, DELETE_KIND)

    async def join(self, channel: str) -> ChannelEvent:
        """Join an open channel (9021)."""
        return await self._membership(channel, JOIN_KIND)

    async def leave(self, channel: str) -> ChannelEvent:
        """Leave a channel (9022)."""
        return await self._membership(channel, LEAVE_KIND)

    async def members(self, channel: str) -> list[Member]:
        """Active members with roles and profile names. Raises NotFound when not readable."""
        channel_id = channel_arg(channel)
        roles = await channel_members(self._s, channel_id)
        if roles is None:
            raise NotFound(f"channel not found: {channel_id}")
        found = await profiles(self._s, roles)
        rows = []
        for pubkey, role in roles.items():
            profile = found.get(pubkey)
            rows.append(Member(pubkey, role, display_name(profile), profile_view(pubkey, profile).is_agent))
        return rows

    async def add_member(self, channel: str, pubkey: str, role: str | None = None) -> MemberAdded:
        """Add someone (hex or npub) or change their role (9000); without `role` a new member
        gets `member` and an existing one keeps its role. Raises UserError for a bad channel
        id or a key that is not a secp256k1 point, or the relay's refusal."""
        channel_id, target = channel_arg(channel), pubkey_arg(pubkey)
        tags = [["h", channel_id], ["p", target]] + ([["role", role]] if role else [])
        event = self._s.sign(PUT_USER_KIND, "", tags)
        await self._s.publish(event)
        return MemberAdded(channel_id, event.id, target, role)

    async def remove_member(self, channel: str, pubkey: str) -> MemberRemoved:
        """Remove someone (hex or npub) from a channel (9001). Any 64 hex is accepted, a key
        that is not a curve point too: the relay stores such members (decision 107)."""
        channel_id, target = channel_arg(channel), pubkey_arg(pubkey, on_curve=False)
        event = self._s.sign(REMOVE_USER_KIND, "", [["h", channel_id], ["p", target]])
        await self._s.publish(event)
        return MemberRemoved(channel_id, event.id, target)
