"""Who may join a huddle: relay-level admission (huddle.md §3.5) and channel membership (§3.6).

Both steps fail closed: any exception, a database error included, is a refusal with the step's
exact message. Checks after relay admission use the participant's own pubkey, never an owner's.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

import orjson

from buzz.core.event import Event
from buzz.core.filters import Filter
from buzz.core.huddle_control import NOT_A_MEMBER, NOT_RELAY_MEMBER, ErrorMessage
from buzz.core.stored import relay_signed
from buzz.relay.auth.admission import Admission
from buzz.relay.ingestion.emit import ChannelChange
from buzz.store.base import SYSTEM, Channel, PutMember

if TYPE_CHECKING:
    from buzz.relay.huddle.host import HuddleHost

log = logging.getLogger(__name__)

HUDDLE_STARTED_KIND = 48100
PUT_USER_KIND = 9000


class JoinDenied(Exception):
    """A refused join step; `error` is the §4.2 message to send before closing."""

    def __init__(self, error: ErrorMessage) -> None:
        super().__init__(error.message)
        self.error = error


@dataclass(frozen=True, slots=True)
class ChannelGrant:
    """A channel the caller may join. `lifecycle_parent` is where 48101–48103 go (§3.6 item 2)."""

    channel: Channel
    lifecycle_parent: str

    @property
    def has_ttl(self) -> bool:
        return self.channel.ttl_seconds is not None


async def relay_admission(relay: HuddleHost, auth_event: Event) -> Admission:
    """§3.5 through the main relay's own gates (ban gate, relay membership, NIP-AA as they exist).

    Returns the participant's pubkey and the owners whose ban ends the seat too. Raises
    JoinDenied(NOT_RELAY_MEMBER) on any refusal.
    """
    try:
        return await relay.admission(auth_event)
    except Exception as exc:
        log.info("huddle relay admission refused for %s: %s", auth_event.pubkey, exc)
        raise JoinDenied(NOT_RELAY_MEMBER) from None


async def channel_admission(
    relay: HuddleHost, channel_id: str, parent_channel_id: str | None, pubkey: str
) -> ChannelGrant:
    """§3.6 items 1–4, in order. Raises JoinDenied(NOT_A_MEMBER) on any failure."""
    try:
        grant = await _channel_admission(relay, channel_id, parent_channel_id, pubkey)
    except JoinDenied:
        raise
    except Exception:
        log.exception("huddle channel admission failed for channel %s", channel_id)
        grant = None
    if grant is None:
        raise JoinDenied(NOT_A_MEMBER)
    return grant


async def _channel_admission(
    relay: HuddleHost, channel_id: str, parent_channel_id: str | None, pubkey: str
) -> ChannelGrant | None:
    store = relay.store
    channel = await store.get_channel(channel_id)
    if channel is None or channel.archived_at is not None or channel.deleted_at is not None:
        return None
    if channel.ttl_seconds is None:
        parent = channel_id  # parent_channel_id is ignored
    elif parent_channel_id is None or not await _linked_by_48100(relay, channel, parent_channel_id):
        return None
    else:
        parent = parent_channel_id
    grant = ChannelGrant(channel, parent)
    if await _active_member(relay, channel_id, pubkey) or channel.visibility == "open":
        return grant
    if channel.ttl_seconds is not None and await _active_member(relay, parent, pubkey):
        await _add_member(relay, channel, pubkey)
        return grant
    return None


async def _active_member(relay: HuddleHost, channel_id: str, pubkey: str) -> bool:
    member = await relay.store.get_member(channel_id, pubkey)
    return member is not None and member.active


async def _linked_by_48100(relay: HuddleHost, channel: Channel, parent_channel_id: str) -> bool:
    """A 48100 by the huddle channel's creator, stored in the parent, names this channel."""
    flt = Filter(
        kinds=frozenset({HUDDLE_STARTED_KIND}),
        authors=frozenset({channel.created_by}),
        tags={"h": frozenset({parent_channel_id})},
    )
    for stored in await relay.store.query([flt], SYSTEM):
        if stored.channel_id != parent_channel_id:
            continue
        try:
            body = orjson.loads(stored.event.content)
        except orjson.JSONDecodeError:
            continue
        if isinstance(body, dict) and body.get("ephemeral_channel_id") == channel.id:
            return True
    return False


async def _add_member(relay: HuddleHost, channel: Channel, pubkey: str) -> None:
    """§3.6 item 3 (c): add the caller with role `member`, invited by the channel's creator.

    The change is recorded as a relay-signed kind 9000 carrying the PutMember effect in the same
    transaction (relay.md §4.5); then the same follow-ups as any membership change run (cache
    invalidation, 39000–39002, the 44100 notice; relay.md §4.6).
    """
    event = Event.create(
        relay.secret_key,
        PUT_USER_KIND,
        "",
        [["h", channel.id], ["p", pubkey], ["role", "member"]],
    )
    effect = PutMember(channel.id, pubkey, role="member", invited_by=channel.created_by)
    stored = relay_signed(event, channel.id)
    await relay.store.insert(stored, [effect])
    await relay.fanout.publish(stored)
    await relay.emitter.apply(ChannelChange(channel.id, channel.created_by, added=(pubkey,)))
