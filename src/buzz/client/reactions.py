"""Reactions (agents.md §3.6): kind 7 with `["e", <target>]`, the target's channel as
`["h", C]` when it is in one (the relay requires it: docs/decisions.md 174) and optional
`["emoji", <shortcode>, <url>]`; removal is a kind 5 with `["e", <my reaction id>]` and the
same `h`."""

from __future__ import annotations

from buzz.client.errors import NotFound, UserError, WorkspaceError
from buzz.client.models import ReactionAdded, ReactionRemoved
from buzz.client.session import Session
from buzz.client.values import event_id_arg, first_channel

REACTION_KIND = 7
MAX_REACTION_CHARS = 64
TARGET_NOT_FOUND = "invalid: reaction target event not found"  # relay.md §4.2 item 1


class Reactions:
    def __init__(self, session: Session) -> None:
        self._s = session

    async def add(self, event_id: str, emoji: str, emoji_url: str | None = None) -> ReactionAdded:
        """React to an event. Raises UserError (bad emoji), NotFound (no such target) and
        Conflict for a second identical reaction (the relay's `duplicate:`)."""
        target_id = event_id_arg(event_id, "--event")
        if not emoji or len(emoji) > MAX_REACTION_CHARS:
            raise UserError(f"--emoji must be 1-{MAX_REACTION_CHARS} characters")
        extra: list[list[str]] = []
        if emoji_url is not None:
            shortcode = emoji.strip(":")
            if not shortcode or emoji != f":{shortcode}:":
                raise UserError("--emoji-url needs --emoji in the :shortcode: form")
            extra.append(["emoji", shortcode, emoji_url])
        try:
            target = await self._s.get_event(target_id)
        except NotFound:  # agents.md §2.1: an unknown event is not_found
            raise NotFound(f"no event {target_id} to react to") from None
        channel_id = first_channel(target)
        tags = [["e", target_id], *([["h", channel_id]] if channel_id else []), *extra]
        event = self._s.sign(REACTION_KIND, emoji, tags)
        try:
            await self._s.publish(event)
        except WorkspaceError as exc:
            if exc.relay_message == TARGET_NOT_FOUND:  # agents.md §2.1: an unknown event is not_found
                raise NotFound(f"no event {target_id} to react to") from None
            raise
        return ReactionAdded(event.id, target_id, emoji)

    async def remove(self, event_id: str, emoji: str) -> ReactionRemoved:
        """Delete (kind 5) my reaction with `emoji` on the event. Raises NotFound when I have none."""
        target_id = event_id_arg(event_id, "--event")
        mine = await self._s.query(
            [{"kinds": [REACTION_KIND], "authors": [self._s.pubkey], "#e": [target_id]}]
        )
        reaction = next((r for r in mine if r.content == emoji), None)
        if reaction is None:
            raise NotFound(f"no {emoji} reaction of yours on {target_id}")
        channel_id = first_channel(reaction)
        if channel_id is None:  # a reaction stored before reactions carried their channel
            channel_id = first_channel(await self._s.get_event(target_id))
        event = self._s.sign(5, "", [["e", reaction.id], *([["h", channel_id]] if channel_id else [])])
        await self._s.publish(event)
        return ReactionRemoved(event.id, reaction.id, target_id)
