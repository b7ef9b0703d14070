"""`buzz dms`: open and list direct messages (agents.md §3.8 item 1, relay.md §4.8).

A DM is a private channel of type `dm`; kind 41010 with 1–8 `["p", …]` opens (or reuses) the
DM of that participant set and the relay answers `response:{"channel_id":…,"created":…}`.
DM messages are ordinary `buzz messages send --channel <dm>`. A thin shell over
`buzz.client.dms`."""

from __future__ import annotations

import click

from buzz.cli.common import keyed, run
from buzz.cli.groups import CommandGroup
from buzz.cli.output import Context


@click.group(cls=CommandGroup)
def dms() -> None:
    """Direct messages.

    \b
    Example:
      buzz dms open --pubkey npub1...
      buzz dms list
    """


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
    run(ctx, lambda ws: keyed("channel_id", ws.dms.open(pubkeys)))


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
    run(ctx, lambda ws: keyed("dms", ws.dms.listing(limit)))
