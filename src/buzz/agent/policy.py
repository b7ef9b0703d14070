"""The owner's managed-agent record (30177) applied live (jobs spec §10.1): whom the agent
answers and how many subprocesses it runs change without a restart.

With a known owner `O`, the harness keeps `{"kinds":[30177],"authors":[O],"#d":[A]}` open
(and the owner's kind 5 on that address). The newest version wins (the relay's tie rule:
newest `created_at`, then lowest id); records by anyone else are never asked for. From it:
`respond_to`, `respond_to_allowlist` (invalid entries dropped) and `parallelism` (clamped to
1–`--max-agents`). A mode outside `--allowed-respond-to`, an unknown mode or a malformed field
is ignored with one log line and the previous value stays. A deleted record brings the flag
values back. `--no-managed-policy` ignores all of it.

`apply_record` is pure; `PolicyWatch` holds the subscription and applies changes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import orjson

from buzz.agent.config import HarnessConfig
from buzz.core.event import Event
from buzz.jobs import limits as L
from buzz.jobs.text import is_hex64, is_int

log = logging.getLogger(__name__)

POLICY_SUB = "managed-policy"
POLICY_DELETE_SUB = "managed-policy-deleted"


@dataclass(frozen=True, slots=True)
class Policy:
    """What the author gate and the pool read: from the flags, or the owner's 30177."""

    respond_to: str
    allowlist: tuple[str, ...]
    parallelism: int
    persona_id: str | None = None
    source: str = "flags"  # "flags", or the id of the 30177 applied


def from_flags(config: HarnessConfig) -> Policy:
    return Policy(config.respond_to, tuple(config.respond_to_allowlist), config.agents)


def apply_record(base: Policy, body: Any, config: HarnessConfig, source: str) -> tuple[Policy, list[str]]:
    """The policy after the 30177 content `body`, and one line per field ignored."""
    notes: list[str] = []
    if not isinstance(body, dict):
        return base, ["managed-agent record is not a JSON object; ignored"]
    changes: dict[str, Any] = {"source": source}
    mode = body.get("respond_to")
    if mode is not None:
        if mode not in L.RESPOND_TO_MODES:
            notes.append(f"respond_to {mode!r} is not a mode; kept {base.respond_to}")
        elif mode not in config.allowed_respond_to:
            notes.append(f"respond_to {mode!r} is outside --allowed-respond-to; kept {base.respond_to}")
        else:
            changes["respond_to"] = mode
    allow = body.get("respond_to_allowlist")
    if allow is not None:
        if isinstance(allow, list):
            changes["allowlist"] = tuple(p for p in allow[: L.ALLOWLIST_MAX] if is_hex64(p))
        else:
            notes.append("respond_to_allowlist is not an array; kept the previous list")
    parallelism = body.get("parallelism")
    if parallelism is not None:
        if is_int(parallelism):
            changes["parallelism"] = max(1, min(parallelism, config.max_agents))
        else:
            notes.append(f"parallelism {parallelism!r} is not an integer; kept {base.parallelism}")
    persona = body.get("persona_id")
    changes["persona_id"] = persona if isinstance(persona, str) else None
    return replace(base, **changes), notes


class PolicyWatch:
    """Follows the owner's 30177 for this agent; `on_change(policy)` runs after each change."""

    def __init__(
        self, config: HarnessConfig, agent: str, owner: str, on_change: Callable[[Policy], Any]
    ) -> None:
        self.config = config
        self.agent = agent
        self.owner = owner
        self.on_change = on_change
        self.flags = from_flags(config)
        self.head: tuple[int, str] | None = None  # (created_at, id) of the version applied

    def filters(self) -> dict[str, dict[str, Any]]:
        coordinate = f"{L.KIND_MANAGED_AGENT}:{self.owner}:{self.agent}"
        return {
            POLICY_SUB: {"kinds": [L.KIND_MANAGED_AGENT], "authors": [self.owner], "#d": [self.agent]},
            POLICY_DELETE_SUB: {"kinds": [5], "authors": [self.owner], "#a": [coordinate]},
        }

    async def route(self, sub_id: str, event: Event) -> None:
        if event.pubkey != self.owner:
            return  # never consulted (§10.1 item 1); the filter asks for the owner's only
        if sub_id == POLICY_DELETE_SUB:
            if self.head is not None and event.created_at >= self.head[0]:
                self.head = None
                log.info("managed-agent record deleted; the flag values apply again")
                await self._changed(self.flags)
            return
        if event.kind != L.KIND_MANAGED_AGENT or event.d_tag != self.agent:
            return
        key = (event.created_at, event.id)
        if self.head is not None and (-key[0], key[1]) >= (-self.head[0], self.head[1]):
            return  # not newer than the version applied
        self.head = key
        try:
            body = orjson.loads(event.content)
        except orjson.JSONDecodeError:
            log.warning("managed-agent record %s is not JSON; ignored", event.id[:12])
            return
        policy, notes = apply_record(self.flags, body, self.config, event.id)
        for note in notes:
            log.warning("managed-agent record %s: %s", event.id[:12], note)
        log.info(
            "managed-agent record %s applied: respond-to %s (allowlist %d), parallelism %d",
            event.id[:12],
            policy.respond_to,
            len(policy.allowlist),
            policy.parallelism,
        )
        await self._changed(policy)

    async def _changed(self, policy: Policy) -> None:
        result = self.on_change(policy)
        if hasattr(result, "__await__"):
            await result
