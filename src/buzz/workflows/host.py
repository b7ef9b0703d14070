"""What the relay hands the engine (its own paths, nothing of its internals), and the engine's
settings (workflows.md §19, §20).

The engine signs its events with the relay key and stores them either in its own transactions
(`EventStore.workflow_write`, lifecycle and approval events) or through `Host.publish`, the
relay's internal path (thread rows, reaction index, fan-out) for the events its actions make.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from buzz.core.stored import StoredEvent
from buzz.store.base import InsertOutcome
from buzz.store.workflow_rows import RunLease
from buzz.workflows import limits as L
from buzz.workflows.webhook_call import Allow


class Host(Protocol):
    async def publish(self, stored: StoredEvent, lease: RunLease | None = None) -> InsertOutcome:
        """Insert a relay-signed event as the relay inserts its own, then fan it out. With
        `lease`, only while the replica still holds the run (else LeaseLost, nothing stored)."""
        ...

    async def plan(self, stored: StoredEvent) -> tuple[StoredEvent, tuple[Any, ...]]:
        """What `publish` would insert: the event (its channel set) and the effects the relay's
        own path adds (a reply's thread row, ...), for the engine to commit in its own write."""
        ...

    async def fanout(self, stored: StoredEvent) -> None:
        """Fan out an event the engine stored in one of its transactions."""
        ...

    async def set_topic(self, carrier: StoredEvent, actor: str, topic: str, lease: RunLease | None = None
                        ) -> InsertOutcome:  # fmt: skip
        """Store the step's 40099 `carrier` and apply the topic as a 9002 from `actor` would
        (the channel row in the same transaction, then 39000)."""
        ...

    async def open_dm(self, owner: str, to: str) -> str:
        """Open or reuse the DM of exactly {owner, to}, as a 41010 from `owner` would."""
        ...

    def invalidate(self, channel_id: str) -> None:
        """Tell other replicas that a channel's workflows changed (their trigger caches)."""
        ...


def _bool(value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"not a boolean: {value!r}")


def _positive(name: str, value: str | None, default: float) -> float:
    if value is None or value == "":
        return default
    number = float(value)
    if number <= 0:
        raise ValueError(f"{name} must be positive")
    return number


def _retention_days(value: str | None) -> float:
    if value is None or value == "":
        return L.RETENTION_DAYS_DEFAULT
    days = float(value)
    if not days >= 0:
        raise ValueError("BUZZ_WORKFLOW_RETENTION_DAYS must be 0 or more")
    return days


@dataclass(frozen=True)
class Settings:
    enabled: bool = True
    max_concurrent: int = L.MAX_CONCURRENT_RUNS
    queue_max: int = L.RUN_QUEUE_MAX
    allow: Allow = field(default_factory=Allow)
    run_rate: int = L.WORKFLOW_RUN_RATE
    # Timing constants (§20); tests shorten them through BUZZ_WORKFLOW_TICK_S, never production.
    tick_s: float = L.SCHEDULE_TICK_S
    lease_s: int = L.RUN_LEASE_S
    sweep_s: float = L.APPROVAL_SWEEP_S
    cache_s: float = 10.0
    retention_s: float = L.RETENTION_DAYS_DEFAULT * 86400  # 0: keep terminal runs forever
    prune_s: float = L.PRUNE_EVERY_S

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        tick = _positive("BUZZ_WORKFLOW_TICK_S", env.get("BUZZ_WORKFLOW_TICK_S"), L.SCHEDULE_TICK_S)
        return cls(
            enabled=_bool(env.get("BUZZ_WORKFLOWS_ENABLED", "true")),
            max_concurrent=int(
                _positive(
                    "BUZZ_WORKFLOW_MAX_CONCURRENT",
                    env.get("BUZZ_WORKFLOW_MAX_CONCURRENT"),
                    L.MAX_CONCURRENT_RUNS,
                )
            ),
            queue_max=int(
                _positive("BUZZ_WORKFLOW_QUEUE_MAX", env.get("BUZZ_WORKFLOW_QUEUE_MAX"), L.RUN_QUEUE_MAX)
            ),
            allow=Allow.parse(env.get("BUZZ_WORKFLOW_WEBHOOK_ALLOW", "")),
            tick_s=tick,
            sweep_s=min(L.APPROVAL_SWEEP_S, tick),
            lease_s=max(3, int(min(L.RUN_LEASE_S, tick * 3))),
            cache_s=min(10.0, tick),
            retention_s=_retention_days(env.get("BUZZ_WORKFLOW_RETENTION_DAYS")) * 86400,
        )
