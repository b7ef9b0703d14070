"""`buzz users`: get, set-profile, presence, set-presence (agents.md §2.2, §3.8 item 3).

Profiles are kind 0 (content a JSON object; `is_agent`/`owner` from one valid NIP-OA `auth`
tag). Presence is kind 20001, ephemeral: set over WebSocket after NIP-42 AUTH (the bridge
refuses ephemeral kinds), read back through `POST /query` `{"kinds":[20001],"authors":[…]}`,
which the relay answers from its presence memory (relay.md §12.2 item 2). A thin shell over
`buzz.client.users`.
"""

from __future__ import annotations

import click

from buzz.cli.common import keyed, run
from buzz.cli.groups import CommandGroup
from buzz.cli.output import Context
from buzz.client.errors import UserError
from buzz.client.models import Profile
from buzz.client.users import PRESENCE_STATES
from buzz.client.workspace import Workspace


@click.group(cls=CommandGroup)
def users() -> None:
    """Profiles and presence.

    \b
    Example:
      buzz users get --pubkey npub1...
      buzz users set-profile --name "Alice"
    """


@users.command()
@click.option("--pubkey", "pubkeys", multiple=True, help="Pubkey (hex or npub); repeatable.")
@click.option("--name", default=None, help="Find profiles whose name or display name contains this text.")
@click.pass_obj
def get(ctx: Context, pubkeys: tuple[str, ...], name: str | None) -> None:
    """Show profiles by pubkey, or find them by name.

    Prints {"users": [{"pubkey", "npub", "name", "display_name", "about", "picture",
    "is_agent", "owner"}]}; a pubkey without a profile is listed with null fields.

    \b
    Example:
      buzz users get --pubkey npub1... --pubkey 79be667e...
      buzz users get --name alice
    """

    async def body(ws: Workspace) -> dict[str, list[Profile]]:
        if bool(pubkeys) == (name is not None):
            raise UserError("give --pubkey (one or more) or --name")
        return {"users": await (ws.users.find(name) if name is not None else ws.users.get(pubkeys))}

    run(ctx, body)


@users.command("set-profile")
@click.option("--name", default=None, help="Display name.")
@click.option("--avatar", default=None, help="Picture URL.")
@click.option("--about", default=None, help="A few words about you.")
@click.option("--nip05", default=None, help="NIP-05 identifier (name@domain).")
@click.pass_obj
def set_profile(
    ctx: Context, name: str | None, avatar: str | None, about: str | None, nip05: str | None
) -> None:
    """Publish my profile (kind 0), keeping fields I do not change.

    With BUZZ_AUTH_TAG / --auth-tag set, the profile carries that NIP-OA `auth` tag (marks an
    agent). Prints {"event_id", "pubkey", "profile"}.

    \b
    Example:
      buzz users set-profile --name "Alice" --about "design lead" --avatar https://example.com/a.png
    """
    run(ctx, lambda ws: ws.users.set_profile(name, avatar, about, nip05))


@users.command()
@click.option("--pubkeys", required=True, help="Comma-separated pubkeys (hex or npub).")
@click.pass_obj
def presence(ctx: Context, pubkeys: str) -> None:
    """Show who is online, as the relay reports it (presence expires after 90 s).

    Prints {"presence": {"<pubkey>": "online" | "away" | "offline"}}.

    \b
    Example:
      buzz users presence --pubkeys npub1...,79be667e...
    """
    run(ctx, lambda ws: keyed("presence", ws.users.presence(p for p in pubkeys.split(",") if p.strip())))


@users.command("set-presence")
@click.argument("status", type=click.Choice(PRESENCE_STATES))
@click.pass_obj
def set_presence(ctx: Context, status: str) -> None:
    """Set my presence (kind 20001, ephemeral, sent over WebSocket). Prints {"event_id", "status"}.

    \b
    Example:
      buzz users set-presence online
    """
    run(ctx, lambda ws: ws.users.set_presence(status))
