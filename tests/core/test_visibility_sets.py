"""`SETS_GATED_KINDS` is exactly the kinds `visible_by_sets` can refuse (docs/decisions.md 102):
COUNT skips the per-event predicate for filters outside it, so a kind missing from the set
would be counted for readers who may not see it. Checked against every kind of the registry, gated or not."""

from __future__ import annotations

import pytest

from buzz.core.event import Event
from buzz.core.filters import Filter
from buzz.core.kinds import REGISTRY, SETS_GATED_KINDS
from buzz.core.visibility import sets_admit_all, visible_by_sets

AUTHOR = "a" * 64
OTHER = "b" * 64


def _event(kind: int) -> Event:
    # No `p` and no shared marker: the strictest case every gate may refuse.
    return Event("0" * 64, AUTHOR, 1_700_000_000, kind, [], "", "0" * 128)


@pytest.mark.parametrize("kind", sorted(REGISTRY))
def test_ungated_kinds_pass_for_every_reader(kind: int) -> None:
    refused = [r for r in (None, OTHER) if not visible_by_sets(_event(kind), r)]
    if kind in SETS_GATED_KINDS:
        assert refused, f"kind {kind} is in SETS_GATED_KINDS but no reader is refused"
    else:
        assert refused == [], f"kind {kind} refuses {refused} but is not in SETS_GATED_KINDS"


def test_sets_admit_all_needs_named_ungated_kinds() -> None:
    gated = min(SETS_GATED_KINDS)
    assert sets_admit_all([Filter(kinds=frozenset({9}))])
    assert sets_admit_all([Filter(kinds=frozenset({9})), Filter(kinds=frozenset({0, 7}))])
    assert not sets_admit_all([Filter()])  # no kinds: any kind may match
    assert not sets_admit_all([Filter(kinds=frozenset({9, gated}))])
    assert not sets_admit_all([Filter(kinds=frozenset({9})), Filter(kinds=None)])
