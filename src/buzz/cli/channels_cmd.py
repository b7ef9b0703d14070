"""`buzz channels`: create, list, get, join, leave, members, add-member, remove-member, rename,
archive, unarchive, delete (agents.md §2.2; the kinds are relay.md §4.5: 9007, 9021, 9022, 9000,
9001, 9002, 9008; the state read back is the relay-signed 39000/39002 of §4.6): a thin shell over `buzz.client.channels`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import click

from buzz.cli.common import keyed, run
from buzz.cli.groups import CommandGroup
from buzz.cli.output import Context
from buzz.client.channels import ROLES

F = TypeVar("F", bound=Callable[..., Any])
_channel_option = click.option("--channel", "channel", required=True, help="Channel id (UUID).")


@click.group(cls=CommandGroup)
def channels() -> None:
    """Channels: create, list, inspect, join, manage members, rename, archive and delete.

    \b
    Example:
      buzz channels create --name general --visibility private
      buzz channels list --member
    """


@channels.command()
@click.option("--name", required=True, help="Channel name.")
@click.option(
    "--type", "channel_type", type=click.Choice(["stream", "forum"]), default="stream", show_default=True
)
@click.option("--visibility", type=click.Choice(["open", "private"]), default="open", show_default=True)
@click.option("--description", default=None, help="What the channel is about.")
@click.option("--ttl", type=int, default=None, help="Message lifetime in seconds (positive).")
@click.pass_obj
def create(
    ctx: Context, name: str, channel_type: str, visibility: str, description: str | None, ttl: int | None
) -> None:
    """Create a channel (kind 9007 with a new UUID); you become its owner.

    Prints {"channel_id", "event_id"}.

    \b
    Example:
      buzz channels create --name design --visibility private --description "UI work"
    """
    run(ctx, lambda ws: ws.channels.create(name, channel_type, visibility, description, ttl))


@channels.command("list")
@click.option("--member", is_flag=True, help="Only channels I am a member of.")
@click.option(
    "--visibility", type=click.Choice(["open", "private"]), default=None, help="Only this visibility."
)
@click.option("--limit", type=click.IntRange(1, 1000), default=500, show_default=True)
@click.pass_obj
def list_(ctx: Context, member: bool, visibility: str | None, limit: int) -> None:
    """List the channels I can read (DMs are listed by `buzz dms list`).

    Prints {"channels": [{"id", "name", "type", "visibility", "about", "archived", "member"}]},
    sorted by name.

    \b
    Example:
      buzz channels list --member --visibility private
    """
    run(ctx, lambda ws: keyed("channels", ws.channels.listing(member, visibility, limit)))


@channels.command()
@_channel_option
@click.pass_obj
def get(ctx: Context, channel: str) -> None:
    """Show a channel's metadata (39000) and my role in it.

    Prints {"id", "name", "type", "visibility", "about", "topic", "purpose", "archived",
    "ttl_seconds", "member", "role"}; not_found (exit 1) when it does not exist or is private
    to others.

    \b
    Example:
      buzz channels get --channel 3f2b7c1e-8a4d-4e2f-9c1a-5b6d7e8f9a0b
    """
    run(ctx, lambda ws: ws.channels.get(channel))


@channels.command()
@_channel_option
@click.pass_obj
def members(ctx: Context, channel: str) -> None:
    """List a channel's active members with their roles and profile names.

    Prints {"members": [{"pubkey", "role", "display_name", "is_agent"}]}.

    \b
    Example:
      buzz channels members --channel 3f2b7c1e-8a4d-4e2f-9c1a-5b6d7e8f9a0b
    """
    run(ctx, lambda ws: keyed("members", ws.channels.members(channel)))


@channels.command("add-member")
@_channel_option
@click.option("--pubkey", required=True, help="Member to add (hex or npub).")
@click.option("--role", type=click.Choice(ROLES), default=None, help="Role (new members default to member).")
@click.pass_obj
def add_member(ctx: Context, channel: str, pubkey: str, role: str | None) -> None:
    """Add someone to a channel, or change their role (kind 9000).

    Without --role a new member gets `member` and an existing one keeps its role.
    Prints {"channel_id", "event_id", "pubkey", "role"}.

    \b
    Example:
      buzz channels add-member --channel 3f2b7c1e-8a4d-4e2f-9c1a-5b6d7e8f9a0b --pubkey npub1... --role bot
    """
    run(ctx, lambda ws: ws.channels.add_member(channel, pubkey, role))


@channels.command("remove-member")
@_channel_option
@click.option("--pubkey", required=True, help="Member to remove (hex or npub).")
@click.pass_obj
def remove_member(ctx: Context, channel: str, pubkey: str) -> None:
    """Remove someone from a channel (kind 9001). Prints {"channel_id", "event_id", "pubkey"}.

    \b
    Example:
      buzz channels remove-member --channel 3f2b7c1e-8a4d-4e2f-9c1a-5b6d7e8f9a0b --pubkey npub1...
    """
    run(ctx, lambda ws: ws.channels.remove_member(channel, pubkey))


# -- one --channel, one client call, printed {"channel_id", "event_id"} -----------------------------
def _channel_command(
    name: str, doc: str, call: Callable[..., Awaitable[object]], *options: Callable[[F], F]
) -> None:
    """Register `buzz channels <name> --channel C [options]`: `call(ws.channels, C, **options)`
    printed as JSON. `doc` is the help text (its Example section included)."""

    def command(ctx: Context, channel: str, **values: str) -> None:
        run(ctx, lambda ws: call(ws.channels, channel, **values))

    for option in (*reversed(options), _channel_option):  # --channel listed first
        command = option(command)
    channels.command(name, help=doc)(click.pass_obj(command))


_EXAMPLE = "\n\n\b\nExample:\n  buzz channels {} --channel 3f2b7c1e-8a4d-4e2f-9c1a-5b6d7e8f9a0b{}"

_channel_command(
    "join",
    'Join an open channel (kind 9021). Prints {"channel_id", "event_id"}.' + _EXAMPLE.format("join", ""),
    lambda c, channel: c.join(channel),
)
_channel_command(
    "leave",
    'Leave a channel (kind 9022). Prints {"channel_id", "event_id"}.' + _EXAMPLE.format("leave", ""),
    lambda c, channel: c.leave(channel),
)
_channel_command(
    "rename",
    'Rename a channel (kind 9002; owners and admins). Prints {"channel_id", "event_id"}.'
    + _EXAMPLE.format("rename", " --name design-review"),
    lambda c, channel, name: c.rename(channel, name),
    click.option("--name", required=True, help="The new name."),
)
_channel_command(
    "archive",
    "Archive a channel (kind 9002 archived=true): still readable, no new messages.\n\n"
    'Prints {"channel_id", "event_id"}.' + _EXAMPLE.format("archive", ""),
    lambda c, channel: c.archive(channel),
)
_channel_command(
    "unarchive",
    'Unarchive a channel (kind 9002 archived=false). Prints {"channel_id", "event_id"}.'
    + _EXAMPLE.format("unarchive", ""),
    lambda c, channel: c.unarchive(channel),
)
_channel_command(
    "delete",
    "Delete a channel (kind 9008; its owner only): it and its messages stop being served.\n\n"
    'Prints {"channel_id", "event_id"}.' + _EXAMPLE.format("delete", ""),
    lambda c, channel: c.delete(channel),
)
