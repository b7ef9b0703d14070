"""`buzz messages`: send, get, thread, edit, delete, search (agents.md §2.2, §2.3, §3).

Kinds: 9 (stream message, tags in the order `h`, NIP-10 marked `e`, `p`, `broadcast`), 40003
(edit), 5 / 9005 (deletion by the author or its owner / moderation). Output message objects
are `buzz.cli.views.message_view`. Everything goes through the HTTP bridge.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from buzz.cli.common import (
    CommandGroup,
    Workspace,
    channel_arg,
    event_id_arg,
    first_channel,
    not_found,
    pubkey_arg,
    read_text,
    run,
    user_error,
)
from buzz.cli.lookups import channel_members, profiles
from buzz.cli.mentions import resolve_names, uri_mentions
from buzz.cli.output import Context
from buzz.cli.views import EDIT_KIND, display_name, message_view, newest_edits, thread_links
from buzz.core.event import Event
from buzz.core.nip_oa import owner_of

MESSAGE_KIND = 9
MAX_CONTENT_BYTES = 65_536  # agents.md §2.3 item 1 (the relay's own limit is 256 KiB)
MAX_MENTIONS = 50
MAX_THREAD_FETCH = 1000


@click.group(cls=CommandGroup)
def messages() -> None:
    """Channel messages: send, read, thread, edit, delete, search.

    \b
    Example:
      buzz messages send --channel 3f2b7c1e-8a4d-4e2f-9c1a-5b6d7e8f9a0b --content "hello"
      buzz messages get --channel 3f2b7c1e-8a4d-4e2f-9c1a-5b6d7e8f9a0b --limit 20
    """


async def _with_edits(
    ws: Workspace, events: list[Event], channel_id: str | None = None
) -> list[dict[str, Any]]:
    """Message objects with the newest edit applied (agents.md §2.1 item 5)."""
    if not events:
        return []
    flt: dict[str, Any] = {"kinds": [EDIT_KIND], "#e": [e.id for e in events]}
    if channel_id is not None:
        flt["#h"] = [channel_id]
    edits = newest_edits(await ws.query([flt]))
    return [message_view(e, edits.get(e.id)) for e in events]


async def _mentions(ws: Workspace, channel_id: str, content: str, flags: tuple[str, ...]) -> list[str]:
    """The `p` values of agents.md §2.3 items 2–4, or a user_error."""
    explicit = list(dict.fromkeys([pubkey_arg(m, "--mention") for m in flags] + uri_mentions(content)))
    if not explicit and "@" not in content:
        return []
    members = await channel_members(ws, channel_id)
    if members is None:
        raise not_found(f"channel not found: {channel_id}")
    names = {pk: display_name(p) or "" for pk, p in (await profiles(ws, members)).items()}
    names = {pk: names.get(pk, "") for pk in members}
    resolution = resolve_names(content, names)
    failed = resolution.unresolved + resolution.ambiguous
    if failed and not explicit:
        what = ", ".join(failed)
        raise user_error(f"cannot resolve mention {what}: use --mention with a pubkey, or fix the name")
    pubkeys = list(dict.fromkeys(explicit + resolution.resolved))
    if len(pubkeys) > MAX_MENTIONS:
        raise user_error(f"too many mentions: {len(pubkeys)} (max {MAX_MENTIONS})")
    outsiders = [pk for pk in pubkeys if pk not in members]
    if outsiders:
        raise user_error(f"mentioned pubkey is not a member of the channel: {', '.join(outsiders)}")
    return pubkeys


@messages.command()
@click.option("--channel", required=True, help="Channel id (UUID).")
@click.option("--content", required=True, help="Message text, or - to read stdin.")
@click.option("--reply-to", "reply_to", default=None, help="Parent event id (makes a thread reply).")
@click.option("--mention", "mentions", multiple=True, help="Pubkey to mention (hex or npub); repeatable.")
@click.option("--broadcast", is_flag=True, help="Also show a thread reply on the channel timeline.")
@click.pass_obj
def send(
    ctx: Context, channel: str, content: str, reply_to: str | None, mentions: tuple[str, ...], broadcast: bool
) -> None:
    """Send a message (kind 9) to a channel, optionally as a thread reply.

    `@Name` in the text is resolved against the members' display names. Prints
    {"event_id", "channel_id", "created_at", "reply_to", "root", "mention_pubkeys"}.

    \b
    Example:
      buzz messages send --channel 3f2b7c1e-8a4d-4e2f-9c1a-5b6d7e8f9a0b --content "ship it?" --mention npub1...
      echo "long text" | buzz messages send --channel 3f2b7c1e-8a4d-4e2f-9c1a-5b6d7e8f9a0b --content -
    """

    async def body(ws: Workspace) -> dict[str, Any]:
        return await send_message(ws, channel, content, reply_to, mentions, broadcast)

    run(ctx, body)


async def send_message(
    ws: Workspace,
    channel: str,
    content: str,
    reply_to: str | None = None,
    mentions: Sequence[str] = (),
    broadcast: bool = False,
    *,
    stdin: bool = True,
) -> dict[str, Any]:
    """Publish a kind 9 (agents.md §2.3, §3.2): `messages send` and the MCP tool `send_message`.

    Returns {"event_id", "channel_id", "created_at", "reply_to", "root", "mention_pubkeys"}.
    `stdin=False` makes a `-` content literal. Raises CliFailure (user_error, not_found, or the
    relay's refusal).
    """
    channel_id = channel_arg(channel)
    if broadcast and reply_to is None:
        raise user_error("--broadcast requires --reply-to")
    parent_id = event_id_arg(reply_to, "--reply-to") if reply_to is not None else None
    text = read_text(content, "content", MAX_CONTENT_BYTES, stdin=stdin)
    tags: list[list[str]] = [["h", channel_id]]
    root: str | None = None
    if parent_id is not None:
        parent = await ws.get_event(parent_id)
        if first_channel(parent) != channel_id:
            raise user_error(f"reply parent {parent_id} is not in channel {channel_id}")
        parent_reply, parent_root = thread_links(parent)
        if parent_reply is None:
            root = parent_id
            tags.append(["e", parent_id, "", "reply"])
        else:
            root = parent_root
            tags += [["e", str(parent_root), "", "root"], ["e", parent_id, "", "reply"]]
    tags += [["p", pk] for pk in await _mentions(ws, channel_id, text, tuple(mentions))]
    if broadcast:
        tags.append(["broadcast", "1"])
    event = ws.sign(MESSAGE_KIND, text, tags)
    await ws.publish(event)
    return {
        "event_id": event.id,
        "channel_id": channel_id,
        "created_at": event.created_at,
        "reply_to": parent_id,
        "root": root,
        "mention_pubkeys": event.tag_values("p"),
    }


def _kinds(value: str | None) -> list[int]:
    if value is None:
        return [MESSAGE_KIND]
    try:
        kinds = [int(k) for k in value.split(",") if k.strip()]
    except ValueError:
        raise user_error(f"invalid --kinds {value!r}: expected comma-separated integers") from None
    if not kinds or not all(0 <= k <= 65535 for k in kinds):
        raise user_error(f"invalid --kinds {value!r}: kinds are integers 0-65535")
    return kinds


@messages.command()
@click.option("--channel", required=True, help="Channel id (UUID).")
@click.option("--limit", type=click.IntRange(1, 500), default=50, show_default=True)
@click.option(
    "--before", type=click.IntRange(min=1), default=None, help="Only messages older than this unix time."
)
@click.option(
    "--since", type=click.IntRange(min=0), default=None, help="Only messages at or after this unix time."
)
@click.option("--kinds", default=None, help="Comma-separated kinds (default 9).")
@click.pass_obj
def get(
    ctx: Context, channel: str, limit: int, before: int | None, since: int | None, kinds: str | None
) -> None:
    """Read a channel's messages, newest first (thread replies included).

    Prints {"messages": [message, …]}; each message has the event fields plus channel_id,
    reply_to, root, mentions and edited_at (the newest edit replaces content).

    \b
    Example:
      buzz messages get --channel 3f2b7c1e-8a4d-4e2f-9c1a-5b6d7e8f9a0b --limit 20 --since 1750000000
    """

    async def body(ws: Workspace) -> dict[str, Any]:
        channel_id = channel_arg(channel)
        return await get_messages(ws, channel_id, limit, before, since, _kinds(kinds))

    run(ctx, body)


async def get_messages(
    ws: Workspace,
    channel: str,
    limit: int = 50,
    before: int | None = None,
    since: int | None = None,
    kinds: Sequence[int] | None = None,
) -> dict[str, Any]:
    """A channel's messages newest first (agents.md §2.1 item 5): `messages get` and the MCP
    tool `get_messages`. `kinds` None means [9]. Returns {"messages": [message, …]}."""
    channel_id = channel_arg(channel)
    flt: dict[str, Any] = {
        "kinds": list(kinds) if kinds is not None else [MESSAGE_KIND],
        "#h": [channel_id],
        "limit": limit,
    }
    if before is not None:
        flt["until"] = before - 1
    if since is not None:
        flt["since"] = since
    return {"messages": await _with_edits(ws, await ws.query([flt]), channel_id)}


def _depths(root_id: str, events: list[Event]) -> dict[str, int]:
    """Depth of every event reachable from the root through `reply` links (root = 0)."""
    parents = {e.id: thread_links(e)[0] for e in events}
    depths: dict[str, int] = {root_id: 0}

    def depth(event_id: str, seen: frozenset[str] = frozenset()) -> int | None:
        if event_id in depths:
            return depths[event_id]
        parent = parents.get(event_id)
        if parent is None or event_id in seen:
            return None
        d = depth(parent, seen | {event_id})
        if d is not None:
            depths[event_id] = d + 1
        return depths.get(event_id)

    for e in events:
        depth(e.id)
    return depths


@messages.command()
@click.option("--channel", required=True, help="Channel id (UUID).")
@click.option("--event", "event_id", required=True, help="Any event of the thread (root or reply).")
@click.option("--limit", type=click.IntRange(1, MAX_THREAD_FETCH), default=100, show_default=True)
@click.option("--depth-limit", "depth_limit", type=click.IntRange(0, 100), default=100, show_default=True)
@click.pass_obj
def thread(ctx: Context, channel: str, event_id: str, limit: int, depth_limit: int) -> None:
    """Read a whole thread: the root and its replies, oldest first.

    Prints {"root": <id>, "messages": [message, …]} (at most --limit, replies deeper than
    --depth-limit left out).

    \b
    Example:
      buzz messages thread --channel 3f2b7c1e-8a4d-4e2f-9c1a-5b6d7e8f9a0b --event 5c0f...e1 --depth-limit 2
    """

    async def body(ws: Workspace) -> dict[str, Any]:
        return await get_thread(ws, channel, event_id, limit, depth_limit)

    run(ctx, body)


async def get_thread(
    ws: Workspace, channel: str, event_id: str, limit: int = 100, depth_limit: int = 100
) -> dict[str, Any]:
    """The thread of `event_id`, oldest first: `messages thread` and the MCP tool `get_thread`.

    Returns {"root": <id>, "messages": [message, …]}. Raises CliFailure (not_found when the
    event is missing or in another channel)."""
    channel_id, wanted = channel_arg(channel), event_id_arg(event_id, "--event")
    anchor = await ws.get_event(wanted)
    if first_channel(anchor) != channel_id:
        raise not_found(f"event {wanted} is not in channel {channel_id}")
    root_id = thread_links(anchor)[1] or anchor.id
    found = await ws.query(
        [
            {"ids": [root_id], "#h": [channel_id]},
            {"kinds": [MESSAGE_KIND], "#h": [channel_id], "#e": [root_id], "limit": MAX_THREAD_FETCH},
        ]
    )
    depths = _depths(root_id, found)
    kept = [e for e in found if e.id in depths and depths[e.id] <= depth_limit]
    kept.sort(key=lambda e: (e.created_at, depths[e.id], e.id))  # a parent before its same-second replies
    return {"root": root_id, "messages": await _with_edits(ws, kept[:limit], channel_id)}


@messages.command()
@click.option("--event", "event_id", required=True, help="The message to edit.")
@click.option("--content", required=True, help="The full replacement text, or - to read stdin.")
@click.pass_obj
def edit(ctx: Context, event_id: str, content: str) -> None:
    """Edit one of your messages (kind 40003; readers show the newest edit).

    Prints {"event_id", "channel_id", "target_id"}.

    \b
    Example:
      buzz messages edit --event 5c0f...e1 --content "fixed typo"
    """

    async def body(ws: Workspace) -> dict[str, Any]:
        target_id = event_id_arg(event_id, "--event")
        text = read_text(content, "content", MAX_CONTENT_BYTES)
        target = await ws.get_event(target_id)
        channel_id = first_channel(target)
        if channel_id is None:
            raise user_error(f"event {target_id} is not a channel message")
        event = ws.sign(EDIT_KIND, text, [["h", channel_id], ["e", target_id]])
        await ws.publish(event)
        return {"event_id": event.id, "channel_id": channel_id, "target_id": target_id}

    run(ctx, body)


@messages.command()
@click.option("--event", "event_id", required=True, help="The message to delete.")
@click.option("--reason-code", "reason_code", default=None, help="Moderation reason code (kind 9005).")
@click.option("--public-reason", "public_reason", default=None, help="Moderation reason shown to members.")
@click.option("--action-id", "action_id", default=None, help="Moderation action id (UUID).")
@click.pass_obj
def delete(
    ctx: Context, event_id: str, reason_code: str | None, public_reason: str | None, action_id: str | None
) -> None:
    """Delete a message: kind 5 for your own (or your agent's), kind 9005 as channel owner/admin.

    Prints {"event_id", "kind", "target_id", "channel_id"}.

    \b
    Example:
      buzz messages delete --event 5c0f...e1
      buzz messages delete --event 5c0f...e1 --reason-code spam --public-reason "off topic"
    """

    async def body(ws: Workspace) -> dict[str, Any]:
        target_id = event_id_arg(event_id, "--event")
        target = await ws.get_event(target_id)
        channel_id = first_channel(target)
        own = target.pubkey == ws.pubkey
        if not own:
            author_profile = (await profiles(ws, [target.pubkey])).get(target.pubkey)
            own = author_profile is not None and owner_of(author_profile) == ws.pubkey
        if own:
            kind, tags = 5, ([["h", channel_id]] if channel_id else []) + [["e", target_id]]
        else:
            if channel_id is None:
                raise user_error(f"event {target_id} is not yours and not in a channel")
            kind, tags = 9005, [["h", channel_id], ["e", target_id]]
            for name, value in (
                ("action_id", action_id),
                ("reason_code", reason_code),
                ("public_reason", public_reason),
            ):
                if value is not None:
                    tags.append([name, value])
        event = ws.sign(kind, "", tags)
        await ws.publish(event)
        return {"event_id": event.id, "kind": kind, "target_id": target_id, "channel_id": channel_id}

    run(ctx, body)


@messages.command()
@click.option("--query", "query_text", required=True, help="Words to find (all must appear).")
@click.option("--channel", default=None, help="Only this channel.")
@click.option("--author", default=None, help="Only this author (hex or npub).")
@click.option(
    "--since", type=click.IntRange(min=0), default=None, help="Only messages at or after this unix time."
)
@click.option("--limit", type=click.IntRange(1, 100), default=20, show_default=True)
@click.pass_obj
def search(
    ctx: Context, query_text: str, channel: str | None, author: str | None, since: int | None, limit: int
) -> None:
    """Full-text search (NIP-50) over the messages you can read, best match first.

    Prints {"messages": [message, …]}.

    \b
    Example:
      buzz messages search --query "deploy friday" --channel 3f2b7c1e-8a4d-4e2f-9c1a-5b6d7e8f9a0b
    """

    async def body(ws: Workspace) -> dict[str, Any]:
        return await search_messages(ws, query_text, channel, author, since, limit)

    run(ctx, body)


async def search_messages(
    ws: Workspace,
    query_text: str,
    channel: str | None = None,
    author: str | None = None,
    since: int | None = None,
    limit: int = 20,
) -> dict[str, Any]:
    """NIP-50 search over readable kind 9 (relay.md §11): `messages search` and the MCP tool
    `search`. Returns {"messages": [message, …]}, best match first."""
    if not query_text.strip():
        raise user_error("--query is empty")
    flt: dict[str, Any] = {"kinds": [MESSAGE_KIND], "search": query_text, "limit": limit}
    channel_id = channel_arg(channel) if channel is not None else None
    if channel_id is not None:
        flt["#h"] = [channel_id]
    if author is not None:
        flt["authors"] = [pubkey_arg(author, "--author")]
    if since is not None:
        flt["since"] = since
    return {"messages": await _with_edits(ws, await ws.query([flt]), channel_id)}
