"""Per-kind ingest rules (relay.md §9, §10, §4.5, §4.8): one module per family of kinds, each
exporting a `VALIDATORS` fragment; this package merges them into the one table the pipeline
reads. Adding a rule means adding a module (or a row), never a branch in the pipeline.
"""

from __future__ import annotations

from buzz.core.kinds import NEEDS_H_KINDS
from buzz.relay.ingestion.rules import (
    channels,
    deletion,
    dms,
    engram,
    huddle,
    jobs,
    messages,
    profile,
    records,
    work_status,
    workflows,
)
from buzz.relay.ingestion.rules import metrics as turn_metrics
from buzz.relay.ingestion.rules.base import KindRules, Plan, Validator
from buzz.relay.ingestion.rules.threads import with_thread_rules

_FRAGMENTS = (
    profile.VALIDATORS,
    deletion.VALIDATORS,
    engram.VALIDATORS,
    huddle.VALIDATORS,
    channels.VALIDATORS,
    dms.VALIDATORS,
    messages.VALIDATORS,
    records.VALIDATORS,
    jobs.VALIDATORS,
    turn_metrics.VALIDATORS,
    work_status.VALIDATORS,
    workflows.VALIDATORS,
)


def _merge() -> dict[int, Validator]:
    table: dict[int, Validator] = {}
    for fragment in _FRAGMENTS:
        overlap = table.keys() & fragment.keys()
        if overlap:  # one rule per kind: a kind claimed twice is a wiring mistake
            raise RuntimeError(f"kinds with two validators: {sorted(overlap)}")
        table.update(fragment)
    for kind in NEEDS_H_KINDS - jobs.OWN_THREAD_KINDS:  # relay.md §9 item 1: thread ancestry
        table[kind] = with_thread_rules(table.get(kind))
    return table


VALIDATORS: dict[int, Validator] = _merge()

__all__ = ["VALIDATORS", "KindRules", "Plan", "Validator"]
