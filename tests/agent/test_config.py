"""`buzz agent run` configuration (agents.md §4.16, §4.2 items 1–2; §9.2 item 34)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from buzz.agent.config import FLAG_BY_NAME, FLAGS, RESPOND_TO_MODES, ConfigError, load_config, parse_bool
from buzz.agent.identity import resolve_identity
from buzz.cli.main import cli
from buzz.core.keys import generate_secret_key, public_key
from buzz.core.nip_oa import build_auth_tag

# agents.md §4.16, transcribed: (flag, environment variable, default).
SPEC_TABLE = [
    ("--private-key", "BUZZ_PRIVATE_KEY", None),
    ("--relay", "BUZZ_RELAY_URL", "ws://localhost:3000"),
    ("--auth-tag", "BUZZ_AUTH_TAG", None),
    ("--agent-owner", "BUZZ_ACP_AGENT_OWNER", None),
    ("--agent-command", "BUZZ_ACP_AGENT_COMMAND", "goose"),
    ("--agent-args", "BUZZ_ACP_AGENT_ARGS", ("acp",)),
    ("--mcp-command", "BUZZ_ACP_MCP_COMMAND", ""),
    ("--agents", "BUZZ_ACP_AGENTS", 1),
    ("--lazy-pool", "BUZZ_ACP_LAZY_POOL", False),
    ("--idle-timeout", "BUZZ_ACP_IDLE_TIMEOUT", 900),
    ("--max-turn-duration", "BUZZ_ACP_MAX_TURN_DURATION", 7200),
    ("--system-prompt", "BUZZ_ACP_SYSTEM_PROMPT", None),
    ("--system-prompt-file", "BUZZ_ACP_SYSTEM_PROMPT_FILE", None),
    ("--base-prompt-file", "BUZZ_ACP_BASE_PROMPT_FILE", None),
    ("--no-base-prompt", "BUZZ_ACP_NO_BASE_PROMPT", False),
    ("--team-instructions", "BUZZ_ACP_TEAM_INSTRUCTIONS", None),
    ("--system-prompt-transport", "BUZZ_ACP_SYSTEM_PROMPT_TRANSPORT", "auto"),
    ("--initial-message", "BUZZ_ACP_INITIAL_MESSAGE", None),
    ("--heartbeat-interval", "BUZZ_ACP_HEARTBEAT_INTERVAL", 0),
    ("--heartbeat-prompt", "BUZZ_ACP_HEARTBEAT_PROMPT", None),
    ("--heartbeat-prompt-file", "BUZZ_ACP_HEARTBEAT_PROMPT_FILE", None),
    ("--subscribe", "BUZZ_ACP_SUBSCRIBE", "mentions"),
    ("--kinds", "BUZZ_ACP_KINDS", None),
    ("--channels", "BUZZ_ACP_CHANNELS", None),
    ("--no-mention-filter", "BUZZ_ACP_NO_MENTION_FILTER", False),
    ("--config", "BUZZ_ACP_CONFIG", "./buzz-acp.toml"),
    ("--multiple-event-handling", "BUZZ_ACP_MULTIPLE_EVENT_HANDLING", "steer"),
    ("--no-ignore-self", "BUZZ_ACP_NO_IGNORE_SELF", False),
    ("--context-message-limit", "BUZZ_ACP_CONTEXT_MESSAGE_LIMIT", 12),
    ("--max-turns-per-session", "BUZZ_ACP_MAX_TURNS_PER_SESSION", 0),
    ("--no-presence", "BUZZ_ACP_NO_PRESENCE", False),
    ("--no-typing", "BUZZ_ACP_NO_TYPING", False),
    ("--memory", "BUZZ_ACP_MEMORY", True),
    ("--no-memory", "BUZZ_ACP_NO_MEMORY", False),
    ("--no-turn-metrics", "BUZZ_ACP_NO_TURN_METRICS", False),
    ("--model", "BUZZ_ACP_MODEL", None),
    ("--effort-level", "BUZZ_ACP_EFFORT_LEVEL", None),
    ("--session-title", "BUZZ_ACP_SESSION_TITLE", None),
    ("--permission-mode", "BUZZ_ACP_PERMISSION_MODE", "bypass-permissions"),
    ("--respond-to", "BUZZ_ACP_RESPOND_TO", "owner-only"),
    ("--respond-to-allowlist", "BUZZ_ACP_RESPOND_TO_ALLOWLIST", ()),
    ("--allowed-respond-to", "BUZZ_ACP_ALLOWED_RESPOND_TO", RESPOND_TO_MODES),
    ("--relay-observer", "BUZZ_ACP_RELAY_OBSERVER", False),
    ("--exit-after-inactivity", "BUZZ_ACP_EXIT_AFTER_INACTIVITY", 0),
    ("--event-buffer", "BUZZ_ACP_EVENT_BUFFER", 256),
    # issue 14 (docs/decisions.md): catch-up window, steer limit, retry schedule
    ("--catch-up", "BUZZ_ACP_CATCH_UP", 600),
    ("--claim-lease", "BUZZ_ACP_CLAIM_LEASE", 30),
    ("--steer-limit", "BUZZ_ACP_STEER_LIMIT", 2),
    ("--max-attempts", "BUZZ_ACP_MAX_ATTEMPTS", 10),
    ("--no-managed-policy", "BUZZ_ACP_NO_MANAGED_POLICY", False),  # jobs spec §6.8
    ("--max-agents", "BUZZ_ACP_MAX_AGENTS", 32),
    ("--persona", "BUZZ_ACP_PERSONA", None),
    ("--no-jobs", "BUZZ_ACP_NO_JOBS", False),
    ("--job-progress-interval", "BUZZ_ACP_JOB_PROGRESS_INTERVAL", 5.0),  # issue 27: pace of 43003
    ("--retry-backoff", "BUZZ_ACP_RETRY_BACKOFF", 5.0),
    ("--no-work-status", "BUZZ_ACP_NO_WORK_STATUS", False),  # jobs spec §12.3
]


def test_every_flag_has_its_environment_variable_and_default() -> None:
    assert [(f.option, f.env, f.default) for f in FLAGS] == SPEC_TABLE
    defaults = load_config({}, env={})
    for flag in FLAGS:
        assert getattr(defaults, flag.name) == flag.default
    assert defaults.memory_enabled is True


def test_the_command_offers_every_flag() -> None:
    result = CliRunner().invoke(cli, ["agent", "run", "--help"])
    assert result.exit_code == 0
    for option, env, _ in SPEC_TABLE:
        assert option in result.output and env in result.output


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", False),
        ("0", False),
        ("false", False),
        ("No", False),
        ("OFF", False),
        ("1", True),
        ("yes", True),
        ("maybe", True),
    ],
)
def test_boolean_environment_rule(value: str, expected: bool) -> None:
    assert parse_bool(value) is expected
    assert load_config({}, env={"BUZZ_ACP_NO_TYPING": value}).no_typing is expected


def test_flag_beats_environment_beats_default() -> None:
    env = {"BUZZ_ACP_AGENTS": "4", "BUZZ_ACP_SUBSCRIBE": "all", "BUZZ_ACP_KINDS": "9, 40007"}
    cfg = load_config({"agents": "2"}, env=env)
    assert (cfg.agents, cfg.subscribe, cfg.kinds) == (2, "all", (9, 40007))
    assert (cfg.sources["agents"], cfg.sources["subscribe"], cfg.sources["idle_timeout"]) == (
        "flag",
        "env",
        "default",
    )
    assert load_config({}, env={"BUZZ_ACP_TURN_TIMEOUT": "60"}).idle_timeout == 60  # legacy alias
    legacy = load_config({}, env={"BUZZ_ACP_PRIVATE_KEY": "ab" * 32})
    assert legacy.private_key == "ab" * 32 and "ab" * 32 not in repr(legacy)  # never shown
    assert load_config({}, env={"BUZZ_ACP_AGENT_ARGS": "run,--fast"}).agent_args == ("run", "--fast")


def test_memory_switch() -> None:
    assert load_config({}, env={"BUZZ_ACP_NO_MEMORY": "true"}).memory_enabled is False
    assert load_config({"no_memory": True}, env={}).memory_enabled is False
    assert load_config({}, env={"BUZZ_ACP_MEMORY": "off"}).memory_enabled is False
    with pytest.raises(ConfigError, match="mutually exclusive"):
        load_config({"memory": True, "no_memory": True}, env={})


def test_an_unbounded_range_reads_plainly() -> None:
    with pytest.raises(ConfigError) as info:
        load_config({"catch_up": "-1"}, env={})
    assert "must be ≥ 0, got -1" in str(info.value) and "in ≥" not in str(info.value)


@pytest.mark.parametrize(
    ("given", "env", "message"),
    [
        ({"agents": "0"}, {}, "--agents"),
        ({}, {"BUZZ_ACP_AGENTS": "33"}, "BUZZ_ACP_AGENTS"),
        ({"max_turn_duration": "604801"}, {}, "--max-turn-duration"),
        ({"heartbeat_interval": "5"}, {}, "heartbeat"),
        ({"context_message_limit": "101"}, {}, "--context-message-limit"),
        ({"subscribe": "some"}, {}, "--subscribe"),
        ({"multiple_event_handling": "later"}, {}, "--multiple-event-handling"),
        ({"respond_to": "allowlist"}, {}, "--respond-to-allowlist"),
        ({"respond_to": "anyone", "allowed_respond_to": "owner-only,nobody"}, {}, "not permitted"),
        ({"system_prompt": "a", "system_prompt_file": "/x"}, {}, "mutually exclusive"),
        ({"heartbeat_prompt": "a"}, {"BUZZ_ACP_HEARTBEAT_PROMPT_FILE": "/x"}, "mutually exclusive"),
        ({"kinds": "9,x"}, {}, "kinds"),
        ({"channels": "general"}, {}, "UUID"),
        ({"relay": "ftp://x"}, {}, "relay"),
        ({"system_prompt_file": "/nonexistent/prompt"}, {}, "cannot read"),
        ({"permission_mode": "yolo"}, {}, "--permission-mode"),
    ],
)
def test_invalid_configuration_exits_1(given: dict, env: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        load_config(given, env=env)
    assert info.value.exit_code == 1


def test_files_and_base_prompt(tmp_path: Path) -> None:
    (tmp_path / "p.txt").write_text("persona")
    (tmp_path / "b.txt").write_text("my base")
    cfg = load_config(
        {"system_prompt_file": str(tmp_path / "p.txt"), "base_prompt_file": str(tmp_path / "b.txt")}, env={}
    )
    assert (cfg.system_prompt, cfg.base_prompt) == ("persona", "my base")
    assert load_config({"no_base_prompt": True}, env={}).base_prompt == ""
    assert load_config({}, env={"BUZZ_RELAY_URL": "https://relay.example"}).ws_url == "wss://relay.example"


def test_owner_resolution() -> None:
    owner, agent = generate_secret_key(), generate_secret_key()
    tag = build_auth_tag(owner, public_key(agent))
    shorthand = f"[auth,{tag[1]},,{tag[3]}]"
    for value in (json.dumps(tag), shorthand):
        ident = resolve_identity(load_config({"private_key": agent, "auth_tag": value}, env={}))
        assert (ident.pubkey, ident.owner, ident.auth_tag) == (public_key(agent), public_key(owner), tag)
        assert agent not in repr(ident)
    no_tag = resolve_identity(load_config({"private_key": agent, "agent_owner": public_key(owner)}, env={}))
    assert (no_tag.owner, no_tag.auth_tag) == (public_key(owner), None)
    assert resolve_identity(load_config({"private_key": agent}, env={})).owner is None
    with pytest.raises(ConfigError) as info:  # both set and different
        resolve_identity(
            load_config(
                {"private_key": agent, "auth_tag": json.dumps(tag), "agent_owner": public_key(agent)}, env={}
            )
        )
    assert info.value.exit_code == 1
    other = generate_secret_key()  # a tag issued for another agent key
    # the message names what was used: the flag, or the variable (issue 24 item 8)
    with pytest.raises(ConfigError, match=r"^invalid --auth-tag: ") as info:
        resolve_identity(load_config({"private_key": other, "auth_tag": json.dumps(tag)}, env={}))
    assert info.value.exit_code == 3
    with pytest.raises(ConfigError, match=r"^invalid BUZZ_AUTH_TAG: ") as info:
        resolve_identity(load_config({"private_key": other}, env={"BUZZ_AUTH_TAG": json.dumps(tag)}))
    assert info.value.exit_code == 3
    for bad_key in (None, "nsec1nope", "zz"):
        with pytest.raises(ConfigError) as info:
            resolve_identity(load_config({"private_key": bad_key}, env={}))
        assert info.value.exit_code == 3


def test_cli_exit_codes() -> None:
    runner = CliRunner()
    result = runner.invoke(cli, ["agent", "run", "--agents", "99"], env={"BUZZ_PRIVATE_KEY": "ab" * 32})
    assert result.exit_code == 1
    assert json.loads(result.stderr.strip())["error"] == "user_error"
    result = runner.invoke(cli, ["agent", "run"], env={"BUZZ_PRIVATE_KEY": "", "BUZZ_ACP_PRIVATE_KEY": ""})
    assert result.exit_code == 3
    assert json.loads(result.stderr.strip())["error"] == "auth_error"


def test_flag_table_names_are_unique() -> None:
    assert len(FLAG_BY_NAME) == len(FLAGS)
    assert len({f.env for f in FLAGS}) == len(FLAGS)
