"""Prompt text for ACP sessions and turns (agents.md §4.11, §4.12, §4.8), pure.

System prompt (one string, sections separated by one blank line, each starting with its
header line): `[Workspace]`, `[Base]`, `[System]` (if any), `[Team Instructions]` (if any),
then the core-memory section (if any), last (engram.md §13.5).

Per-turn prompt (one ACP text block per section): an optional bare slash command, `[Context]`,
the history block (thread replies and DMs only), then the event block. A steered re-prompt
(§4.8) adds `[Interrupted work]` (the batch that was in progress) and
`[New events during that work]` before the event block is replaced by the new events.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import orjson

from buzz.agent.base_prompt import BASE_PROMPT
from buzz.agent.event_view import mentioned, reply_anchor, thread_refs
from buzz.core import nip19
from buzz.core.event import Event

WORKSPACE_LAYOUT: tuple[tuple[str, str], ...] = (
    ("AGENTS.md", "notes on how you work here"),
    ("RESEARCH/", "findings and sources"),
    ("PLANS/", "plans for larger work"),
    ("GUIDES/", "how-tos you wrote for yourself"),
    ("WORK_LOGS/", "what you did and why"),
    ("OUTBOX/", "files prepared for others"),
    ("REPOS/", "checked-out repositories"),
    (".scratch/", "throw-away files"),
)


# End-to-end encrypted DMs (NIP-17) have no channel: the harness queues and keeps sessions per
# conversation under the key `nip17:<other pubkeys, sorted, comma-separated>` (decision 283).
PRIVATE_DM_TYPE = "private-dm"
PRIVATE_PREFIX = "nip17:"


def private_key_of(participants: Sequence[str]) -> str:
    """The queue/session key of the private conversation with these other people."""
    return PRIVATE_PREFIX + ",".join(sorted(participants))


def is_private(channel_id: str) -> bool:
    return channel_id.startswith(PRIVATE_PREFIX)


def private_participants(channel_id: str) -> list[str]:
    return channel_id[len(PRIVATE_PREFIX) :].split(",") if is_private(channel_id) else []


@dataclass(frozen=True, slots=True)
class ChannelInfo:
    """Channel metadata from its 39000: `type` is stream, forum, dm, workflow or unknown;
    `private-dm` for an end-to-end encrypted conversation (no channel: `PRIVATE_PREFIX`)."""

    id: str
    name: str
    type: str = "unknown"
    archived: bool = False


@dataclass(frozen=True, slots=True)
class Person:
    """What the harness knows about an author: display name (None if unknown) and whether its
    profile carries a valid NIP-OA `auth` tag (an agent)."""

    pubkey: str
    display_name: str | None = None
    is_agent: bool = False

    @property
    def label(self) -> str:
        return self.display_name or nip19.npub(self.pubkey)[:16] + "…"


@dataclass(frozen=True, slots=True)
class HistoryLine:
    """One history message: unix time, author, content (edits applied)."""

    created_at: int
    author: str
    content: str


def rfc3339(ts: int) -> str:
    """Unix seconds → `YYYY-MM-DDTHH:MM:SSZ` (UTC)."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- system prompt (§4.11) ---------------------------------------------------------------------
def workspace_section(cwd: str) -> str:
    lines = [
        "[Workspace]",
        f"Your working directory is {cwd}. Keep your own files there, in this layout:",
    ]
    lines += [f"- {name} — {what}" for name, what in WORKSPACE_LAYOUT]
    return "\n".join(lines)


def system_prompt_sections(
    cwd: str,
    base: str | None = None,
    system: str | None = None,
    team: str | None = None,
    memory_section: str | None = None,
) -> list[str]:
    """The §4.11 sections in order. `base` None = built-in text, `""` = omitted; empty
    `system` / `team` are omitted; `memory_section` (already rendered) comes last."""
    sections = [workspace_section(cwd)]
    base_text = BASE_PROMPT if base is None else base
    if base_text.strip():
        sections.append("[Base]\n" + base_text.strip("\n"))
    if system and system.strip():
        sections.append("[System]\n" + system.strip("\n"))
    if team and team.strip():
        sections.append("[Team Instructions]\n" + team.strip("\n"))
    if memory_section:
        sections.append(memory_section)
    return sections


