"""System prompt and per-turn prompt text (agents.md §4.8, §4.11, §4.12; §9.2 items 27–29)."""

from __future__ import annotations

import json

from buzz.agent.base_prompt import BASE_PROMPT
from buzz.agent.prompts import (
    ChannelInfo,
    HistoryLine,
    Person,
    context_section,
    event_block,
    history_section,
    join_sections,
    slash_command,
    system_prompt_sections,
    turn_blocks,
)
from buzz.agent.session_factory import resolve_transport
from buzz.core import nip19
from buzz.core.event import Event
from buzz.core.keys import generate_secret_key, public_key

HUMAN_SK, AGENT_SK, BOT_SK = generate_secret_key(), generate_secret_key(), generate_secret_key()
HUMAN, AGENT, BOT = public_key(HUMAN_SK), public_key(AGENT_SK), public_key(BOT_SK)
C = "11111111-1111-4111-8111-111111111111"
CHANNEL = ChannelInfo(C, "general", "stream")
PEOPLE = {HUMAN: Person(HUMAN, "Olivia"), BOT: Person(BOT, "Helper", is_agent=True)}


def msg(secret: str, content: str, tags: list[list[str]] | None = None) -> Event:
    return Event.create(secret, 9, content, [["h", C], *(tags or [])], created_at=1_700_000_000)


def test_system_prompt_sections_in_order() -> None:
    sections = system_prompt_sections(
        "/work/agent", None, "Be kind.", "Ship daily.", "<core-memory>\nme\n</core-memory>"
    )
    assert [s.split("\n", 1)[0] for s in sections] == [
        "[Workspace]",
        "[Base]",
        "[System]",
        "[Team Instructions]",
        "<core-memory>",
    ]
    assert "/work/agent" in sections[0]
    for entry in (
        "AGENTS.md",
        "RESEARCH/",
        "PLANS/",
        "GUIDES/",
        "WORK_LOGS/",
        "OUTBOX/",
        "REPOS/",
        ".scratch/",
    ):
        assert entry in sections[0]
    text = join_sections(sections)
    assert "\n\n[Base]\n" in text and text.endswith("\n\n<core-memory>\nme\n</core-memory>")
    assert [s.split("\n", 1)[0] for s in system_prompt_sections("/w", "", None, "  ", None)] == [
        "[Workspace]"
    ]
    assert system_prompt_sections("/w", "Custom base")[1] == "[Base]\nCustom base"


def test_base_prompt_covers_the_required_points() -> None:
    text = " ".join(BASE_PROMPT.split())
    for needle in (
        "one session per channel",  # (a)
        "BUZZ_PRIVATE_KEY",  # (b) identity variables
        "exit code",  # (b)
        "--content -",  # (b) stdin
        "--reply-to",  # (c)
        "--mention <pubkey>",  # (d)
        "exact display name",  # (d)
        "only acknowledges",  # (e)
        "resume silently",  # (e)
        "buzz mem set",  # (f)
        "buzz mem patch <slug> --base-hash",  # (f)
        "65 535 bytes",  # (f)
        "[[mem/<name>]]",  # (f)
        "untrusted",  # (g)
    ):
        assert needle in text, needle


def test_context_names_the_anchor_for_humans() -> None:
    top = msg(HUMAN_SK, "hello", [["p", AGENT]])
    text = context_section(CHANNEL, top, any_human=True)
    assert text.splitlines()[:3] == ["[Context]", "Scope: channel", f"Channel: general (#{C})"]
    assert f"--reply-to {top.id}" in text and "A human is waiting" in text
    reply = msg(HUMAN_SK, "in thread", [["e", "a" * 64, "", "root"], ["e", "b" * 64, "", "reply"]])
    thread = context_section(CHANNEL, reply, any_human=True)
    assert (
        "Scope: thread" in thread and f"Thread root: {'a' * 64}" in thread and f"Parent: {'b' * 64}" in thread
    )
    assert f"--reply-to {'a' * 64}" in thread  # the thread root is the anchor
    agents_only = context_section(CHANNEL, reply, any_human=False)
    assert "A human is waiting" not in agents_only and "a" * 64 not in agents_only.split("Reply:")[1]
    assert "Scope: dm" in context_section(ChannelInfo(C, "dm", "dm"), top, True)


def test_event_block_fields() -> None:
    event = msg(HUMAN_SK, "line one\nline two", [["p", AGENT]])
    block = event_block([event], CHANNEL, PEOPLE, "@mention")
    lines = block.splitlines()
    assert lines[0] == "[Buzz event: @mention]"
    assert f"Event ID: {event.id}" in lines and f"Channel: general ({C})" in lines and "Kind: 9" in lines
    assert f"From: Olivia ({nip19.npub(HUMAN)}, {HUMAN})" in lines
    assert "Time: 2023-11-14T22:13:20Z" in lines
    assert "Content:\nline one\nline two\nTags: " in block
    tags = next(line for line in lines if line.startswith("Tags: "))
    assert json.loads(tags[len("Tags: ") :]) == [list(t) for t in event.tags]
    parsed = json.loads(next(line for line in lines if line.startswith("Parsed: "))[len("Parsed: ") :])
    assert parsed == {"parent": None, "root": None, "mentions": [AGENT]}
    several = event_block([event, msg(BOT_SK, "two")], CHANNEL, PEOPLE, "@mention")
    assert several.startswith("[Buzz events — 2 events]\n--- event 1 of 2 ---")


def test_turn_blocks_with_history_steering_and_slash_commands() -> None:
    first = msg(HUMAN_SK, "sleep 5", [["p", AGENT]])
    second = msg(HUMAN_SK, "ping", [["p", AGENT]])
    history = history_section([HistoryLine(1_700_000_000, HUMAN, "earlier")], 7, PEOPLE, "this thread")
    assert history.splitlines() == [
        "[History — this thread: 1 of 7 messages shown, oldest first]",
        "2023-11-14T22:13:20Z Olivia: earlier",
    ]
    blocks = turn_blocks([second], CHANNEL, PEOPLE, "@mention", AGENT, history=history)
    assert [b.split("\n", 1)[0] for b in blocks] == [
        "[Context]",
        history.splitlines()[0],
        "[Buzz event: @mention]",
    ]
    steered = turn_blocks([second], CHANNEL, PEOPLE, "@mention", AGENT, interrupted=[first])
    heads = [b.split("\n", 1)[0] for b in steered]
    assert (
        heads[0] == "[Context]"
        and heads[1].startswith("[Interrupted work")
        and heads[2].startswith("[New events during that work")
    )
    assert first.id in steered[1] and second.id in steered[2] and first.id not in steered[2]
    slash = msg(HUMAN_SK, f"nostr:{nip19.npub(AGENT)} /compact now", [["p", AGENT]])
    assert slash_command([slash], AGENT) == "/compact now"
    assert slash_command([msg(HUMAN_SK, "@Rulesbot /help")], AGENT, ["Rulesbot"]) == "/help"
    assert slash_command([msg(HUMAN_SK, "no command")], AGENT) is None
    assert turn_blocks([slash], CHANNEL, PEOPLE, "@mention", AGENT)[0] == "/compact now"


def test_transport_auto_rule() -> None:
    assert resolve_transport("auto", "/usr/bin/claude-code-acp", 1) == "claude-meta"
    assert resolve_transport("auto", "goose", 2) == "field"
    assert resolve_transport("auto", "goose", 1) == "user"
    assert resolve_transport("user", "claude", 5) == "user"
