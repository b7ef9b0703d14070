"""`buzz messages`: send, get, thread, edit, delete, search, watch (agents.md §2.2, §2.3, §3): a thin
shell over `buzz.client.messages` (kinds 9, 40003, 5 / 9005; message objects are
`buzz.client.models.Message`)."""

from __future__ import annotations

import click

from buzz.cli.common import keyed, run, stdin_or, stream
from buzz.cli.groups import CommandGroup
from buzz.cli.output import Context, fail
from buzz.client.messages import MAX_THREAD_FETCH, parse_kinds
from buzz.client.values import channel_arg


@click.group(cls=CommandGroup)
def messages() -> None:
    """Channel messages: send, read, thread, edit, delete, search.

    \b
    Example:
      buzz messages send --channel 3f2b7c1e-8a4d-4e2f-9c1a-5b6d7e8f9a0b --content "hello"
      buzz messages get --channel 3f2b7c1e-8a4d-4e2f-9c1a-5b6d7e8f9a0b --limit 20
    """


@messages.command()
@click.option("--channel", required=True, help="Channel id (UUID).")
@click.option(
    "--content",
    default=None,
    help="Message text, or - to read stdin (its one final newline dropped); optional with --file.",
)
@click.option("--reply-to", "reply_to", default=None, help="Parent event id (makes a thread reply).")
@click.option("--mention", "mentions", multiple=True, help="Pubkey to mention (hex or npub); repeatable.")
@click.option("--broadcast", is_flag=True, help="Also show a thread reply on the channel timeline.")
@click.option("--file", "files", multiple=True, help="A file to attach (uploaded first); repeatable, 1-10.")
@click.pass_obj
def send(
    ctx: Context,
    channel: str,
    content: str | None,
    reply_to: str | None,
    mentions: tuple[str, ...],
    broadcast: bool,
    files: tuple[str, ...],
) -> None:
    """Send a message (kind 9) to a channel, optionally as a thread reply, with files attached.

    `@Name` in the text is resolved against the members' display names. Each --file is
    uploaded to the relay and attached (a URL line and an imeta tag); a refused file sends
    nothing. Prints {"event_id", "channel_id", "created_at", "reply_to", "root",
    "mention_pubkeys"}, plus "files": [{"url", "sha256", "size", "type", "name"}] with --file.

    \b
    Example:
      buzz messages send --channel 3f2b7c1e-8a4d-4e2f-9c1a-5b6d7e8f9a0b --content "ship it?" --mention npub1...
      echo "long text" | buzz messages send --channel 3f2b7c1e-8a4d-4e2f-9c1a-5b6d7e8f9a0b --content -
      buzz messages send --channel 3f2b7c1e-8a4d-4e2f-9c1a-5b6d7e8f9a0b --content "logs" --file run.log --file shot.png
    """
    if content is None and not files:
        fail("give --content (or --file to send only files)")
    text = stdin_or(content) if content is not None else ""
    run(ctx, lambda ws: ws.messages.send(channel, text, reply_to, mentions, broadcast, files))


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
    run(
        ctx,
        lambda ws: keyed(
            "messages", ws.messages.get(channel_arg(channel), limit, before, since, parse_kinds(kinds))
        ),
    )


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
    run(ctx, lambda ws: ws.messages.thread(channel, event_id, limit, depth_limit))


@messages.command()
@click.option("--event", "event_id", required=True, help="The message to edit.")
@click.option(
    "--content",
    required=True,
    help="The full replacement text, or - to read stdin (its one final newline dropped).",
)
@click.pass_obj
def edit(ctx: Context, event_id: str, content: str) -> None:
    """Edit one of your messages (kind 40003; readers show the newest edit).

    Prints {"event_id", "channel_id", "target_id"}.

    \b
    Example:
      buzz messages edit --event 5c0f...e1 --content "fixed typo"
    """
    run(ctx, lambda ws: ws.messages.edit(event_id, stdin_or(content)))


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
    run(ctx, lambda ws: ws.messages.delete(event_id, reason_code, public_reason, action_id))


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
    run(ctx, lambda ws: keyed("messages", ws.messages.search(query_text, channel, author, since, limit)))


@messages.command()
@click.option("--channel", required=True, help="Channel id (UUID).")
@click.option(
    "--since",
    type=click.IntRange(min=0),
    default=None,
    help="Also messages from this unix time (default: now).",
)
@click.pass_obj
def watch(ctx: Context, channel: str, since: int | None) -> None:
    """Stream a channel's new messages until Ctrl-C: one compact JSON message per line.

    A lost connection (the relay restarting) is waited for: it reconnects (1 s, then up to 5 s
    apart) and resumes where it was, messages sent meanwhile included; a line on stderr says
    so. Exits 0 on Ctrl-C / SIGTERM; 3 without access to the channel (or when it is taken
    away), 1 for a channel that does not exist, 2 when the relay cannot be reached at start.

    \b
    Example:
      buzz messages watch --channel 3f2b7c1e-8a4d-4e2f-9c1a-5b6d7e8f9a0b | jq -r .content
    """
    stream(ctx, lambda ws: ws.messages.watch(channel, since, notify=note))


def note(text: str) -> None:
    """A progress line on stderr (agents.md §2.1 item 1: stdout carries only the messages)."""
    click.echo(f"buzz messages watch: {text}", err=True)