def join_sections(sections: Sequence[str]) -> str:
    """Sections separated by one blank line."""
    return "\n\n".join(sections)


# -- per-turn prompt (§4.12) -------------------------------------------------------------------
def scope_of(channel: ChannelInfo, trigger: Event) -> str:
    if channel.type == PRIVATE_DM_TYPE:
        return "private dm (end-to-end encrypted)"
    if channel.type == "dm":
        return "dm"
    return "thread" if thread_refs(trigger).in_thread else "channel"


def context_section(channel: ChannelInfo, trigger: Event, any_human: bool) -> str:
    """`[Context]`: scope, channel, thread ids, the reply hint, and — when a human is among the
    authors — the reply anchor (thread root, else the triggering event)."""
    if channel.type == PRIVATE_DM_TYPE:
        return private_context_section(channel, trigger)
    refs = thread_refs(trigger)
    lines = ["[Context]", f"Scope: {scope_of(channel, trigger)}", f"Channel: {channel.name} (#{channel.id})"]
    if refs.in_thread:
        lines += [f"Thread root: {refs.root}", f"Parent: {refs.parent}"]
    if any_human:
        anchor = reply_anchor(trigger)
        lines.append(f'Reply: buzz messages send --channel {channel.id} --reply-to {anchor} --content "…"')
        lines.append(f"A human is waiting: reply in this channel with --reply-to {anchor}.")
    else:
        lines.append(
            f'Reply: buzz messages send --channel {channel.id} [--reply-to <event id>] --content "…"'
        )
    return "\n".join(lines)


def private_context_section(channel: ChannelInfo, trigger: Event) -> str:
    """`[Context]` of an end-to-end encrypted DM: who it is with and the one way to answer —
    privately, never in a channel (the relay cannot read it, and nobody else may)."""
    people = private_participants(channel.id)
    flags = " ".join(f"--pubkey {pk}" for pk in people)
    return "\n".join(
        [
            "[Context]",
            f"Scope: {scope_of(channel, trigger)}",
            "With: " + ", ".join(f"{nip19.npub(pk)} ({pk})" for pk in people),
            f'Reply privately: buzz dms send --private {flags} --reply-to {trigger.id} --content "…"',
            "This conversation is end-to-end encrypted: answer only with that command, never in a "
            "channel, and do not repeat its content elsewhere.",
        ]
    )


def history_section(lines: Sequence[HistoryLine], total: int, people: Mapping[str, Person], what: str) -> str:
    """`[History]` with at most the given lines, oldest first; `total` = messages available."""
    out = [f"[History — {what}: {len(lines)} of {total} messages shown, oldest first]"]
    for line in lines:
        who = people.get(line.author, Person(line.author)).label
        out.append(f"{rfc3339(line.created_at)} {who}: {line.content}")
    return "\n".join(out)


# Event id → its `Attachment:` lines (media.md §14.1 item 3; `buzz.agent.attachments`).
Attached = Mapping[str, Sequence[str]]


def _event_lines(
    event: Event, channel: ChannelInfo, people: Mapping[str, Person], attached: Attached | None = None
) -> list[str]:
    who = people.get(event.pubkey, Person(event.pubkey))
    refs = thread_refs(event)
    tags = orjson.dumps([list(t) for t in event.tags]).decode()
    parsed = orjson.dumps({"parent": refs.parent, "root": refs.root, "mentions": mentioned(event)}).decode()
    return [
        f"Event ID: {event.id}",
        f"Channel: {channel.name} ({channel.id})",
        f"Kind: {event.kind}",
        f"From: {who.display_name or '(no name)'} ({nip19.npub(event.pubkey)}, {event.pubkey})",
        f"Time: {rfc3339(event.created_at)}",
        "Content:",
        event.content,
        f"Tags: {tags}",
        f"Parsed: {parsed}",
        *((attached or {}).get(event.id, ())),
    ]


def event_block(
    events: Sequence[Event],
    channel: ChannelInfo,
    people: Mapping[str, Person],
    prompt_tag: str,
    header: str | None = None,
    attached: Attached | None = None,
) -> str:
    """`[Buzz event: <tag>]` for one event, `[Buzz events — N events]` with numbered
    sub-blocks for several (§4.12 step 3). `header` replaces the first line when given;
    `attached` adds each event's `Attachment:` lines."""
    if len(events) == 1:
        lines = [header or f"[Buzz event: {prompt_tag}]", *_event_lines(events[0], channel, people, attached)]
        return "\n".join(lines)
    lines = [header or f"[Buzz events — {len(events)} events]"]
    for i, event in enumerate(events, start=1):
        lines.append(f"--- event {i} of {len(events)} ---")
        lines.extend(_event_lines(event, channel, people, attached))
    return "\n".join(lines)


