"""The kind registry (relay.md §3.1, §3.2 item 3, §5.1, §18 item 100) and block/buzz's kinds.json."""

from __future__ import annotations

import json
from typing import Any

import pytest

from buzz.core import kinds
from buzz.core.kinds import REGISTRY, StorageClass
from buzz.core.kinds_differences import DELIBERATE_DIFFERENCES
from tests.support.vectors import VECTORS_DIR

VECTORS = VECTORS_DIR
KINDS_JSON: dict[str, Any] = json.loads((VECTORS / "kinds.json").read_text())
BUZZ = {e["kind"]: e for e in KINDS_JSON["kinds"]}

# kinds.json names → our set tags; the engram gate is a flag there, a set here.
SET_NAMES = {
    "AUTHOR_ONLY_KINDS": "AO",
    "P_GATED_KINDS": "PG",
    "RESULT_GATED_KINDS": "RG",
    "SHARED_GATED_KINDS": "SG",
}
ENGRAM_FLAG = "engram_read_gate"
CLASS_NAMES = {
    "regular": StorageClass.REGULAR,
    "replaceable": StorageClass.REPLACEABLE,
    "ephemeral": StorageClass.EPHEMERAL,
    "parameterized_replaceable": StorageClass.ADDRESSABLE,
}


# -- relay.md §3.2 item 3 ------------------------------------------------------------------------
def test_no_duplicate_kinds() -> None:
    numbers = [row[0] for row in kinds._TABLE]
    assert len(numbers) == len(set(numbers))
    assert all(k == info.kind for k, info in REGISTRY.items())


def test_every_kind_fits_sixteen_bits() -> None:
    assert all(0 <= k <= 65535 for k in REGISTRY)


def test_ranges_disjoint_over_all_kinds() -> None:
    for k in range(65536):
        held = kinds.is_replaceable(k) + kinds.is_ephemeral(k) + kinds.is_addressable(k)
        assert held <= 1, k


@pytest.mark.parametrize("info", REGISTRY.values(), ids=lambda i: str(i.kind))
def test_row_class_matches_range(info: kinds.KindInfo) -> None:
    assert info.storage is kinds.storage_class(info.kind)
    if info.storage is StorageClass.ADDRESSABLE:
        assert 30000 <= info.kind <= 39999


def test_global_only_and_needs_h_disjoint() -> None:
    assert not kinds.GLOBAL_ONLY_KINDS & kinds.NEEDS_H_KINDS


def test_named_sets_match_relay_md_5_1() -> None:
    assert {30024, 30179, 30300, 30350} == kinds.AUTHOR_ONLY_KINDS  # 30024: issue 25, decision 170
    assert {1059, 24200, 44100, 44101, 44200} == kinds.P_GATED_KINDS
    assert {44200} == kinds.RESULT_GATED_KINDS
    assert {30175, 30178} == kinds.SHARED_GATED_KINDS
    assert REGISTRY[kinds.ENGRAM_KIND].sets == {"EG"}


def test_unregistered_and_reserved_kinds_unknown() -> None:
    # relay.md §3.2 items 1, 4, 6 and §18 items 15, 102.
    for k in (41, 1063, 48104, 48105, 49001, 9009):
        assert not kinds.is_known(k), k
    assert kinds.is_known(9)


# -- block/buzz kinds.json ---------------------------------------------------------------------
SHARED = sorted(set(REGISTRY) & set(BUZZ))


def test_kinds_json_entries_unique() -> None:
    assert len(BUZZ) == len(KINDS_JSON["kinds"])


def test_deliberate_differences_are_real() -> None:
    # An entry must name a shared kind that still disagrees; otherwise drop it.
    for k in DELIBERATE_DIFFERENCES:
        assert k in SHARED and _buzz_view(BUZZ[k]) != (REGISTRY[k].storage, REGISTRY[k].sets), k


def _buzz_view(entry: dict[str, Any]) -> tuple[StorageClass, frozenset[str]]:
    sets = {SET_NAMES[s] for s in entry["sets"]}
    if ENGRAM_FLAG in entry["flags"]:
        sets.add("EG")
    return CLASS_NAMES[entry["storage_class"]], frozenset(sets)


@pytest.mark.parametrize("kind", [k for k in SHARED if k not in DELIBERATE_DIFFERENCES], ids=str)
def test_agrees_with_kinds_json(kind: int) -> None:
    assert _buzz_view(BUZZ[kind]) == (REGISTRY[kind].storage, REGISTRY[kind].sets)


def test_kinds_json_class_matches_ranges() -> None:
    # Kinds we do not register still follow the §3.1 ranges in buzz (41 is replaceable).
    for k, entry in BUZZ.items():
        assert CLASS_NAMES[entry["storage_class"]] is kinds.storage_class(k), k
