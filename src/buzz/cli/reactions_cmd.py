"""`buzz reactions`: add and remove (agents.md §3.6): kind 7 with `["e", <target>]` (no `h`;
the relay takes the channel from the target) and optional `["emoji", <shortcode>, <url>]`;
removal is a kind 5 whose only tag is `["e", <my reaction id>]`."""

from __future__ import annotations

from typing import Any

import click

from buzz.cli.common import CliFailure, CommandGroup, Workspace, event_id_arg, not_found, run, user_error
from buzz.cli.output import Context

REACTION_KIND = 7
MAX_REACTION_CHARS = 64

_event_option = click.option("--event", "event_id", required=True, help="The event reacted to.")
_emoji_option = click.option("--emoji", required=True, help="One emoji or :shortcode:.")


@click.group(cls=CommandGroup)
def reactions() -> None:
    """Reactions on messages.

    \b
    Example:
      buzz reactions add --event 5c0f...e1 --emoji 👍
    """


@reactions.command()
@_event_option
@_emoji_option
@click.option("--emoji-url", "emoji_url", default=None, help="Image URL of a custom :shortcode: emoji.")
@click.pass_obj
def add(ctx: Context, event_id: str, emoji: str, emoji_url: str | None) -> None:
    """React to an event (kind 7). A second identical reaction is a conflict (exit 5).

    Prints {"event_id", "target_id", "emoji"}.

    \b
    Example:
      buzz reactions add --event 5c0f...e1 --emoji 🎉
      buzz reactions add --event 5c0f...e1 --emoji :party: --emoji-url https://example.com/party.png
    """

    async def body(ws: Workspace) -> dict[str, Any]:
        return await add_reaction(ws, event_id, emoji, emoji_url)

    run(ctx, body)


TARGET_NOT_FOUND = "invalid: reaction target event not found"  # relay.md §4.2 item 1


async def add_reaction(
    ws: Workspace, event_id: str, emoji: str, emoji_url: str | None = None
) -> dict[str, Any]:
    """Publish a kind 7 on `event_id` (agents.md §3.6): `reactions add` and the MCP tool
    `add_reaction`. Returns {"event_id", "target_id", "emoji"}; a second identical reaction is
    refused by the relay with `duplicate:` (CliFailure `conflict`)."""
    target_id = event_id_arg(event_id, "--event")
    if not emoji or len(emoji) > MAX_REACTION_CHARS:
        raise user_error(f"--emoji must be 1-{MAX_REACTION_CHARS} characters")
    tags = [["e", target_id]]
    if emoji_url is not None:
        shortcode = emoji.strip(":")
        if not shortcode or emoji != f":{shortcode}:":
            raise user_error("--emoji-url needs --emoji in the :shortcode: form")
        tags.append(["emoji", shortcode, emoji_url])
    event = ws.sign(REACTION_KIND, emoji, tags)
    try:
        await ws.publish(event)
    except CliFailure as exc:
        if exc.relay_message == TARGET_NOT_FOUND:  # agents.md §2.1: an unknown event is not_found
            raise not_found(f"no event {target_id} to react to") from None
        raise
    return {"event_id": event.id, "target_id": target_id, "emoji": emoji}


@reactions.command()
@_event_option
@_emoji_option
@click.pass_obj
def remove(ctx: Context, event_id: str, emoji: str) -> None:
    """Remove my reaction with this emoji from an event (kind 5 on the reaction).

    Prints {"event_id", "reaction_id", "target_id"}; not_found (exit 1) when I have no such
    reaction.

    \b
    Example:
      buzz reactions remove --event 5c0f...e1 --emoji 👍
    """

    async def body(ws: Workspace) -> dict[str, Any]:
        target_id = event_id_arg(event_id, "--event")
        mine = await ws.query([{"kinds": [REACTION_KIND], "authors": [ws.pubkey], "#e": [target_id]}])
        reaction = next((r for r in mine if r.content == emoji), None)
        if reaction is None:
            raise not_found(f"no {emoji} reaction of yours on {target_id}")
        event = ws.sign(5, "", [["e", reaction.id]])
        await ws.publish(event)
        return {"event_id": event.id, "reaction_id": reaction.id, "target_id": target_id}

    run(ctx, body)
