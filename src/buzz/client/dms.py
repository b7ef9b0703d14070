"""Direct messages (agents.md §3.8 item 1, relay.md §4.8).

A DM is a private channel of type `dm`; kind 41010 with 1–8 `["p", …]` opens (or reuses) the
DM of that participant set and the relay answers `response:{"channel_id":…,"created":…}`.
DM messages are ordinary channel messages (`Messages.send` on the DM's channel)."""

from __future__ import annotations

import orjson

from buzz.client.errors import UserError, WorkspaceError
from buzz.client.lookups import METADATA_KIND
from buzz.client.models import Dm
from buzz.client.session import Session
from buzz.client.values import pubkey_arg
from buzz.client.views import channel_view, dm_participants, newest_per_channel
from buzz.core.channel_id import is_channel_id

DM_OPEN_KIND = 41010
MAX_OTHERS = 8
RESPONSE_PREFIX = "response:"


def dm_channel_from(message: str) -> str:
    """The `channel_id` of a `response:{…}` answer (relay.md §4.8 item 2). Raises WorkspaceError."""
    if message.startswith(RESPONSE_PREFIX):
        try:
            obj = orjson.loads(message[len(RESPONSE_PREFIX) :])
        except orjson.JSONDecodeError:
            obj = None
        if isinstance(obj, dict) and is_channel_id(obj.get("channel_id")):
            return str(obj["channel_id"])
    raise WorkspaceError(
        f"relay accepted the DM but did not name its channel: {message!r}", relay_message=message
    )


class Dms:
    def __init__(self, session: Session) -> None:
        self._s = session

    async def open(self, pubkeys: list[str] | tuple[str, ...]) -> str:
        """The channel id of the DM with these 1–8 people (hex or npub), created if needed.
        Raises UserError (count, only myself, a key that is not a secp256k1 point) or the
        relay's refusal."""
        s = self._s
        others = list(dict.fromkeys(pubkey_arg(p) for p in pubkeys))
        if not 1 <= len(others) <= MAX_OTHERS:
            raise UserError(f"--pubkey must be given 1-{MAX_OTHERS} times")
        if others == [s.pubkey]:
            raise UserError("a DM needs at least one other participant than yourself")
        tags = [["p", pk] for pk in others]
        event = s.sign(DM_OPEN_KIND, "", tags)
        result = await s.publish(event)
        if result.message.startswith("duplicate:"):
            # The same call signed within the same second is the same event, which the relay
            # answers `duplicate:` without executing (relay.md §4.8 item 5): sign it one second
            # later to have the relay resolve the (existing) DM again.
            event = s.sign(DM_OPEN_KIND, "", tags, event.created_at + 1)
            result = await s.publish(event)
        return dm_channel_from(result.message)

    async def listing(self, limit: int = 100) -> list[Dm]:
        """My DM channels with their participants, most recently changed first."""
        metas = await self._s.query([{"kinds": [METADATA_KIND], "#p": [self._s.pubkey]}])
        latest = sorted(newest_per_channel(metas).values(), key=lambda e: (-e.created_at, e.id))
        rows = [Dm(meta.d_tag, dm_participants(meta)) for meta in latest if channel_view(meta).type == "dm"]
        return rows[:limit]
