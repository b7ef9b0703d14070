"""Membership facts the channel, DM and message rules share (relay.md §4.1 item 4, §4.5).

Roles: `owner` > `admin` > `member` > `guest`, plus `bot`; owner and admin are elevated.
`announce` turns a committed change into its after-commit follow-up (relay.md §4.6, §4.7).
"""

from __future__ import annotations

from buzz.relay.ingestion.emit import ELEVATED_ROLES, ROLES, ChannelChange
from buzz.relay.ingestion.rules.base import AfterCommit, KindRules
from buzz.store.base import Member

ROLE_NAMES = frozenset(ROLES)


async def active_member(rules: KindRules, channel_id: str, pubkey: str) -> Member | None:
    """The member row when `pubkey` is an active member of the channel, else None."""
    member = await rules.store.get_member(channel_id, pubkey)
    return member if member is not None and member.active else None


def is_elevated(member: Member | None) -> bool:
    """An active owner or admin (relay.md §4.1 item 4)."""
    return member is not None and member.role in ELEVATED_ROLES


async def is_only_owner(rules: KindRules, channel_id: str, pubkey: str) -> bool:
    """True when `pubkey` is the channel's one active owner (§4.5 "the last owner")."""
    owners = [m.pubkey for m in await rules.store.active_members(channel_id) if m.role == "owner"]
    return owners == [pubkey]


def announce(rules: KindRules, change: ChannelChange) -> AfterCommit:
    """The follow-up of a committed channel change: the relay's Emitter when wired, else at
    least this process's membership cache is invalidated (relay.md §4.3 item 4)."""

    async def follow_up() -> None:
        if rules.emitter is not None:
            await rules.emitter.apply(change)
        else:
            rules.access.invalidate(change.channel_id)

    return follow_up


def clean_name(value: str | None) -> str:
    """A channel name without leading `#` and surrounding whitespace ('' when absent)."""
    return (value or "").strip().lstrip("#").strip()
