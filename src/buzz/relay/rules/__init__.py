"""Per-kind ingest rules (relay.md §9, §10, §4.5, §4.8): one module per family of kinds, each
exporting a `VALIDATORS` fragment; this package merges them into the one table the pipeline
reads. Adding a rule means adding a module (or a row), never a branch in the pipeline.
"""

from __future__ import annotations

from buzz.relay.rules import deletion, pending, profile
from buzz.relay.rules.base import KindRules, Plan, Validator

_FRAGMENTS = (pending.VALIDATORS, profile.VALIDATORS, deletion.VALIDATORS)


def _merge() -> dict[int, Validator]:
    table: dict[int, Validator] = {}
    for fragment in _FRAGMENTS:
        table.update(fragment)  # later fragments replace "pending" placeholders
    return table


VALIDATORS: dict[int, Validator] = _merge()

__all__ = ["VALIDATORS", "KindRules", "Plan", "Validator"]
