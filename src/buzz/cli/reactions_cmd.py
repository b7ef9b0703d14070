"""`buzz reactions`: add and remove (agents.md §3.6): kind 7 with `["e", <target>]` (no `h`;
the relay takes the channel from the target) and optional `["emoji", <shortcode>, <url>]`;
removal is a kind 5 whose only tag is `["e", <my reaction id>]`. A thin shell over
`buzz.client.reactions`."""

from __future__ import annotations

import click

from buzz.cli.common import run
from buzz.cli.groups import CommandGroup
from buzz.cli.output import Context

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
    run(ctx, lambda ws: ws.reactions.add(event_id, emoji, emoji_url))


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
    run(ctx, lambda ws: ws.reactions.remove(event_id, emoji))
