"""`buzz channels`: create, list, get, join, leave, members, add-member, remove-member
(agents.md §2.2; the kinds are relay.md §4.5: 9007, 9021, 9022, 9000, 9001; the state read
back is the relay-signed 39000/39002 of §4.6). Writes and reads go through the HTTP bridge."""

from __future__ import annotations

from typing import Any

import click

from buzz.cli.common import CommandGroup, Workspace, channel_arg, not_found, pubkey_arg, run, user_error
from buzz.cli.lookups import MEMBERS_KIND, METADATA_KIND, channel_members, channel_metadata, profiles
from buzz.cli.output import Context
from buzz.cli.views import channel_view, display_name, newest_per_channel, profile_view
from buzz.core.channel_id import new_channel_id

ROLES = ("owner", "admin", "member", "guest", "bot")
_channel_option = click.option("--channel", "channel", required=True, help="Channel id (UUID).")


@click.group(cls=CommandGroup)
def channels() -> None:
    """Channels: create, list, inspect, join and manage members.

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

    async def body(ws: Workspace) -> dict[str, Any]:
        if not name.strip().lstrip("#").strip():
            raise user_error("channel name is required")
        if ttl is not None and ttl <= 0:
            raise user_error("--ttl must be a positive number of seconds")
        channel_id = new_channel_id()
        tags = [["h", channel_id], ["name", name], ["visibility", visibility], ["channel_type", channel_type]]
        if description:
            tags.append(["about", description])
        if ttl is not None:
            tags.append(["ttl", str(ttl)])
        event = ws.sign(9007, "", tags)
        await ws.publish(event)
        return {"channel_id": channel_id, "event_id": event.id}

    run(ctx, body)


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

    async def body(ws: Workspace) -> dict[str, Any]:
        return await list_channels(ws, member, visibility, limit)

    run(ctx, body)


async def list_channels(
    ws: Workspace, member: bool = False, visibility: str | None = None, limit: int = 500
) -> dict[str, Any]:
    """Readable non-DM channels sorted by name: `channels list` and the MCP tool `list_channels`.

    Returns {"channels": [{"id", "name", "type", "visibility", "about", "archived", "member"}]}.
    """
    mine = {e.d_tag for e in await ws.query([{"kinds": [MEMBERS_KIND], "#p": [ws.pubkey]}])}
    if member:
        metas = await ws.query([{"kinds": [METADATA_KIND], "#d": sorted(mine)}]) if mine else []
    else:
        metas = await ws.query([{"kinds": [METADATA_KIND]}])
    rows = []
    for channel_id, meta in newest_per_channel(metas).items():
        view = channel_view(meta)
        if view["type"] == "dm" or (visibility and view["visibility"] != visibility):
            continue
        keys = ("id", "name", "type", "visibility", "about", "archived")
        rows.append({k: view[k] for k in keys} | {"member": channel_id in mine})
    rows.sort(key=lambda r: (r["name"].lower(), r["id"]))
    return {"channels": rows[:limit]}


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

    async def body(ws: Workspace) -> dict[str, Any]:
        channel_id = channel_arg(channel)
        meta = await channel_metadata(ws, channel_id)
        if meta is None:
            raise not_found(f"channel not found: {channel_id}")
        members = await channel_members(ws, channel_id) or {}
        view = channel_view(meta)
        view.pop("hidden")
        role = members.get(ws.pubkey)
        return view | {"member": role is not None, "role": role}

    run(ctx, body)


def _membership_event(ctx: Context, channel: str, kind: int) -> None:
    async def body(ws: Workspace) -> dict[str, Any]:
        return await membership_event(ws, channel, kind)

    run(ctx, body)


async def membership_event(ws: Workspace, channel: str, kind: int) -> dict[str, Any]:
    """Publish a 9021 (join) or 9022 (leave) for `channel` (relay.md §4.5): `channels join` /
    `leave` and the MCP tool `join_channel`. Returns {"channel_id", "event_id"}."""
    channel_id = channel_arg(channel)
    event = ws.sign(kind, "", [["h", channel_id]])
    await ws.publish(event)
    return {"channel_id": channel_id, "event_id": event.id}


@channels.command()
@_channel_option
@click.pass_obj
def join(ctx: Context, channel: str) -> None:
    """Join an open channel (kind 9021). Prints {"channel_id", "event_id"}.

    \b
    Example:
      buzz channels join --channel 3f2b7c1e-8a4d-4e2f-9c1a-5b6d7e8f9a0b
    """
    _membership_event(ctx, channel, 9021)


@channels.command()
@_channel_option
@click.pass_obj
def leave(ctx: Context, channel: str) -> None:
    """Leave a channel (kind 9022). Prints {"channel_id", "event_id"}.

    \b
    Example:
      buzz channels leave --channel 3f2b7c1e-8a4d-4e2f-9c1a-5b6d7e8f9a0b
    """
    _membership_event(ctx, channel, 9022)


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

    async def body(ws: Workspace) -> dict[str, Any]:
        channel_id = channel_arg(channel)
        roles = await channel_members(ws, channel_id)
        if roles is None:
            raise not_found(f"channel not found: {channel_id}")
        found = await profiles(ws, roles)
        rows = []
        for pubkey, role in roles.items():
            profile = found.get(pubkey)
            view = profile_view(pubkey, profile)
            rows.append(
                {
                    "pubkey": pubkey,
                    "role": role,
                    "display_name": display_name(profile),
                    "is_agent": view["is_agent"],
                }
            )
        return {"members": rows}

    run(ctx, body)


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

    async def body(ws: Workspace) -> dict[str, Any]:
        channel_id, target = channel_arg(channel), pubkey_arg(pubkey)
        tags = [["h", channel_id], ["p", target]] + ([["role", role]] if role else [])
        event = ws.sign(9000, "", tags)
        await ws.publish(event)
        return {"channel_id": channel_id, "event_id": event.id, "pubkey": target, "role": role}

    run(ctx, body)


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

    async def body(ws: Workspace) -> dict[str, Any]:
        channel_id, target = channel_arg(channel), pubkey_arg(pubkey)
        event = ws.sign(9001, "", [["h", channel_id], ["p", target]])
        await ws.publish(event)
        return {"channel_id": channel_id, "event_id": event.id, "pubkey": target}

    run(ctx, body)
