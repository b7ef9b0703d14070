"""The agent face's public entry point: what a launcher (`buzz agent run`) may import.

Faces never import each other's internals (docs/architecture.md, tests/test_layers.py); a
launcher that starts the harness uses only this module:

- `FLAGS`: the flag table of agents.md §4.16 (to declare options), `ConfigError` (a bad value:
  `exit_code` 1, or 3 for a missing or invalid key or `BUZZ_AUTH_TAG`);
- `prepare(given)`: flags by name (None = unset: environment, then default) → a `Prepared`
  configuration with the resolved identity and owner (agents.md §4.2). Raises ConfigError.
- `run(prepared)`: run the harness until SIGINT / SIGTERM (graceful stop, presence `offline`),
  returning the process exit code. Raises ConfigError when the harness refuses the
  configuration, PreflightError when the agent or MCP command does not start;
- the owner's reports of issue 14 item 12 (`buzz.agent.reports`): `agent_status`,
  `agent_usage`, `parse_since`, their table rows and columns.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from buzz.agent.config import FLAGS, ConfigError, HarnessConfig, load_config
from buzz.agent.identity import AgentIdentity, resolve_identity
from buzz.agent.preflight import PreflightError
from buzz.agent.reports import (
    STATUS_COLUMNS,
    USAGE_COLUMNS,
    agent_status,
    agent_usage,
    parse_since,
    status_rows,
    usage_rows,
)

__all__ = [
    "FLAGS",
    "STATUS_COLUMNS",
    "USAGE_COLUMNS",
    "ConfigError",
    "PreflightError",
    "Prepared",
    "agent_status",
    "agent_usage",
    "parse_since",
    "prepare",
    "run",
    "status_rows",
    "usage_rows",
]


@dataclass(frozen=True)
class Prepared:
    config: HarnessConfig
    identity: AgentIdentity


def prepare(given: Mapping[str, Any]) -> Prepared:
    """Resolve the configuration and the identity. Raises ConfigError."""
    config = load_config(dict(given))
    return Prepared(config, resolve_identity(config))


async def run(prepared: Prepared) -> int:
    """Run the harness in this event loop until stopped; returns the exit code."""
    from buzz.agent.harness import Harness  # the ACP SDK loads only when an agent runs

    harness = Harness(prepared.config, prepared.identity)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, lambda: asyncio.ensure_future(harness.request_shutdown()))
    return await harness.run()
