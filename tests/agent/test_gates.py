"""The pure gate chain (agents.md §3.4, §4.4–§4.6, §4.8, §4.9; §9.2 items 18–22)."""

from __future__ import annotations

import pytest

from buzz.agent.config import ConfigError
from buzz.agent.gates import (
    DEFAULT_WAKE_KINDS,
    Command,
    Decision,
    SeenIds,
    author_decision,
    build_rules,
    channel_filter,
    control_command,
    match_rule,
    parse_rules_toml,
)
from buzz.agent.sessions import Arrival, TurnEnd, arrival_action, drops_session
from buzz.core.event import Event
from buzz.core.keys import generate_secret_key, public_key

OWNER_SK, AGENT_SK, OTHER_SK = generate_secret_key(), generate_secret_key(), generate_secret_key()
OWNER, AGENT, OTHER = public_key(OWNER_SK), public_key(AGENT_SK), public_key(OTHER_SK)
C1 = "11111111-1111-4111-8111-111111111111"
C2 = "22222222-2222-4222-8222-222222222222"


def ev(secret: str, content: str = "hi", kind: int = 9, tags: list[list[str]] | None = None) -> Event:
    return Event.create(secret, kind, content, [["h", C1], *(tags or [])])


def test_only_a_p_tag_wakes_in_mentions_mode() -> None:
    rules = build_rules("mentions")
    assert match_rule(rules, C1, ev(OWNER_SK, tags=[["p", AGENT]]), AGENT) is not None
    assert match_rule(rules, C1, ev(OWNER_SK, "@Agent please"), AGENT) is None
    assert match_rule(rules, C1, ev(OWNER_SK, f"nostr:{AGENT}"), AGENT) is None
    assert match_rule(rules, C1, ev(OWNER_SK, tags=[["notify", "channel"]]), AGENT) is None
    assert match_rule(rules, C1, ev(OWNER_SK, tags=[["p", AGENT.upper()]]), AGENT) is None
    assert (
        match_rule(rules, C1, ev(OWNER_SK, kind=40003, tags=[["p", AGENT]]), AGENT) is None
    )  # edits never wake
    for kind in DEFAULT_WAKE_KINDS:
        assert match_rule(rules, C1, ev(OWNER_SK, kind=kind, tags=[["p", AGENT]]), AGENT) is not None


def test_rule_overrides_and_filters() -> None:
    rules = build_rules("mentions")
    assert channel_filter(rules, C1, AGENT, 100) == {
        "kinds": [9, 40007, 46010, 48106],  # 48106: voice guidelines always pass (issue 13 item 4)
        "#h": [C1],
        "#p": [AGENT],
        "since": 100,
    }
    everything = build_rules("all")
    assert channel_filter(everything, C1, AGENT, 5) == {"#h": [C1], "since": 5}
    assert match_rule(everything, C1, ev(OWNER_SK, kind=40003), AGENT) is not None
    kinds_only = build_rules("all", kinds=[9])
    assert channel_filter(kinds_only, C1, AGENT, 5) == {"kinds": [9, 48106], "#h": [C1], "since": 5}
    loose = build_rules("mentions", no_mention_filter=True)
    assert match_rule(loose, C1, ev(OWNER_SK), AGENT) is not None
    assert "#p" not in (channel_filter(loose, C1, AGENT, 1) or {})


def test_config_rules_first_match_and_channel_tables_first() -> None:
    text = f"""
[[rules]]
channels = "*"
kinds = [9]
prompt_tag = "any"

[channel."{C2}"]
kinds = [9, 40003]
require_mention = false
"""
    rules = parse_rules_toml(text)
    assert [r.prompt_tag for r in rules] == ["message", "any"]
    assert match_rule(rules, C2, ev(OWNER_SK), AGENT).prompt_tag == "message"  # type: ignore[union-attr]
    assert match_rule(rules, C1, ev(OWNER_SK), AGENT) is None
    assert match_rule(rules, C1, ev(OWNER_SK, tags=[["p", AGENT]]), AGENT).prompt_tag == "any"  # type: ignore[union-attr]
    assert channel_filter(rules, C2, AGENT, 1) == {"kinds": [9, 40003, 48106], "#h": [C2], "since": 1}
    for bad in ("[[rules]]\nchannels = ['x']", "[[rules]]\nkinds = 'nine'", "not toml =", ""):
        with pytest.raises(ConfigError):
            parse_rules_toml(bad)


