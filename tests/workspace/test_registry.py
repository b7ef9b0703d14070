"""Kind registry completeness (relay.md §3, §5.1, §11; agents.md §3.1; §18 items 15, 16, 100, 102).

Three independent sources are checked against `buzz.core.kinds.REGISTRY`: our registry table
(docs/kinds.md, relay.md §3.2, parsed), block/buzz's kinds.json (with the deliberate
differences of `buzz.core.kinds_differences`), and the relay over WebSocket (unknown, reserved
and relay-only kinds refused with their exact messages).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from buzz.core import kinds
from buzz.core.event import Event
from buzz.core.kinds import REGISTRY, Place, Scope, StorageClass
from buzz.core.kinds_differences import (
    ADDITIONS,
    DELIBERATE_DIFFERENCES,
    PLACE_DIFFERENCES,
    SCOPE_DIFFERENCES,
)
from tests.support.relay import Identity, RunningRelay
from tests.support.vectors import VECTORS_DIR

KINDS_MD = (Path(__file__).resolve().parents[2] / "docs" / "kinds.md").read_text()
KINDS_JSON: dict[str, Any] = json.loads((VECTORS_DIR / "kinds.json").read_text())
BUZZ = {e["kind"]: e for e in KINDS_JSON["kinds"]}

CLASS = {
    "N": StorageClass.REGULAR,
    "R": StorageClass.REPLACEABLE,
    "E": StorageClass.EPHEMERAL,
    "A": StorageClass.ADDRESSABLE,
}
SCOPE = {
    "u:w": Scope.U_W,
    "m:w": Scope.M_W,
    "c:r": Scope.C_R,
    "c:w": Scope.C_W,
    "a:c": Scope.A_C,
    "r:w": Scope.R_W,
    "(m:w)": Scope.M_W_EPH,
    "relay": Scope.RELAY,
    "reserved": Scope.RESERVED,
    "token": Scope.AUTH,
}
PLACE = {
    "G": Place.G,
    "H": Place.H,
    "T": Place.T,
    "DM": Place.DM,
    "h?": Place.OPT_H,
    "channel": Place.STATE,
    "": Place.NONE,
}


def _spec_rows() -> dict[int, tuple[StorageClass, frozenset[str], Scope, Place]]:
    """docs/kinds.md (relay.md §3.2): one entry per kind number (ranges like `1630–1633` expanded)."""
    section = KINDS_MD.split("| Kind | Name |", 1)[1].split("\n## Ranges", 1)[0]
    rows: dict[int, tuple[StorageClass, frozenset[str], Scope, Place]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 7 or not re.fullmatch(r"\d+(–\d+)?", cells[0]):
            continue
        first, _, last = cells[0].partition("–")
        sets = frozenset(s.strip() for s in cells[3].split(",") if s.strip())
        scope = SCOPE[cells[4].split(";")[0].strip()]  # `c:w; a:c if any archived tag` → c:w
        for kind in range(int(first), int(last or first) + 1):
            assert kind not in rows, kind
            rows[kind] = (CLASS[cells[2]], sets, scope, PLACE[cells[5]])
    return rows


SPEC = _spec_rows()


def _spec_ranges() -> list[tuple[int, int, StorageClass, frozenset[str], Scope, Place]]:
    """docs/kinds.md "Ranges": one entry per range row."""
    section = KINDS_MD.split("## Ranges", 1)[1].split("## Kinds the operator opens", 1)[0]
    out = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 7 or not re.fullmatch(r"\d+–\d+", cells[0]):
            continue
        first, _, last = cells[0].partition("–")
        sets = frozenset(s.strip() for s in cells[3].split(",") if s.strip())
        out.append((int(first), int(last), CLASS[cells[2]], sets, SCOPE[cells[4]], PLACE[cells[5]]))
    return out


def test_ranges_equal_kinds_md() -> None:
    documented = _spec_ranges()
    assert documented == [
        (r.first, r.last, r.template.storage, r.template.sets, r.template.scope, r.template.place)
        for r in kinds.RANGES
    ]
    # A kind of a range without its own row is known and takes the range's row.
    for first, last, storage, sets, scope, place in documented:
        for kind in (first, first + 133, last):
            if kind not in REGISTRY:
                info = kinds.lookup(kind)
                assert info is not None and info.kind == kind, kind
                assert (info.storage, info.sets, info.scope, info.place) == (storage, sets, scope, place)


# -- relay.md §3.2, parsed ---------------------------------------------------------------------
def test_registry_has_exactly_the_kinds_of_relay_md() -> None:
    assert len(SPEC) > 90
    assert set(REGISTRY) == set(SPEC)


@pytest.mark.parametrize("kind", sorted(SPEC), ids=str)
def test_registry_row_equals_relay_md(kind: int) -> None:
    info = REGISTRY[kind]
    assert (info.storage, info.sets, info.scope, info.place) == SPEC[kind]


# -- range facts (relay.md §3.1, §3.2 items 3–6, §5.1, §11) ------------------------------------
def test_every_addressable_kind_is_in_the_addressable_range() -> None:
    for kind, info in REGISTRY.items():
        assert (info.storage is StorageClass.ADDRESSABLE) == (30000 <= kind <= 39999), kind
        assert (info.storage is StorageClass.EPHEMERAL) == (20000 <= kind <= 29999), kind
        assert (info.storage is StorageClass.REPLACEABLE) == (kind in (0, 3, 41) or 10000 <= kind <= 19999), (
            kind
        )


def test_replaceable_kinds_are_global_only() -> None:
    # §3.1 item 2: the replaceable key has no channel, so every replaceable kind is global-only.
    assert {
        k for k, i in REGISTRY.items() if i.storage is StorageClass.REPLACEABLE
    } <= kinds.GLOBAL_ONLY_KINDS


def test_message_like_kinds_are_regular() -> None:
    # §3.2 item 5: a new event per message, reply, edit, post or vote.
    for kind in (9, 40002, 40003, 45001, 45002, 45003):
        assert REGISTRY[kind].storage is StorageClass.REGULAR, kind
    assert (REGISTRY[10001].name, REGISTRY[10002].name) == ("pin list", "relay list")
    for kind in (10004, 30001, 30002, 48104, 48105, 49001):
        assert kind not in REGISTRY, kind


def test_named_sets_and_places() -> None:
    workflow_records = {*range(46001, 46013), 46020, 46030, 46031}  # workflows.md §2.2 item 6
    assert {1059, 24200, 30024, 30174, 30179, 30300, 30350, 44100, 44101, 44200} | workflow_records == (
        kinds.NON_SEARCHABLE_KINDS
    )
    assert {9009} == kinds.RESERVED_KINDS
    assert {
        39000,
        39001,
        39002,
        39003,
        41001,
        44100,
        44101,
        *range(46001, 46008),
        46010,
        46011,
        46012,
        48101,
        48102,
    } == kinds.RELAY_ONLY_KINDS
    # agents.md §3.1: the kinds that require `h` (and jobs spec §12: 30181).
    assert {
        9, 9000, 9001, 9002, 9005, 9007, 9008, 9021, 9022, 30181, 30620, *range(40002, 40009), 40099, 40100, *range(43001, 43007),
        45001, 45002, 45003, *range(46001, 46008), 46010, 46011, 46012, 48100, 48101, 48102, 48103, 48106,
    } == kinds.NEEDS_H_KINDS  # fmt: skip
    assert not kinds.GLOBAL_ONLY_KINDS & kinds.NEEDS_H_KINDS


# -- block/buzz kinds.json ----------------------------------------------------------------------
_BUZZ_SETS = {
    "AUTHOR_ONLY_KINDS": "AO",
    "P_GATED_KINDS": "PG",
    "RESULT_GATED_KINDS": "RG",
    "SHARED_GATED_KINDS": "SG",
}
_BUZZ_CLASS = {**{c.value: c for c in StorageClass}, "parameterized_replaceable": StorageClass.ADDRESSABLE}
_OUR_SCOPE = {Scope.M_W: "messages:write", Scope.U_W: "users:write", Scope.C_R: "channels:read", Scope.C_W: "channels:write", Scope.A_C: "admin:channels", Scope.R_W: "repos:write"}  # fmt: skip
BOTH = sorted(set(REGISTRY) & set(BUZZ))


def _buzz_class_and_sets(kind: int) -> tuple[StorageClass, frozenset[str]]:
    entry = BUZZ[kind]
    sets = {_BUZZ_SETS[s] for s in entry["sets"]} | (
        {"EG"} if "engram_read_gate" in entry["flags"] else set()
    )
    return _BUZZ_CLASS[entry["storage_class"]], frozenset(sets)


def _buzz_scope(kind: int) -> str | None:
    scope = BUZZ[kind]["scope"]  # 9002: "channels:write (admin:channels if any tag named 'archived' …)"
    return None if scope is None else scope.split(" (", 1)[0]


def _buzz_place(kind: int) -> str | None:
    flags = BUZZ[kind]["flags"]
    return "G" if "ingest_global_only" in flags else "H" if "ingest_requires_h" in flags else None


def _our_place(kind: int) -> str | None:
    return {Place.G: "G", Place.H: "H"}.get(REGISTRY[kind].place)


def test_every_registered_kind_is_in_kinds_json_or_an_addition() -> None:
    assert set(REGISTRY) - set(ADDITIONS) <= set(BUZZ)
    assert not set(ADDITIONS) & set(BUZZ)  # an addition kinds.json lists is no addition
    assert set(ADDITIONS) <= set(REGISTRY)


@pytest.mark.parametrize("kind", BOTH, ids=str)
def test_agrees_with_kinds_json_or_is_a_listed_difference(kind: int) -> None:
    info = REGISTRY[kind]
    if kind not in DELIBERATE_DIFFERENCES:
        assert _buzz_class_and_sets(kind) == (info.storage, info.sets)
    if kind not in SCOPE_DIFFERENCES:
        assert _buzz_scope(kind) == _OUR_SCOPE.get(info.scope)
    if kind not in PLACE_DIFFERENCES:
        assert _buzz_place(kind) == _our_place(kind)


def test_listed_differences_are_real() -> None:
    for kind in DELIBERATE_DIFFERENCES:
        assert kind in BOTH and _buzz_class_and_sets(kind) != (REGISTRY[kind].storage, REGISTRY[kind].sets), (
            kind
        )
    for kind in SCOPE_DIFFERENCES:
        assert kind in BOTH and _buzz_scope(kind) != _OUR_SCOPE.get(REGISTRY[kind].scope), kind
    for kind in PLACE_DIFFERENCES:
        assert kind in BOTH and _buzz_place(kind) != _our_place(kind), kind


# -- over the wire (relay.md §3.2 items 1, 2; §8 item 6) -----------------------------------------
UNKNOWN = sorted({k for k in BUZZ if not kinds.is_known(k)} | {2, 4, 1063, 10004, 48104, 48105, 49001, 65535})


async def test_unknown_and_reserved_kinds_are_refused(sqlite_relay: RunningRelay, alice: Identity) -> None:
    assert {9009, 41, 49001, 30622} <= set(UNKNOWN)
    async with sqlite_relay.client(alice) as c:
        for kind in UNKNOWN:
            result = await c.publish(Event.create(alice.secret, kind, "", [["d", "x"]]))
            assert (kind, result.accepted, result.message) == (kind, False, "restricted: unknown event kind")


async def test_relay_only_kinds_are_refused_from_clients(sqlite_relay: RunningRelay, alice: Identity) -> None:
    async with sqlite_relay.client(alice) as c:
        for kind in sorted(kinds.RELAY_ONLY_KINDS):
            result = await c.publish(Event.create(alice.secret, kind, "", [["d", "x"], ["h", "x"]]))
            expected = (
                "invalid: membership notifications are relay-signed only"
                if kind in (44100, 44101)
                else "restricted: relay-only kind"
            )
            assert (kind, result.accepted, result.message) == (kind, False, expected)
