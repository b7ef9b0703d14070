"""`buzz agent run` configuration: every flag of agents.md §4.16 as one table, then validation.

Each `Flag` row names the attribute, the command-line option, its environment variable, the
typed default and the parser for text values. `load_config` resolves flag > environment >
default for every row, then runs the cross-field checks of §4.2 item 1 and §4.16. Failures are
`ConfigError`s carrying the exit code of agents.md §2.1: 1 for invalid configuration, 3 for a
missing or invalid key or `BUZZ_AUTH_TAG` (§4.2 item 2).

Booleans read from the environment are false when set to `""`, `0`, `false`, `no` or `off`
(case-insensitive) and true for any other value; an unset variable leaves the default.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from buzz.client.session import websocket_url
from buzz.core.channel_id import is_channel_id
from buzz.core.keys import is_hex
from buzz.core.nip98 import http_base

EXIT_CONFIG = 1
EXIT_AUTH = 3

SUBSCRIBE_MODES = ("mentions", "all", "config")
EVENT_HANDLING_MODES = ("steer", "queue", "interrupt", "owner-interrupt")
RESPOND_TO_MODES = ("owner-only", "allowlist", "members", "anyone", "nobody")
PERMISSION_MODES = ("default", "auto", "accept-edits", "bypass-permissions", "dont-ask", "plan")
PROMPT_TRANSPORTS = ("auto", "field", "claude-meta", "user")

MAX_AGENTS = 32
MAX_TURN_DURATION_S = 604_800
MIN_HEARTBEAT_S = 10
MAX_CONTEXT_MESSAGES = 100
MAX_ATTEMPTS_LIMIT = 100
_FALSE_WORDS = frozenset({"", "0", "false", "no", "off"})


class ConfigError(ValueError):
    """An unusable configuration value; `exit_code` is 1 (config) or 3 (key / auth tag);
    `category` the CLI error category when it is not implied by the code (`key_error`)."""

    def __init__(self, message: str, exit_code: int = EXIT_CONFIG, category: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code
        self.category = category


# -- value parsers (text → typed value; raise ConfigError) -------------------------------------
def parse_bool(text: str) -> bool:
    """The §4.16 boolean rule: false for "", 0, false, no, off (any case), true otherwise."""
    return text.strip().lower() not in _FALSE_WORDS


def _text(text: str) -> str:
    return text


def _int_in(low: int, high: int | None) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise ConfigError(f"expected an integer, got {text!r}") from None
        if value < low or (high is not None and value > high):
            bound = f"in {low}–{high}" if high is not None else f"≥ {low}"
            raise ConfigError(f"must be {bound}, got {value}")
        return value

    return parse


def _seconds(text: str) -> float:
    try:
        value = float(text.strip())
    except ValueError:
        raise ConfigError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0 or value > 3600:
        raise ConfigError(f"must be in (0, 3600] seconds, got {text.strip()}")
    return value


def _choice(options: tuple[str, ...]) -> Callable[[str], str]:
    def parse(text: str) -> str:
        value = text.strip()
        if value not in options:
            raise ConfigError(f"must be one of {'|'.join(options)}, got {value!r}")
        return value

    return parse


def _csv(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _kinds(text: str) -> tuple[int, ...]:
    out = []
    for part in _csv(text):
        if not part.isdigit() or int(part) > 65535:
            raise ConfigError(f"kinds must be integers 0–65535, got {part!r}")
        out.append(int(part))
    return tuple(out)


def _channels(text: str) -> tuple[str, ...]:
    out = _csv(text)
    for c in out:
        if not is_channel_id(c):
            raise ConfigError(f"channels must be canonical lowercase UUIDs, got {c!r}")
    return out


def _hex_list(text: str) -> tuple[str, ...]:
    out = tuple(p.lower() for p in _csv(text))
    for pk in out:
        if not is_hex(pk, 64):
            raise ConfigError(f"pubkeys must be 64 hex characters, got {pk!r}")
    return out


def _modes(text: str) -> tuple[str, ...]:
    out = _csv(text)
    for mode in out:
        _choice(RESPOND_TO_MODES)(mode)
    return out


@dataclass(frozen=True, slots=True)
class Flag:
    """One row of agents.md §4.16: attribute, option, environment variable, default, parser."""

    name: str
    option: str
    env: str
    default: Any
    parse: Callable[[str], Any]
    help: str
    is_flag: bool = False
    aliases: tuple[str, ...] = ()  # legacy environment names (as in buzz), read after `env`


FLAGS: tuple[Flag, ...] = (
    Flag("private_key", "--private-key", "BUZZ_PRIVATE_KEY", None, _text, "agent secret key, hex or nsec (required)", aliases=("BUZZ_ACP_PRIVATE_KEY",)),
    Flag("relay", "--relay", "BUZZ_RELAY_URL", "ws://localhost:3000", _text, "relay URL: ws, wss, http or https"),
    Flag("auth_tag", "--auth-tag", "BUZZ_AUTH_TAG", None, _text, "NIP-OA tag (JSON or [auth,…] shorthand); source of the owner"),
    Flag("agent_owner", "--agent-owner", "BUZZ_ACP_AGENT_OWNER", None, _text, "owner pubkey when no auth tag is set"),
    Flag("agent_command", "--agent-command", "BUZZ_ACP_AGENT_COMMAND", "goose", _text, "ACP agent executable"),
    Flag("agent_args", "--agent-args", "BUZZ_ACP_AGENT_ARGS", ("acp",), _csv, "comma-separated agent arguments"),
    Flag("mcp_command", "--mcp-command", "BUZZ_ACP_MCP_COMMAND", "", _text, "MCP server command given to sessions, e.g. 'buzz mcp'"),
    Flag("agents", "--agents", "BUZZ_ACP_AGENTS", 1, _int_in(1, MAX_AGENTS), "pool size, 1–32"),
    Flag("lazy_pool", "--lazy-pool", "BUZZ_ACP_LAZY_POOL", False, parse_bool, "start subprocesses on the first event", is_flag=True),
    Flag("idle_timeout", "--idle-timeout", "BUZZ_ACP_IDLE_TIMEOUT", 900, _int_in(1, None), "seconds a prompt may go without agent output", aliases=("BUZZ_ACP_TURN_TIMEOUT",)),
    Flag("max_turn_duration", "--max-turn-duration", "BUZZ_ACP_MAX_TURN_DURATION", 7200, _int_in(1, MAX_TURN_DURATION_S), "absolute cap on one turn, seconds (≤ 604800)"),
    Flag("system_prompt", "--system-prompt", "BUZZ_ACP_SYSTEM_PROMPT", None, _text, "[System] section text"),
    Flag("system_prompt_file", "--system-prompt-file", "BUZZ_ACP_SYSTEM_PROMPT_FILE", None, _text, "file holding the [System] section"),
    Flag("base_prompt_file", "--base-prompt-file", "BUZZ_ACP_BASE_PROMPT_FILE", None, _text, "file replacing the built-in [Base] section"),
    Flag("no_base_prompt", "--no-base-prompt", "BUZZ_ACP_NO_BASE_PROMPT", False, parse_bool, "omit the [Base] section", is_flag=True),
    Flag("team_instructions", "--team-instructions", "BUZZ_ACP_TEAM_INSTRUCTIONS", None, _text, "[Team Instructions] section text"),
    Flag("system_prompt_transport", "--system-prompt-transport", "BUZZ_ACP_SYSTEM_PROMPT_TRANSPORT", "auto", _choice(PROMPT_TRANSPORTS), "auto|field|claude-meta|user"),
    Flag("initial_message", "--initial-message", "BUZZ_ACP_INITIAL_MESSAGE", None, _text, "first prompt of each new session"),
    Flag("heartbeat_interval", "--heartbeat-interval", "BUZZ_ACP_HEARTBEAT_INTERVAL", 0, _int_in(0, None), "seconds between heartbeat prompts; 0 = off, else ≥ 10"),
    Flag("heartbeat_prompt", "--heartbeat-prompt", "BUZZ_ACP_HEARTBEAT_PROMPT", None, _text, "heartbeat text"),
    Flag("heartbeat_prompt_file", "--heartbeat-prompt-file", "BUZZ_ACP_HEARTBEAT_PROMPT_FILE", None, _text, "file holding the heartbeat text"),
    Flag("subscribe", "--subscribe", "BUZZ_ACP_SUBSCRIBE", "mentions", _choice(SUBSCRIBE_MODES), "mentions|all|config"),
    Flag("kinds", "--kinds", "BUZZ_ACP_KINDS", None, _kinds, "comma-separated kinds overriding every rule"),
    Flag("channels", "--channels", "BUZZ_ACP_CHANNELS", None, _channels, "comma-separated channel UUIDs (default: all member channels)"),
    Flag("no_mention_filter", "--no-mention-filter", "BUZZ_ACP_NO_MENTION_FILTER", False, parse_bool, "require_mention = false for every rule", is_flag=True),
    Flag("config", "--config", "BUZZ_ACP_CONFIG", "./buzz-acp.toml", _text, "rules file for --subscribe config"),
    Flag("multiple_event_handling", "--multiple-event-handling", "BUZZ_ACP_MULTIPLE_EVENT_HANDLING", "steer", _choice(EVENT_HANDLING_MODES), "steer|queue|interrupt|owner-interrupt"),
    Flag("no_ignore_self", "--no-ignore-self", "BUZZ_ACP_NO_IGNORE_SELF", False, parse_bool, "also process the agent's own events", is_flag=True),
    Flag("context_message_limit", "--context-message-limit", "BUZZ_ACP_CONTEXT_MESSAGE_LIMIT", 12, _int_in(0, MAX_CONTEXT_MESSAGES), "history messages per prompt, 0–100"),
    Flag("max_turns_per_session", "--max-turns-per-session", "BUZZ_ACP_MAX_TURNS_PER_SESSION", 0, _int_in(0, None), "turns before a session is dropped; 0 = unlimited"),
    Flag("no_presence", "--no-presence", "BUZZ_ACP_NO_PRESENCE", False, parse_bool, "publish no presence (20001)", is_flag=True),
    Flag("no_typing", "--no-typing", "BUZZ_ACP_NO_TYPING", False, parse_bool, "publish no typing indicator (20002)", is_flag=True),
    Flag("memory", "--memory", "BUZZ_ACP_MEMORY", True, parse_bool, "inject core memory into new sessions (default)", is_flag=True),
    Flag("no_memory", "--no-memory", "BUZZ_ACP_NO_MEMORY", False, parse_bool, "do not inject core memory", is_flag=True),
    Flag("no_turn_metrics", "--no-turn-metrics", "BUZZ_ACP_NO_TURN_METRICS", False, parse_bool, "publish no turn metrics (44200)", is_flag=True),
    Flag("model", "--model", "BUZZ_ACP_MODEL", None, _text, "model id to apply to sessions"),
    Flag("effort_level", "--effort-level", "BUZZ_ACP_EFFORT_LEVEL", None, _text, "effort option to apply to sessions"),
    Flag("session_title", "--session-title", "BUZZ_ACP_SESSION_TITLE", None, _text, "_meta.sessionTitle (default '<name> · #<channel>')"),
    Flag("permission_mode", "--permission-mode", "BUZZ_ACP_PERMISSION_MODE", "bypass-permissions", _choice(PERMISSION_MODES), "|".join(PERMISSION_MODES)),
    Flag("respond_to", "--respond-to", "BUZZ_ACP_RESPOND_TO", "owner-only", _choice(RESPOND_TO_MODES), "|".join(RESPOND_TO_MODES)),
    Flag("respond_to_allowlist", "--respond-to-allowlist", "BUZZ_ACP_RESPOND_TO_ALLOWLIST", (), _hex_list, "comma-separated hex pubkeys (allowlist mode)"),
    Flag("allowed_respond_to", "--allowed-respond-to", "BUZZ_ACP_ALLOWED_RESPOND_TO", RESPOND_TO_MODES, _modes, "respond-to modes an operator permits"),
    Flag("relay_observer", "--relay-observer", "BUZZ_ACP_RELAY_OBSERVER", False, parse_bool, "observer frames 24200 (later; accepted, not yet sent)", is_flag=True),
    Flag("exit_after_inactivity", "--exit-after-inactivity", "BUZZ_ACP_EXIT_AFTER_INACTIVITY", 0, _int_in(0, None), "exit 0 after this many idle seconds; 0 = never"),
    Flag("event_buffer", "--event-buffer", "BUZZ_ACP_EVENT_BUFFER", 256, _int_in(1, None), "inbound relay event buffer (events)"),
    Flag("catch_up", "--catch-up", "BUZZ_ACP_CATCH_UP", 600, _int_in(0, None), "seconds of missed mentions answered on start and after a reconnect; 0 = off"),
    Flag("claim_lease", "--claim-lease", "BUZZ_ACP_CLAIM_LEASE", 30, _int_in(4, 3600), "seconds a claim lives without its heartbeat before another process (or a restart) retries the event, 4–3600"),
    Flag("steer_limit", "--steer-limit", "BUZZ_ACP_STEER_LIMIT", 2, _int_in(0, None), "consecutive steers of one turn before new events queue (steer mode)"),
    Flag("max_attempts", "--max-attempts", "BUZZ_ACP_MAX_ATTEMPTS", 10, _int_in(1, MAX_ATTEMPTS_LIMIT), "attempts of a failing batch before the failure reply, 1–100 (a job: at most 3)"),
    Flag("no_managed_policy", "--no-managed-policy", "BUZZ_ACP_NO_MANAGED_POLICY", False, parse_bool, "ignore the owner's managed-agent record (30177)", is_flag=True),
    Flag("max_agents", "--max-agents", "BUZZ_ACP_MAX_AGENTS", 32, _int_in(1, MAX_AGENTS), "upper bound for parallelism from a 30177, 1–32"),
    Flag("persona", "--persona", "BUZZ_ACP_PERSONA", None, _text, "persona slug of the owner (or <author>:<slug>) for [System] and the model"),
    Flag("no_jobs", "--no-jobs", "BUZZ_ACP_NO_JOBS", False, parse_bool, "take no jobs (43001): neither accept nor decline them", is_flag=True),
    Flag("job_progress_interval", "--job-progress-interval", "BUZZ_ACP_JOB_PROGRESS_INTERVAL", 5.0, _seconds, "seconds between a job's progress events (43003), in (0, 3600]"),
    Flag("retry_backoff", "--retry-backoff", "BUZZ_ACP_RETRY_BACKOFF", 5.0, _seconds, "seconds before the first retry (doubling, at most 300)"),
    Flag("no_work_status", "--no-work-status", "BUZZ_ACP_NO_WORK_STATUS", False, parse_bool, "publish no agent work status (30181)", is_flag=True),
)  # fmt: skip

FLAG_BY_NAME: dict[str, Flag] = {f.name: f for f in FLAGS}


@dataclass(frozen=True)
class HarnessConfig:
    """Resolved `buzz agent run` settings (agents.md §4.16). Times in seconds.

    `system_prompt`, `base_prompt` and `heartbeat_prompt` hold text (files already read);
    `base_prompt` None means the built-in [Base] text, `""` with `no_base_prompt` means omitted.
    """

    private_key: str | None = field(default=None, repr=False)  # never shown (agents.md §1.1 item 3)
    relay: str = "ws://localhost:3000"
    auth_tag: str | None = None
    agent_owner: str | None = None
    agent_command: str = "goose"
    agent_args: tuple[str, ...] = ("acp",)
    mcp_command: str = ""
    agents: int = 1
    lazy_pool: bool = False
    idle_timeout: int = 900
    max_turn_duration: int = 7200
    system_prompt: str | None = None
    system_prompt_file: str | None = None
    base_prompt_file: str | None = None
    no_base_prompt: bool = False
    team_instructions: str | None = None
    system_prompt_transport: str = "auto"
    initial_message: str | None = None
    heartbeat_interval: int = 0
    heartbeat_prompt: str | None = None
    heartbeat_prompt_file: str | None = None
    subscribe: str = "mentions"
    kinds: tuple[int, ...] | None = None
    channels: tuple[str, ...] | None = None
    no_mention_filter: bool = False
    config: str = "./buzz-acp.toml"
    multiple_event_handling: str = "steer"
    no_ignore_self: bool = False
    context_message_limit: int = 12
    max_turns_per_session: int = 0
    no_presence: bool = False
    no_typing: bool = False
    memory: bool = True
    no_memory: bool = False
    no_turn_metrics: bool = False
    model: str | None = None
    effort_level: str | None = None
    session_title: str | None = None
    permission_mode: str = "bypass-permissions"
    respond_to: str = "owner-only"
    respond_to_allowlist: tuple[str, ...] = ()
    allowed_respond_to: tuple[str, ...] = RESPOND_TO_MODES
    relay_observer: bool = False
    exit_after_inactivity: int = 0
    event_buffer: int = 256
    catch_up: int = 600
    claim_lease: int = 30
    steer_limit: int = 2
    max_attempts: int = 10
    retry_backoff: float = 5.0
    no_managed_policy: bool = False
    max_agents: int = 32
    persona: str | None = None
    no_jobs: bool = False
    job_progress_interval: float = 5.0
    no_work_status: bool = False
    # Derived by load_config (not flags):
    base_prompt: str | None = None
    sources: Mapping[str, str] = field(default_factory=dict)  # attribute → "flag" | "env" | "default"

    @property
    def memory_enabled(self) -> bool:
        """Effective memory switch: memory ∧ ¬no-memory (agents.md §4.16, engram.md §13.1)."""
        return self.memory and not self.no_memory

    @property
    def ws_url(self) -> str:
        """The relay as a WebSocket URL (`http`→`ws`, `https`→`wss`)."""
        return relay_urls(self.relay)[0]

    @property
    def http_url(self) -> str:
        """The relay's HTTP base (`ws`→`http`, `wss`→`https`; agents.md §1.1 item 4)."""
        return relay_urls(self.relay)[1]