def test_control_commands_only_from_the_owner_with_a_mention() -> None:
    tag = [["p", AGENT]]
    assert control_command(ev(OWNER_SK, "  !cancel\n", tags=tag), AGENT, OWNER) is Command.CANCEL
    assert control_command(ev(OWNER_SK, "!rotate", tags=tag), AGENT, OWNER) is Command.ROTATE
    assert control_command(ev(OWNER_SK, "!shutdown", tags=tag), AGENT, OWNER) is Command.SHUTDOWN
    assert control_command(ev(OWNER_SK, "!shutdown now", tags=tag), AGENT, OWNER) is None
    assert control_command(ev(OWNER_SK, "!cancel"), AGENT, OWNER) is None  # no p tag
    assert control_command(ev(OTHER_SK, "!cancel", tags=tag), AGENT, OWNER) is None  # not the owner
    assert control_command(ev(OWNER_SK, "!cancel", kind=40007, tags=tag), AGENT, OWNER) is None
    assert control_command(ev(OWNER_SK, "!cancel", tags=tag), AGENT, None) is None  # no owner known


@pytest.mark.parametrize(
    ("mode", "channel_type", "author", "expected"),
    [
        ("owner-only", "stream", OWNER, Decision.ADMIT),
        ("owner-only", "stream", OTHER, Decision.CHECK_SIBLING),
        ("allowlist", "stream", OTHER, Decision.ADMIT),
        ("anyone", "stream", OTHER, Decision.ADMIT),
        ("nobody", "stream", OWNER, Decision.DROP),
        ("anyone", "dm", OTHER, Decision.CHECK_SIBLING),  # DM rule: owner and siblings only
        ("anyone", "unknown", OTHER, Decision.CHECK_SIBLING),
        ("anyone", "dm", OWNER, Decision.ADMIT),
        ("allowlist", "dm", OTHER, Decision.CHECK_SIBLING),
        ("nobody", "dm", OWNER, Decision.DROP),
    ],
    # Keys are random per run: named by role so that every pytest-xdist worker collects the same ids.
    ids=lambda v: {OWNER: "owner", OTHER: "other"}.get(v) if isinstance(v, str) else None,
)
def test_author_gate_table(mode: str, channel_type: str, author: str, expected: Decision) -> None:
    assert (
        author_decision(mode, channel_type, author, AGENT, OWNER, [OTHER] if mode == "allowlist" else [])
        is expected
    )


def test_author_gate_without_an_owner_admits_nobody_in_owner_only() -> None:
    assert author_decision("owner-only", "stream", OWNER, AGENT, None) is Decision.DROP
    assert author_decision("anyone", "stream", OTHER, AGENT, None) is Decision.ADMIT
    assert author_decision("anyone", "dm", OTHER, AGENT, None) is Decision.DROP


def test_seen_ids_remember_at_least_ten_thousand() -> None:
    seen = SeenIds()
    assert seen.add("a") and not seen.add("a")
    for i in range(10_000):
        seen.add(f"x{i}")
    assert len(seen) == 10_000 and "a" not in seen and "x1" in seen


def test_arrival_policy_table() -> None:
    assert arrival_action("steer", OTHER, OWNER) is Arrival.STEER
    assert arrival_action("queue", OWNER, OWNER) is Arrival.QUEUE
    assert arrival_action("interrupt", OTHER, OWNER) is Arrival.INTERRUPT
    assert arrival_action("owner-interrupt", OWNER, OWNER) is Arrival.INTERRUPT
    assert arrival_action("owner-interrupt", OTHER, OWNER) is Arrival.QUEUE


def test_session_drop_rules() -> None:
    for end in (TurnEnd.OWNER_CANCEL, TurnEnd.OWNER_ROTATE, TurnEnd.FAILED):
        assert drops_session(end, 1, 0)
    for end in (TurnEnd.STEERED, TurnEnd.SUPERSEDED):
        assert not drops_session(end, 5, 1)
    assert not drops_session(TurnEnd.COMPLETED, 3, 0)
    assert drops_session(TurnEnd.COMPLETED, 3, 3) and not drops_session(TurnEnd.COMPLETED, 2, 3)
