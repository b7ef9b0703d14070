"""Relay-signed huddle lifecycle events 48101–48103 (huddle.md §8.1, §8.3) and the end of a
huddle (§5.8 step 4).

Each event is signed by the relay key, tagged `["h", <lifecycle parent>]` and
`["p", <participant>]`, stored in the lifecycle parent and fanned out through the normal
access-checked path, so it is gated like any event of that channel. Content is a JSON object
serialised as a string. A duplicate stops after the store step; a storage failure does not stop
the fan-out (live subscribers must not go stale). Never raises: failures are logged.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import orjson

from buzz.core.event import Event
from buzz.core.stored import relay_signed
from buzz.relay.ingestion.emit import ChannelChange
from buzz.store.base import InsertOutcome, UpdateChannel

if TYPE_CHECKING:
    from buzz.relay.huddle.host import HuddleHost

log = logging.getLogger(__name__)

PARTICIPANT_JOINED = 48101
PARTICIPANT_LEFT = 48102
HUDDLE_ENDED = 48103

Archiver = Callable[["HuddleHost", str], Awaitable[None]]


ARCHIVE_KIND = 9002  # edit metadata, relay.md §4.5


async def archive_channel(relay: HuddleHost, channel_id: str) -> None:
    """Archive a TTL huddle channel (§5.8 step 4) as the relay: a relay-signed kind 9002
    `["archived","true"]` carrying the UpdateChannel effect in the same transaction, then the
    usual follow-ups (39000 shows it archived). Raises StoreError on failure."""
    event = Event.create(relay.secret_key, ARCHIVE_KIND, "", [["h", channel_id], ["archived", "true"]])
    stored = relay_signed(event, channel_id)
    effect = UpdateChannel(channel_id, (("archived_at", event.created_at),))
    await relay.store.insert(stored, [effect])
    await relay.fanout.publish(stored)
    await relay.emitter.apply(ChannelChange(channel_id, relay.pubkey))


class Lifecycle:
    """Emits the relay's lifecycle events for one relay."""

    def __init__(self, relay: HuddleHost, archiver: Archiver = archive_channel) -> None:
        self.relay = relay
        self.archiver = archiver

    async def joined(self, parent: str, channel_id: str, pubkey: str, revision: int, peer_id: str) -> None:
        """48101 after an admission (§8.1); `roster_revision` is the revision after the add."""
        body = {"ephemeral_channel_id": channel_id, "roster_revision": revision, "admission_id": peer_id}
        await self.emit(PARTICIPANT_JOINED, parent, pubkey, body)

    async def left(self, parent: str, channel_id: str, pubkey: str, revision: int, peer_id: str) -> None:
        """48102 after a removal; `roster_revision` is the revision after the removal."""
        body = {"ephemeral_channel_id": channel_id, "roster_revision": revision, "admission_id": peer_id}
        await self.emit(PARTICIPANT_LEFT, parent, pubkey, body)

    async def ended(self, parent: str, channel_id: str, last_leaver: str) -> None:
        """48103 of an automatic end, `p` = the last leaver."""
        await self.emit(HUDDLE_ENDED, parent, last_leaver, {"ephemeral_channel_id": channel_id})

    async def already_ended(self, channel_id: str) -> bool:
        """The TTL huddle channel is archived: its starter ended it (and posted 48103), so the
        last leaver's cleanup announces nothing again."""
        channel = await self.relay.store.get_channel(channel_id)
        return channel is not None and channel.archived_at is not None

    async def archive(self, channel_id: str) -> bool:
        """Archive a TTL huddle channel; False (logged) on failure."""
        try:
            await self.archiver(self.relay, channel_id)
        except Exception as exc:
            log.warning("archiving huddle channel %s failed: %s", channel_id, exc)
            return False
        self.relay.access.invalidate(channel_id)
        return True

    async def emit(self, kind: int, parent: str, pubkey: str, body: dict[str, Any]) -> Event | None:
        """Sign, store in `parent`, then fan out (§8.3 items 1 and 3). Returns the event."""
        try:
            event = Event.create(
                self.relay.secret_key, kind, orjson.dumps(body).decode(), [["h", parent], ["p", pubkey]]
            )
            stored = relay_signed(event, parent)
        except Exception:
            log.exception("building huddle lifecycle event %d failed", kind)
            return None
        try:
            if await self.relay.store.insert(stored) is not InsertOutcome.STORED:
                return event
        except Exception:
            log.exception("storing huddle lifecycle event %s failed", event.id)
        try:
            await self.relay.fanout.publish(stored)
        except Exception:
            log.exception("fan-out of huddle lifecycle event %s failed", event.id)
        return event
