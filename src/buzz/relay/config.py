"""Relay configuration from flags and environment (relay.md §16).

Invalid values stop startup with ConfigError (never a silent default).
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from buzz.core import limits
from buzz.core.keys import is_hex
from buzz.core.kinds import KindRange, parse_open_kinds
from buzz.core.nip98 import http_base
from buzz.media.limits import MediaSettings, settings_from_env
from buzz.workflows.host import Settings as WorkflowSettings

# relay.md §16's RELAY_URL default. It names no real address (the relay binds 127.0.0.1:3000
# by default): while it is in force, clients name the host they dialled, and nothing says
# "connect to ws://localhost:3000" (banner, bridge refusals).
DEFAULT_RELAY_URL = "ws://localhost:3000"
WEBSOCKET_LAYERS = ("lean", "aiohttp")  # BUZZ_WEBSOCKET_LAYER: the relay's Nostr WebSocket (relay.lean_ws)


class ConfigError(ValueError):
    """A configuration value that cannot be used; the message names the variable."""


def _bool(name: str, value: str) -> bool:
    v = value.strip().lower()
    if v in ("1", "true", "yes", "on"):
        return True
    if v in ("0", "false", "no", "off", ""):
        return False
    raise ConfigError(f"{name} must be true or false, got {value!r}")


_MESH_ON = frozenset({"on", "true", "1"})
_MESH_OFF = frozenset({"off", "false", "0", ""})


def parse_mesh(value: str) -> bool:
    """BUZZ_MESH (huddle.md §9.1): `on`/`true`/`1` (any case) → True, `off`/`false`/`0`/empty →
    False. Anything else raises ConfigError: a typo must not silently leave the mesh off."""
    v = value.strip().lower()
    if v in _MESH_ON:
        return True
    if v in _MESH_OFF:
        return False
    raise ConfigError(f"BUZZ_MESH must be on|true|1 or off|false|0, got {value!r}")


def _positive_int(name: str, value: str, allow_zero: bool = False) -> int:
    try:
        n = int(value)
    except ValueError:
        raise ConfigError(f"{name} must be an integer, got {value!r}") from None
    if n < 0 or (n == 0 and not allow_zero):
        raise ConfigError(f"{name} must be {'non-negative' if allow_zero else 'positive'}, got {n}")
    return n


def parse_bind(value: str, name: str = "BUZZ_BIND_ADDR") -> tuple[str, int]:
    """`host:port` (IPv6 as `[::1]:3000`, port 0–65535, 0 = any free port) → (host, port).
    Raises ConfigError naming `name`: for an empty value, a missing host or port, and a host
    with a colon that is neither bracketed nor an IPv6 address (`127.0.0.1:3000:5`, which
    would otherwise reach the resolver as the host `127.0.0.1:3000`)."""
    host, sep, port = value.rpartition(":")
    if not sep or not host:
        raise ConfigError(f"{name} must be host:port, got {value!r}")
    if ":" in host and not (host.startswith("[") and host.endswith("]")) and not _is_ipv6(host):
        raise ConfigError(
            f"{name} must be host:port with one colon (an IPv6 address in brackets, [::1]:3000), got {value!r}"
        )
    n = _positive_int(f"{name} port", port, allow_zero=True)
    if n > 65535:
        raise ConfigError(f"{name} port must be 0-65535, got {n}")
    return host.strip("[]"), n


def _is_ipv6(text: str) -> bool:
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class RelayConfig:
    """Everything the relay process reads at startup. Sizes in bytes, times in seconds."""

    host: str = "127.0.0.1"
    port: int = 3000
    relay_url: str = DEFAULT_RELAY_URL
    data_dir: Path = Path("./buzz-data")
    database_url: str | None = None
    redis_url: str | None = None
    workspace_id: str = "default"
    relay_private_key: str | None = None
    owner_pubkey: str | None = None
    require_relay_membership: bool = False
    allow_nip_oa_auth: bool = False
    nip_aa_max_depth: int = 1
    max_frame_bytes: int = limits.MAX_FRAME_BYTES
    max_past_drift_s: int = limits.MAX_CLOCK_DRIFT_S
    max_connections: int = limits.MAX_CONNECTIONS
    # Plain HTTP (docs/limits.md): None = a share of the open-file limit (relay.http_guard)
    max_http_connections: int | None = None
    http_header_timeout_s: float = limits.HTTP_HEADER_TIMEOUT_S
    http_body_timeout_s: float = limits.HTTP_BODY_TIMEOUT_S
    max_concurrent_handlers: int = limits.MAX_CONCURRENT_HANDLERS
    send_buffer: int = limits.SEND_BUFFER
    send_buffer_bytes: int = limits.SEND_BUFFER_BYTES
    slow_client_grace: int = limits.SLOW_CLIENT_GRACE
    verify_workers: int = field(default_factory=lambda: os.cpu_count() or 1)
    http_bridge: bool = True
    # "lean" (issue 30 item 2: the socket leaves aiohttp after the 101, relay.lean_ws) or "aiohttp"
    websocket_layer: str = "lean"
    relay_name: str = "Buzz Relay"
    relay_description: str = "Self-hosted workspace relay for humans and agents"
    relay_contact: str | None = None
    auth_timeout_s: float = limits.AUTH_TIMEOUT_S
    redis_timeout_ms: int = limits.REDIS_REQUEST_TIMEOUT_MS
    metrics_bind: str | None = None  # host:port of the separate /metrics listener; None = off
    mesh: bool = False  # BUZZ_MESH: huddles across replicas (huddle.md §9); needs redis_url
    # attribute → the variable or flag that set it (`BUZZ_DATABASE_URL`, `DATABASE_URL`, `--db`):
    # a refusal names what the operator actually typed, never a variable they did not set.
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)
    media: MediaSettings = field(default_factory=MediaSettings)  # BUZZ_MEDIA_* (media.md §16)
    workflows: WorkflowSettings = field(default_factory=WorkflowSettings)  # BUZZ_WORKFLOW* (workflows.md §19)
    open_kinds: tuple[KindRange, ...] = ()  # BUZZ_OPEN_KINDS: kinds opened without code (docs/kinds.md)

    @classmethod
    def from_env(
        cls,
        env: Mapping[str, str] | None = None,
        flags: Mapping[str, str] | None = None,
        **overrides: object,
    ) -> RelayConfig:
        """Read relay.md §16 variables from `env` (default os.environ); `overrides` (CLI flags,
        None = not given) win, and `flags` names the flag of each (`{"database_url": "--db"}`)
        for the messages. Raises ConfigError for an invalid value, naming where it came from."""
        env = os.environ if env is None else env
        kw: dict[str, object] = {}
        sources: dict[str, str] = {}

        def get(attribute: str, *names: str) -> str | None:
            for n in names:
                if env.get(n):
                    sources[attribute] = n
                    return env[n]
            return None

        if (v := get("host", "BUZZ_BIND_ADDR")) is not None:
            kw["host"], kw["port"] = parse_bind(v)
        if (v := get("relay_url", "RELAY_URL")) is not None:
            kw["relay_url"] = v
        if (v := get("data_dir", "BUZZ_DATA_DIR")) is not None:
            kw["data_dir"] = Path(v)
        if (v := get("database_url", "BUZZ_DATABASE_URL", "DATABASE_URL")) is not None:
            kw["database_url"] = v
        if (v := get("redis_url", "BUZZ_REDIS_URL", "REDIS_URL")) is not None:
            kw["redis_url"] = v
        if (v := get("metrics_bind", "BUZZ_METRICS_BIND")) is not None:
            kw["metrics_bind"] = v
        if (v := env.get("BUZZ_MESH")) is not None:
            kw["mesh"] = parse_mesh(v)
        if (v := env.get("BUZZ_OPEN_KINDS")) is not None:
            try:
                kw["open_kinds"] = parse_open_kinds(v)
            except ValueError as exc:
                raise ConfigError(f"BUZZ_OPEN_KINDS: {exc}") from None
        if (v := get("workspace_id", "BUZZ_WORKSPACE_ID")) is not None:
            kw["workspace_id"] = v
        if (v := get("relay_private_key", "BUZZ_RELAY_PRIVATE_KEY")) is not None:
            kw["relay_private_key"] = v
        if (v := get("owner_pubkey", "RELAY_OWNER_PUBKEY")) is not None:
            kw["owner_pubkey"] = v
        for var, attr in (
            ("BUZZ_REQUIRE_RELAY_MEMBERSHIP", "require_relay_membership"),
            ("BUZZ_ALLOW_NIP_OA_AUTH", "allow_nip_oa_auth"),
            ("BUZZ_HTTP_BRIDGE", "http_bridge"),
        ):
            if (v := env.get(var)) is not None:
                kw[attr] = _bool(var, v)
        for var, attr, zero_ok in (
            ("BUZZ_NIP_AA_MAX_DEPTH", "nip_aa_max_depth", True),
            ("BUZZ_MAX_FRAME_BYTES", "max_frame_bytes", False),
            ("BUZZ_MAX_PAST_DRIFT_S", "max_past_drift_s", True),
            ("BUZZ_MAX_CONNECTIONS", "max_connections", False),
            ("BUZZ_MAX_HTTP_CONNECTIONS", "max_http_connections", False),
            ("BUZZ_HTTP_HEADER_TIMEOUT_S", "http_header_timeout_s", False),
            ("BUZZ_HTTP_BODY_TIMEOUT_S", "http_body_timeout_s", False),
            ("BUZZ_MAX_CONCURRENT_HANDLERS", "max_concurrent_handlers", False),
            ("BUZZ_SEND_BUFFER", "send_buffer", False),
            ("BUZZ_SEND_BUFFER_BYTES", "send_buffer_bytes", False),
            ("BUZZ_SLOW_CLIENT_GRACE_LIMIT", "slow_client_grace", False),
            ("BUZZ_VERIFY_WORKERS", "verify_workers", False),
            ("BUZZ_REDIS_TIMEOUT_MS", "redis_timeout_ms", False),
        ):
            if (v := env.get(var)) is not None:
                kw[attr] = _positive_int(var, v, allow_zero=zero_ok)
        if (v := env.get("BUZZ_WEBSOCKET_LAYER")) is not None:
            if v not in WEBSOCKET_LAYERS:
                raise ConfigError(
                    f"BUZZ_WEBSOCKET_LAYER must be one of {', '.join(WEBSOCKET_LAYERS)}, got {v!r}"
                )
            kw["websocket_layer"] = v
        for var, attr in (
            ("BUZZ_RELAY_NAME", "relay_name"),
            ("BUZZ_RELAY_DESCRIPTION", "relay_description"),
            ("BUZZ_RELAY_CONTACT", "relay_contact"),
        ):
            if (v := env.get(var)) is not None:
                kw[attr] = v
        try:
            kw["media"] = settings_from_env(env)
            kw["workflows"] = WorkflowSettings.from_env(env)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        given = {k: v for k, v in overrides.items() if v is not None}
        kw.update(given)
        sources.update({k: (flags or {}).get(k, k) for k in given})
        cfg = cls(**kw, sources=sources)  # type: ignore[arg-type]
        cfg.validate()
        return cfg

    def named(self, attribute: str, variable: str) -> str:
        """What set `attribute`: the flag or variable in `sources`, else its variable's name."""
        return self.sources.get(attribute, variable)

    def validate(self) -> None:
        """Raise ConfigError for values relay.md §16 says must stop startup."""
        if self.relay_private_key is not None and not is_hex(self.relay_private_key.lower(), 64):
            raise ConfigError("BUZZ_RELAY_PRIVATE_KEY must be 64 hex characters")
        if self.owner_pubkey is not None and not is_hex(self.owner_pubkey, 64):
            raise ConfigError("RELAY_OWNER_PUBKEY must be 64 lowercase hex characters")
        if not self.relay_url.startswith(("ws://", "wss://")):
            raise ConfigError(f"RELAY_URL must start with ws:// or wss://, got {self.relay_url!r}")
        if self.database_url and not self.database_url.startswith(
            ("postgres://", "postgresql://", "sqlite:")
        ):
            raise ConfigError(
                f"{self.named('database_url', 'BUZZ_DATABASE_URL')} must start with postgres://, "
                "postgresql:// or sqlite:"
            )
        if self.redis_url and not self.redis_url.startswith(("redis://", "rediss://", "unix://")):
            raise ConfigError(f"{self.named('redis_url', 'BUZZ_REDIS_URL')} must be a redis:// URL")
        if self.metrics_bind is not None:
            parse_bind(self.metrics_bind, self.named("metrics_bind", "BUZZ_METRICS_BIND"))
        if self.redis_url and not (self.database_url or "").startswith(("postgres://", "postgresql://")):
            raise ConfigError(
                f"{self.named('redis_url', 'BUZZ_REDIS_URL')} needs PostgreSQL (--db postgresql://… or "
                "BUZZ_DATABASE_URL): SQLite is single-process"
            )
        if self.mesh and not self.redis_url:
            raise ConfigError("BUZZ_MESH=on needs BUZZ_REDIS_URL (--redis-url): the mesh runs through Redis")
        try:
            self.media.validate()
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        if self.media_store == "db" and not self.on_postgres:
            raise ConfigError("BUZZ_MEDIA_STORE=db needs PostgreSQL (--db postgresql://…)")
        if self.media_store == "files" and self.redis_url and not self.media.shared_dir:
            raise ConfigError(
                "several replicas (BUZZ_REDIS_URL) with BUZZ_MEDIA_STORE=files need a shared media"
                " directory: set BUZZ_MEDIA_SHARED_DIR=true once it is shared, or use the db store"
            )

    @property
    def on_postgres(self) -> bool:
        return (self.database_url or "").startswith(("postgres://", "postgresql://"))

    @property
    def media_store(self) -> str:
        """`files` or `db`: BUZZ_MEDIA_STORE with `auto` resolved (media.md §10.2)."""
        if self.media.store == "auto":
            return "db" if self.on_postgres else "files"
        return self.media.store

    @property
    def media_base_url(self) -> str:
        """BUZZ_MEDIA_BASE_URL, else RELAY_URL's HTTP form plus `/media` (media.md §16)."""
        return self.media.base_url or http_base(self.relay_url) + "/media"
