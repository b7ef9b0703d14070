"""`buzz dms`: open and list direct messages (agents.md §3.8 item 1, relay.md §4.8).

A DM is a private channel of type `dm`; kind 41010 with 1–8 `["p", …]` opens (or reuses) the
DM of that participant set and the relay answers `response:{"channel_id":…,"created":…}`.
DM messages are ordinary `buzz messages send --channel <dm>`, or `buzz dms send`.

`--private` sends end-to-end encrypted instead (NIP-17 gift wraps, `buzz.client.private_dms`):
the relay stores only wraps it cannot read. `buzz dms list` and `buzz dms read` show private
DMs beside channel DMs, each row marked `"e2ee": true` or `false`. A thin shell over the
client API."""

from __future__ import annotations

from typing import Any

import click

from buzz.cli.common import keyed, run, stdin_or
from buzz.cli.groups import CommandGroup
from buzz.cli.output import Context
from buzz.client.models import as_json
from buzz.client.values import pubkey_arg
from buzz.client.workspace import Workspace


@click.group(cls=CommandGroup)
def dms() -> None:
    """Direct messages.

    \b
    Example:
      buzz dms open --pubkey npub1...
      buzz dms send --private --pubkey npub1... --content "just between us"
      buzz dms list
      buzz dms read --pubkey npub1...
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
    """List my DM channels, then my private (end-to-end encrypted) conversations.

    Prints {"dms": [{"channel_id", "participants", "e2ee": false}, ...,
    {"channel_id": null, "participants", "e2ee": true, "last_at", "messages"}]}: channel DMs
    most recently changed first, then private conversations most recent first.

    \b
    Example:
      buzz dms list --limit 20
    """

    async def body(ws: Workspace) -> dict[str, Any]:
        rows: list[Any] = [*await ws.dms.listing(limit), *await ws.private_dms.conversations()]
        return {"dms": rows[:limit]}

    run(ctx, body)


@dms.command("send")
@click.option("--pubkey", "pubkeys", multiple=True, required=True, help="Recipient (hex or npub); 1-8 times.")
@click.option("--content", required=True, help="Message text; - reads stdin.")
@click.option("--private", is_flag=True, help="End-to-end encrypted (NIP-17): the relay cannot read it.")
@click.option("--reply-to", default=None, help="Id of the message answered.")
@click.pass_obj
def send(ctx: Context, pubkeys: tuple[str, ...], content: str, private: bool, reply_to: str | None) -> None:
    """Send a direct message to 1-8 people.

    Without --private it goes to the DM channel of these people (opened if needed) and prints
    what `buzz messages send` prints, plus "e2ee": false. With --private it is sealed and
    gift-wrapped to each recipient and to yourself (NIP-17, NIP-44 v2); the relay stores only
    the wraps. Prints {"event_id", "created_at", "recipients", "reply_to", "wrap_ids", "e2ee"}.

    \b
    Example:
      buzz dms send --private --pubkey npub1... --content "the code is 4711"
      buzz dms send --pubkey npub1... --content "lunch?"
    """
    text = stdin_or(content)

    async def body(ws: Workspace) -> Any:
        if private:
            return await ws.private_dms.send(pubkeys, text, reply_to)
        channel = await ws.dms.open(pubkeys)
        sent = await ws.messages.send(channel, text, reply_to)
        return {**as_json(sent), "e2ee": False}

    run(ctx, body)


@dms.command("read")
@click.option(
    "--pubkey", "pubkeys", multiple=True, required=True, help="The other participant(s); 1-8 times."
)
@click.option("--limit", type=click.IntRange(1, 500), default=50, show_default=True)
@click.pass_obj
def read(ctx: Context, pubkeys: tuple[str, ...], limit: int) -> None:
    """Read the conversation with exactly these people: the DM channel's messages and the
    private (end-to-end encrypted) ones, newest first, each marked "e2ee".

    Prints {"messages": [{"id", "pubkey", "created_at", "content", "reply_to", "e2ee", ...}],
    "unreadable": <wraps addressed to me that did not open>}.

    \b
    Example:
      buzz dms read --pubkey npub1... --limit 20
    """

    async def body(ws: Workspace) -> dict[str, Any]:
        people = sorted({pubkey_arg(p) for p in pubkeys} | {ws.pubkey})
        rows: list[dict[str, Any]] = []
        for dm in await ws.dms.listing(1000):
            if sorted(dm.participants) == people:
                for msg in await ws.messages.get(dm.channel_id, limit):
                    rows.append({**as_json(msg), "e2ee": False})
                break
        private = await ws.private_dms.messages(pubkeys, limit)
        rows += [as_json(m) for m in private]
        rows.sort(key=lambda m: (-m["created_at"], m["id"]))
        return {"messages": rows[:limit], "unreadable": ws.private_dms.unreadable}

    run(ctx, body)


@dms.command("inbox")
@click.option(
    "--relay", "relays", multiple=True, help="Relay URL to receive private DMs on; default: this relay."
)
@click.pass_obj
def inbox(ctx: Context, relays: tuple[str, ...]) -> None:
    """Publish my NIP-17 inbox list (kind 10050): where others send me private DMs.

    Prints {"event_id", "relays"}.

    \b
    Example:
      buzz dms inbox
    """

    async def body(ws: Workspace) -> dict[str, Any]:
        event = await ws.private_dms.publish_inbox(relays)
        return {"event_id": event.id, "relays": event.tag_values("relay")}

    run(ctx, body)
