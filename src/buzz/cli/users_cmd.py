"""`buzz users`: get, set-profile, presence, set-presence (agents.md §2.2, §3.8 item 3).

Profiles are kind 0 (content a JSON object; `is_agent`/`owner` from one valid NIP-OA `auth`
tag). Presence is kind 20001, ephemeral: set over WebSocket after NIP-42 AUTH (the bridge
refuses ephemeral kinds), read back through `POST /query` `{"kinds":[20001],"authors":[…]}`,
which the relay answers from its presence memory (relay.md §12.2 item 2).
"""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import aiohttp
import click
import orjson

from buzz.cli.common import CliFailure, CommandGroup, Workspace, pubkey_arg, run, user_error
from buzz.cli.lookups import PROFILE_KIND, profiles
from buzz.cli.output import Context
from buzz.cli.views import profile_fields, profile_view
from buzz.client.relay_client import RelayClient, RelayError
from buzz.core.nip_oa import TAG_NAME as AUTH_TAG_NAME

PRESENCE_KIND = 20001
PRESENCE_STATES = ("online", "away", "offline")
_WS_SCHEMES = {"http": "ws", "https": "wss", "ws": "ws", "wss": "wss"}


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

    async def body(ws: Workspace) -> dict[str, Any]:
        if bool(pubkeys) == (name is not None):
            raise user_error("give --pubkey (one or more) or --name")
        if name is not None:
            needle = name.strip().lower()
            if not needle:
                raise user_error("--name is empty")
            found = await ws.query([{"kinds": [PROFILE_KIND], "search": name, "limit": 100}])
            rows = []
            for event in found:
                view = profile_view(event.pubkey, event)
                names = [str(view[k]).lower() for k in ("name", "display_name") if view[k]]
                if any(needle in n for n in names):
                    rows.append(view)
            return {"users": rows}
        keys = list(dict.fromkeys(pubkey_arg(p) for p in pubkeys))
        found_by_key = await profiles(ws, keys)
        return {"users": [profile_view(pk, found_by_key.get(pk)) for pk in keys]}

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

    async def body(ws: Workspace) -> dict[str, Any]:
        changes = {"name": name, "picture": avatar, "about": about, "nip05": nip05}
        changes = {k: v for k, v in changes.items() if v is not None}
        if not changes:
            raise user_error("nothing to set: give --name, --avatar, --about or --nip05")
        current = (await profiles(ws, [ws.pubkey])).get(ws.pubkey)
        content = profile_fields(current) | changes
        tags = [list(t) for t in current.tags] if current is not None else []
        if ws.auth_tag is not None:
            tags = [t for t in tags if not t or t[0] != AUTH_TAG_NAME] + [list(ws.auth_tag)]
        # a replaceable event only wins with a newer created_at (relay.md §3.1)
        created_at = max(int(time.time()), current.created_at + 1 if current is not None else 0)
        event = ws.sign(PROFILE_KIND, orjson.dumps(content).decode(), tags, created_at)
        await ws.publish(event)
        return {"event_id": event.id, "pubkey": ws.pubkey, "profile": content}

    run(ctx, body)


def presence_state(content: str | None) -> str:
    """A 20001 content → online / away / offline (agents.md §3.8 item 3, relay.md §12.2 item 2).

    None (no live presence) and `offline` are offline; the `status` of JSON content or the bare
    text is used when it is `away` or `offline`; any other set status counts as online.
    """
    if content is None:
        return "offline"
    status: Any = content
    try:
        obj = orjson.loads(content)
    except orjson.JSONDecodeError:
        obj = None
    if isinstance(obj, dict):
        status = obj.get("status")
    status = status.strip().lower() if isinstance(status, str) else ""
    return status if status in ("away", "offline") else "online"


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

    async def body(ws: Workspace) -> dict[str, Any]:
        keys = list(dict.fromkeys(pubkey_arg(p) for p in pubkeys.split(",") if p.strip()))
        if not keys:
            raise user_error("--pubkeys is empty")
        live: dict[str, str] = {}
        for event in await ws.query([{"kinds": [PRESENCE_KIND], "authors": keys}]):
            live.setdefault(event.pubkey, event.content)  # newest first
        return {"presence": {pk: presence_state(live.get(pk)) for pk in keys}}

    run(ctx, body)


def websocket_url(relay_url: str) -> str:
    """`http`→`ws`, `https`→`wss`; ws/wss unchanged. Raises CliFailure for another scheme."""
    parts = urlsplit(relay_url.strip())
    scheme = _WS_SCHEMES.get(parts.scheme.lower())
    if scheme is None or not parts.netloc:
        raise user_error(f"relay URL must be ws://, wss://, http:// or https://, got {relay_url!r}")
    return urlunsplit((scheme, parts.netloc, parts.path, parts.query, ""))


@users.command("set-presence")
@click.argument("status", type=click.Choice(PRESENCE_STATES))
@click.pass_obj
def set_presence(ctx: Context, status: str) -> None:
    """Set my presence (kind 20001, ephemeral, sent over WebSocket). Prints {"event_id", "status"}.

    \b
    Example:
      buzz users set-presence online
    """

    async def body(ws: Workspace) -> dict[str, Any]:
        event = ws.sign(PRESENCE_KIND, status)
        auth_tags = [ws.auth_tag] if ws.auth_tag else []
        try:
            async with RelayClient(websocket_url(ws.ctx.relay_url), ws.secret, auth_tags=auth_tags) as client:
                result = await client.publish(event)
        except RelayError as exc:  # AUTH refused (restricted:/auth-required:/blocked:)
            raise CliFailure("auth_error", exc.message, False, exc.message) from None
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise CliFailure(
                "network_error", f"cannot reach the relay: {exc or type(exc).__name__}", True
            ) from None
        if not result.accepted:
            raise CliFailure("error", f"relay refused the event: {result.message}", False, result.message)
        return {"event_id": event.id, "status": status}

    run(ctx, body)