def relay_urls(url: str, where: str = "--relay / BUZZ_RELAY_URL") -> tuple[str, str]:
    """(WebSocket URL, HTTP base) for a ws/wss/http/https relay URL, by the parsers every face
    shares (`http_base` checks scheme, host and port). Raises ConfigError naming `where`."""
    try:
        base = http_base(url)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return websocket_url(url), base


def _read_file(option: str, path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{option}: cannot read {path!r}: {exc}") from None


def _resolve(flag: Flag, given: Any, env: Mapping[str, str]) -> tuple[Any, str]:
    if given is not None:
        if isinstance(given, str) and not flag.is_flag:
            return flag.parse(given), "flag"
        return given, "flag"
    for name in (flag.env, *flag.aliases):
        if name in env:
            return flag.parse(env[name]), "env"
    return flag.default, "default"


def load_config(
    given: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None
) -> HarnessConfig:
    """Resolve every §4.16 flag (flag > environment > default) and validate the result.

    `given` maps attribute names to command-line values (None = not given; booleans for
    `is_flag` rows). `env` defaults to `os.environ`. Raises ConfigError (exit 1), never returns
    a configuration that §4.2 item 1 would refuse.
    """
    given = dict(given or {})
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for flag in FLAGS:
        try:
            values[flag.name], sources[flag.name] = _resolve(flag, given.get(flag.name), env)
        except ConfigError as exc:
            where = flag.option if given.get(flag.name) is not None else flag.env
            raise ConfigError(f"{where}: {exc.message}") from None
    if given.get("memory") and given.get("no_memory"):
        raise ConfigError("--memory and --no-memory are mutually exclusive")
    cfg = HarnessConfig(**values, sources=sources)
    return _finish(cfg)


def given_as(cfg: HarnessConfig, name: str) -> str:
    """How the value of flag `name` was given, for a message: its variable when it came from
    the environment, else its option (a default is the option's)."""
    flag = FLAG_BY_NAME[name]
    return flag.env if cfg.sources.get(name) == "env" else flag.option


def _exclusive(cfg: HarnessConfig, a: str, b: str) -> None:
    if getattr(cfg, a) is not None and getattr(cfg, b) is not None:
        raise ConfigError(f"{FLAG_BY_NAME[a].option} and {FLAG_BY_NAME[b].option} are mutually exclusive")


def _finish(cfg: HarnessConfig) -> HarnessConfig:
    """Cross-field checks (agents.md §4.6 item 3, §4.14, §4.16) and file reads."""
    relay_urls(cfg.relay, given_as(cfg, "relay"))
    _exclusive(cfg, "system_prompt", "system_prompt_file")
    _exclusive(cfg, "heartbeat_prompt", "heartbeat_prompt_file")
    if cfg.persona is not None and (cfg.system_prompt is not None or cfg.system_prompt_file is not None):
        raise ConfigError("--persona and --system-prompt / --system-prompt-file are mutually exclusive")
    if cfg.heartbeat_interval and cfg.heartbeat_interval < MIN_HEARTBEAT_S:
        raise ConfigError(
            f"--heartbeat-interval must be 0 or ≥ {MIN_HEARTBEAT_S}, got {cfg.heartbeat_interval}"
        )
    if cfg.respond_to not in cfg.allowed_respond_to:
        raise ConfigError(
            f"--respond-to {cfg.respond_to} is not permitted by --allowed-respond-to "
            f"({','.join(cfg.allowed_respond_to)})"
        )
    if cfg.respond_to == "allowlist" and not cfg.respond_to_allowlist:
        raise ConfigError("--respond-to allowlist needs --respond-to-allowlist")
    if not cfg.agent_command.strip():
        raise ConfigError("--agent-command must not be empty")
    updates: dict[str, Any] = {}
    if cfg.system_prompt_file is not None:
        updates["system_prompt"] = _read_file("--system-prompt-file", cfg.system_prompt_file)
    if cfg.heartbeat_prompt_file is not None:
        updates["heartbeat_prompt"] = _read_file("--heartbeat-prompt-file", cfg.heartbeat_prompt_file)
    if cfg.no_base_prompt:
        updates["base_prompt"] = ""
    elif cfg.base_prompt_file is not None:
        updates["base_prompt"] = _read_file("--base-prompt-file", cfg.base_prompt_file)
    if not updates:
        return cfg
    kw = {f.name: getattr(cfg, f.name) for f in fields(cfg)}
    kw.update(updates)
    return HarnessConfig(**kw)