def steer_sections(
    interrupted: Sequence[Event],
    arrived: Sequence[Event],
    channel: ChannelInfo,
    people: Mapping[str, Person],
    attached: Attached | None = None,
) -> list[str]:
    """The two extra sections of a steered re-prompt (§4.8 `steer`): the interrupted batch as
    work in progress, and the new events as having arrived during that work."""
    wip = event_block(
        interrupted,
        channel,
        people,
        "",
        header=(
            "[Interrupted work — in progress]\nYou were working on the event(s) below when new "
            "events arrived; your turn was interrupted. Continue this work, taking the new events "
            "into account."
        ),
        attached=attached,
    )
    new = event_block(
        arrived,
        channel,
        people,
        "",
        header=(
            f"[New events during that work — {len(arrived)} event{'s' if len(arrived) != 1 else ''}]\n"
            "These arrived while you were working on the interrupted work above."
        ),
        attached=attached,
    )
    return [wip, new]


def strip_leading_mention(content: str, agent_pubkey: str, agent_names: Sequence[str] = ()) -> str:
    """`content` without a leading mention of the agent (`nostr:npub…`, `@npub…`, `@<name>`)."""
    text = content.lstrip()
    npub = nip19.npub(agent_pubkey)
    for prefix in (f"nostr:{npub}", f"@{npub}", *(f"@{n}" for n in agent_names if n)):
        if text.startswith(prefix):
            return text[len(prefix) :].lstrip(" \t:,")
    return text


def slash_command(events: Sequence[Event], agent_pubkey: str, agent_names: Sequence[str] = ()) -> str | None:
    """The bare slash command of a one-event batch (§4.12, last paragraph), or None."""
    if len(events) != 1:
        return None
    text = strip_leading_mention(events[0].content, agent_pubkey, agent_names).strip()
    return text if text.startswith("/") else None


VOICE_RULES = (
    "This channel is a live voice huddle: your reply is read aloud and the messages you get are "
    "speech transcripts (expect recognition errors). Answer briefly in plain spoken sentences: no "
    "markdown, no code blocks, no URLs; post code or links only when asked, and say so briefly."
)


def voice_section(posted: str) -> str:
    """`[Voice]`: our own rules for voice replies, then the huddle's 48106 text, quoted as channel
    content (it comes from a participant, so it cannot override the owner or the system prompt)."""
    quoted = "\n".join(f"> {line}" for line in posted.strip().splitlines()) or "> (empty)"
    return f"[Voice]\n{VOICE_RULES}\nThe huddle's voice guidelines (kind 48106):\n{quoted}"


def turn_blocks(
    events: Sequence[Event],
    channel: ChannelInfo,
    people: Mapping[str, Person],
    prompt_tag: str,
    agent_pubkey: str,
    history: str | None = None,
    interrupted: Sequence[Event] = (),
    agent_names: Sequence[str] = (),
    voice: str | None = None,
    attached: Attached | None = None,
) -> list[str]:
    """All text blocks of one turn (§4.12), steering sections included when `interrupted`;
    a `[Voice]` section after `[Context]` when the channel is a voice huddle (`voice` = its 48106);
    `attached` gives events their `Attachment:` lines."""
    trigger = events[-1]
    any_human = any(not people.get(e.pubkey, Person(e.pubkey)).is_agent for e in (*interrupted, *events))
    blocks: list[str] = []
    command = None if interrupted else slash_command(events, agent_pubkey, agent_names)
    if command is not None:
        blocks.append(command)
    blocks.append(context_section(channel, trigger, any_human))
    if voice is not None:
        blocks.append(voice_section(voice))
    if history:
        blocks.append(history)
    if interrupted:
        blocks.extend(steer_sections(interrupted, events, channel, people, attached))
    else:
        blocks.append(event_block(events, channel, people, prompt_tag, attached=attached))
    return blocks
