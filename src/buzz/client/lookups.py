"""Reads several areas of the API share, each one `POST /query` through the bridge.

Channel state comes from the relay-signed addressable events of relay.md §4.6 (39000
metadata, 39002 members), which the relay serves only to readers of the channel; profiles are
kind 0. Filters always name `kinds`, so the p-gate (relay.md §5.4) never applies.
"""

from __future__ import annotations

from collections.abc import Iterable

from buzz.client.session import Session
from buzz.client.views import member_roles, newest_per_channel
from buzz.core.event import Event

METADATA_KIND = 39000
MEMBERS_KIND = 39002
PROFILE_KIND = 0


async def channel_metadata(ws: Session, channel_id: str) -> Event | None:
    """The channel's 39000, or None when it does not exist or I may not read it."""
    found = await ws.query([{"kinds": [METADATA_KIND], "#d": [channel_id]}])
    return newest_per_channel(found).get(channel_id)


async def channel_members(ws: Session, channel_id: str) -> dict[str, str] | None:
    """{pubkey: role} of the channel's active members (39002), or None when not readable."""
    found = await ws.query([{"kinds": [MEMBERS_KIND], "#d": [channel_id]}])
    latest = newest_per_channel(found).get(channel_id)
    return member_roles(latest) if latest is not None else None


async def profiles(ws: Session, pubkeys: Iterable[str]) -> dict[str, Event]:
    """{pubkey: newest kind 0} for those of `pubkeys` that have a profile."""
    keys = list(dict.fromkeys(pubkeys))
    if not keys:
        return {}
    out: dict[str, Event] = {}
    for event in await ws.query([{"kinds": [PROFILE_KIND], "authors": keys}]):
        if event.pubkey not in out:  # relay order is newest first
            out[event.pubkey] = event
    return out
