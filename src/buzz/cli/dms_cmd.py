"""`buzz dms`: open and list direct messages (agents.md §3.8 item 1, relay.md §4.8).

A DM is a private channel of type `dm`; kind 41010 with 1–8 `["p", …]` opens (or reuses) the
DM of that participant set and the relay answers `response:{"channel_id":…,"created":…}`.
DM messages are ordinary `buzz messages send --channel <dm>`."""

from __future__ import annotations

from typing import Any

import click
import orjson

from buzz.cli.common import CliFailure, CommandGroup, Workspace, pubkey_arg, run, user_error
from buzz.cli.lookups import METADATA_KIND
from buzz.cli.output import Context
from buzz.cli.views import channel_view, dm_participants, newest_per_channel
from buzz.core.channel_id import is_channel_id

DM_OPEN_KIND = 41010
MAX_OTHERS = 8
RESPONSE_PREFIX = "response:"


@click.group(cls=CommandGroup)
def dms() -> None:
    """Direct messages.

    \b
    Example:
      buzz dms open --pubkey npub1...
      buzz dms list
    """


def dm_channel_from(message: str) -> str:
    """The `channel_id` of a `response:{…}` answer (relay.md §4.8 item 2). Raises CliFailure."""
    if message.startswith(RESPONSE_PREFIX):
        try:
            obj = orjson.loads(message[len(RESPONSE_PREFIX) :])
        except orjson.JSONDecodeError:
            obj = None
        if isinstance(obj, dict) and is_channel_id(obj.get("channel_id")):
            return str(obj["channel_id"])
    raise CliFailure(
        "error", f"relay accepted the DM but did not name its channel: {message!r}", False, message
    )


@dms.command("open")
@click.option(
    "--pubkey", "pubkeys", multiple=True, required=True, help="Participant (hex or npub); 1-8 times."
)
@click.pass_obj
def open_(ctx: Context, pubkeys: tuple[str, ...]) -> None:
    """Open (or find) the DM with these people (kind 41010). Prints {"channel_id"}.

    \b
    Example:
      buzz dms open --pubkey npub1... --pubkey npub1...
    """

    async def body(ws: Workspace) -> dict[str, Any]:
        others = list(dict.fromkeys(pubkey_arg(p) for p in pubkeys))
        if not 1 <= len(others) <= MAX_OTHERS:
            raise user_error(f"--pubkey must be given 1-{MAX_OTHERS} times")
        if others == [ws.pubkey]:
            raise user_error("a DM needs at least one other participant than yourself")
        tags = [["p", pk] for pk in others]
        event = ws.sign(DM_OPEN_KIND, "", tags)
        result = await ws.publish(event)
        if result.message.startswith("duplicate:"):
            # The same command signed within the same second is the same event, which the relay
            # answers `duplicate:` without executing (relay.md §4.8 item 5): sign it one second
            # later to have the relay resolve the (existing) DM again.
            event = ws.sign(DM_OPEN_KIND, "", tags, event.created_at + 1)
            result = await ws.publish(event)
        return {"channel_id": dm_channel_from(result.message)}

    run(ctx, body)


@dms.command("list")
@click.option("--limit", type=click.IntRange(1, 1000), default=100, show_default=True)
@click.pass_obj
def list_(ctx: Context, limit: int) -> None:
    """List my DM channels with their participants, most recently changed first.

    Prints {"dms": [{"channel_id", "participants"}]}.

    \b
    Example:
      buzz dms list --limit 20
    """

    async def body(ws: Workspace) -> dict[str, Any]:
        metas = await ws.query([{"kinds": [METADATA_KIND], "#p": [ws.pubkey]}])
        latest = sorted(newest_per_channel(metas).values(), key=lambda e: (-e.created_at, e.id))
        rows = [
            {"channel_id": meta.d_tag, "participants": dm_participants(meta)}
            for meta in latest
            if channel_view(meta)["type"] == "dm"
        ]
        return {"dms": rows[:limit]}

    run(ctx, body)
