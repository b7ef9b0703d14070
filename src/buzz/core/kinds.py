"""The kind registry: one table of every kind the relay knows, and the range predicates.

Source rules: relay.md §3.1 (storage classes by range), §3.2 (the first-release registry),
§5.1 (visibility sets), §4.2 (place: where a kind's channel comes from), §11 (searchable).
Every path (ingest, read gates, search, fan-out) reads these tables; nothing re-states them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class StorageClass(Enum):
    """relay.md §3.1."""

    REGULAR = "regular"
    REPLACEABLE = "replaceable"
    EPHEMERAL = "ephemeral"
    ADDRESSABLE = "addressable"


class Place(Enum):
    """Where an event's channel comes from (relay.md §3.2 "Place", §4.2)."""

    G = "global-only"  # channel forced to NULL even with an h tag
    H = "needs-h"  # channel from the h tag; required
    T = "target"  # channel of the target event (reactions, deletions)
    DM = "dm"  # §4.8
    OPT_H = "optional-h"  # ephemeral kinds: h when present
    STATE = "channel-state"  # relay-emitted 39000-39003; channel set by the relay
    NONE = "none"  # never accepted from EVENT (reserved, AUTH)


class Scope(Enum):
    """Write scope a session needs (relay.md §3.2 "Scope", §7.3 item 5)."""

    M_W = "messages:write"
    M_W_EPH = "messages:write (scoped sessions only)"
    U_W = "users:write"
    C_R = "channels:read"
    C_W = "channels:write"
    A_C = "admin:channels"
    R_W = "repos:write"
    RELAY = "relay"  # only the relay key emits it
    RESERVED = "reserved"  # refused in the first release
    AUTH = "auth"  # NIP-42 only, refused in EVENT


REGULAR, REPLACEABLE, EPHEMERAL, ADDRESSABLE = (
    StorageClass.REGULAR,
    StorageClass.REPLACEABLE,
    StorageClass.EPHEMERAL,
    StorageClass.ADDRESSABLE,
)
G, H, T, DM, OPT_H, STATE, NONE = Place.G, Place.H, Place.T, Place.DM, Place.OPT_H, Place.STATE, Place.NONE
M_W, M_W_EPH, U_W, C_R, C_W, A_C, R_W = (
    Scope.M_W,
    Scope.M_W_EPH,
    Scope.U_W,
    Scope.C_R,
    Scope.C_W,
    Scope.A_C,
    Scope.R_W,
)
RELAY, RESERVED, AUTH = Scope.RELAY, Scope.RESERVED, Scope.AUTH


# -- relay.md §3.1: classes are ranges ---------------------------------------------------------
def is_replaceable(kind: int) -> bool:
    return kind in (0, 3, 41) or 10000 <= kind <= 19999


def is_ephemeral(kind: int) -> bool:
    return 20000 <= kind <= 29999


def is_addressable(kind: int) -> bool:
    return 30000 <= kind <= 39999


def storage_class(kind: int) -> StorageClass:
    """The storage class §3.1 computes from the kind number alone."""
    if is_replaceable(kind):
        return REPLACEABLE
    if is_ephemeral(kind):
        return EPHEMERAL
    if is_addressable(kind):
        return ADDRESSABLE
    return REGULAR


@dataclass(frozen=True, slots=True)
class KindInfo:
    """One registry row: number, name, storage class, visibility sets, write scope, place."""

    kind: int
    name: str
    storage: StorageClass
    sets: frozenset[str]  # subset of {"AO", "PG", "RG", "SG", "EG"} (relay.md §5.1)
    scope: Scope
    place: Place


# (kind, name, class, visibility sets, write scope, place) — relay.md §3.2, one row per kind.
_TABLE: tuple[tuple[int, str, StorageClass, str, Scope, Place], ...] = (
    (0, "profile", REPLACEABLE, "", U_W, G),
    (1, "text note", REGULAR, "", M_W, G),
    (3, "contact list", REPLACEABLE, "", U_W, G),
    (5, "deletion", REGULAR, "", M_W, T),
    (7, "reaction", REGULAR, "", M_W, T),
    (9, "stream message", REGULAR, "", M_W, H),
    (1059, "gift wrap", REGULAR, "PG", M_W, G),
    (1617, "git patch", REGULAR, "", M_W, G),
    (1618, "git pull request", REGULAR, "", M_W, G),
    (1621, "git issue", REGULAR, "", M_W, G),
    (1630, "git status open", REGULAR, "", M_W, G),
    (1631, "git status applied", REGULAR, "", M_W, G),
    (1632, "git status closed", REGULAR, "", M_W, G),
    (1633, "git status draft", REGULAR, "", M_W, G),
    (1984, "report", REGULAR, "", M_W, G),
    (9000, "put user", REGULAR, "", A_C, H),
    (9001, "remove user", REGULAR, "", A_C, H),
    (9002, "edit metadata", REGULAR, "", C_W, H),
    (9005, "delete event", REGULAR, "", M_W, H),
    (9007, "create group", REGULAR, "", C_W, H),
    (9008, "delete group", REGULAR, "", A_C, H),
    (9009, "create invite", REGULAR, "", RESERVED, NONE),
    (9021, "join request", REGULAR, "", C_R, H),
    (9022, "leave request", REGULAR, "", C_R, H),
    (9035, "identity archive request", REGULAR, "", U_W, G),
    (9036, "identity unarchive request", REGULAR, "", U_W, G),
    (10000, "mute list", REPLACEABLE, "", U_W, G),
    (10001, "pin list", REPLACEABLE, "", U_W, G),
    (10002, "relay list", REPLACEABLE, "", U_W, G),
    (10003, "bookmark list", REPLACEABLE, "", U_W, G),
    (10030, "emoji list", REPLACEABLE, "", U_W, G),
    (10100, "agent profile", REPLACEABLE, "", U_W, G),
    (20001, "presence", EPHEMERAL, "", M_W_EPH, OPT_H),
    (20002, "typing indicator", EPHEMERAL, "", M_W_EPH, OPT_H),
    (22242, "auth", EPHEMERAL, "", AUTH, NONE),
    (24200, "agent observer frame", EPHEMERAL, "PG", M_W_EPH, OPT_H),
    (30000, "follow set", ADDRESSABLE, "", U_W, G),
    (30003, "bookmark set", ADDRESSABLE, "", U_W, G),
    (30023, "long-form article", ADDRESSABLE, "", M_W, G),
    (30030, "emoji set", ADDRESSABLE, "", U_W, G),
    (30078, "app data", ADDRESSABLE, "", U_W, G),
    (30174, "agent engram", ADDRESSABLE, "EG", U_W, G),
    (30175, "persona", ADDRESSABLE, "SG", U_W, G),
    (30176, "team", ADDRESSABLE, "", U_W, G),
    (30177, "managed agent", ADDRESSABLE, "", U_W, G),
    (30178, "team catalog", ADDRESSABLE, "SG", U_W, G),
    (30179, "private managed agent", ADDRESSABLE, "AO", U_W, G),
    (30300, "event reminder", ADDRESSABLE, "AO", U_W, G),
    (30315, "user status", ADDRESSABLE, "", U_W, G),
    (30350, "push lease", ADDRESSABLE, "AO", U_W, G),
    (30617, "git repository announcement", ADDRESSABLE, "", R_W, G),
    (30620, "workflow definition", ADDRESSABLE, "", M_W, H),
    (39000, "group metadata", ADDRESSABLE, "", RELAY, STATE),
    (39001, "group admins", ADDRESSABLE, "", RELAY, STATE),
    (39002, "group members", ADDRESSABLE, "", RELAY, STATE),
    (39003, "group roles", ADDRESSABLE, "", RELAY, STATE),
    (40002, "stream message v2", REGULAR, "", M_W, H),
    (40003, "message edit", REGULAR, "", M_W, H),
    (40004, "pinned", REGULAR, "", M_W, H),
    (40005, "bookmarked", REGULAR, "", M_W, H),
    (40006, "scheduled", REGULAR, "", M_W, H),
    (40007, "reminder", REGULAR, "", M_W, H),
    (40008, "diff message", REGULAR, "", M_W, H),
    (40099, "system message", REGULAR, "", M_W, H),
    (40100, "canvas", REGULAR, "", C_W, H),
    (41001, "DM created", REGULAR, "", RELAY, DM),
    (41010, "DM open", REGULAR, "", M_W, DM),
    (41011, "DM add member", REGULAR, "", M_W, DM),
    (41012, "DM hide", REGULAR, "", M_W, DM),
    (43001, "job request", REGULAR, "", RESERVED, NONE),
    (43002, "job accepted", REGULAR, "", RESERVED, NONE),
    (43003, "job progress", REGULAR, "", RESERVED, NONE),
    (43004, "job result", REGULAR, "", RESERVED, NONE),
    (43005, "job cancel", REGULAR, "", RESERVED, NONE),
    (43006, "job error", REGULAR, "", RESERVED, NONE),
    (44100, "member added notice", REGULAR, "PG", RELAY, G),
    (44101, "member removed notice", REGULAR, "PG", RELAY, G),
    (44200, "agent turn metric", REGULAR, "PG,RG", M_W, G),
    (45001, "forum post", REGULAR, "", M_W, H),
    (45002, "forum vote", REGULAR, "", M_W, H),
    (45003, "forum comment", REGULAR, "", M_W, H),
    (46001, "workflow triggered", REGULAR, "", RELAY, H),
    (46002, "step started", REGULAR, "", RELAY, H),
    (46003, "step completed", REGULAR, "", RELAY, H),
    (46004, "step failed", REGULAR, "", RELAY, H),
    (46005, "workflow completed", REGULAR, "", RELAY, H),
    (46006, "workflow failed", REGULAR, "", RELAY, H),
    (46007, "workflow cancelled", REGULAR, "", RELAY, H),
    (46010, "workflow approval requested", REGULAR, "", RELAY, H),
    (46011, "workflow approval granted", REGULAR, "", RELAY, H),
    (46012, "workflow approval denied", REGULAR, "", RELAY, H),
    (48100, "huddle started", REGULAR, "", C_W, H),
    (48101, "huddle participant joined", REGULAR, "", RELAY, H),
    (48102, "huddle participant left", REGULAR, "", RELAY, H),
    (48103, "huddle ended", REGULAR, "", C_W, H),
    (48106, "huddle guidelines", REGULAR, "", C_W, H),
)

REGISTRY: dict[int, KindInfo] = {
    k: KindInfo(k, name, cls, frozenset(s for s in sets.split(",") if s), scope, place)
    for k, name, cls, sets, scope, place in _TABLE
}


def _with_set(tag: str) -> frozenset[int]:
    return frozenset(k for k, info in REGISTRY.items() if tag in info.sets)


def _with_place(place: Place) -> frozenset[int]:
    return frozenset(k for k, info in REGISTRY.items() if info.place is place)


# -- the named sets every path uses (relay.md §3.2 item 3, §5.1, §11) --------------------------
AUTHOR_ONLY_KINDS = _with_set("AO")
P_GATED_KINDS = _with_set("PG")
RESULT_GATED_KINDS = _with_set("RG")
SHARED_GATED_KINDS = _with_set("SG")
ENGRAM_KIND = 30174
GLOBAL_ONLY_KINDS = _with_place(Place.G)
NEEDS_H_KINDS = _with_place(Place.H)
RELAY_ONLY_KINDS = frozenset(k for k, info in REGISTRY.items() if info.scope is Scope.RELAY)
RESERVED_KINDS = frozenset(k for k, info in REGISTRY.items() if info.scope is Scope.RESERVED)
MEMBERSHIP_NOTICE_KINDS = frozenset({44100, 44101})
NON_SEARCHABLE_KINDS = P_GATED_KINDS | AUTHOR_ONLY_KINDS | {ENGRAM_KIND}
# Every kind `visibility.visible_by_sets` may refuse; any other kind passes it for every reader.
SETS_GATED_KINDS = AUTHOR_ONLY_KINDS | SHARED_GATED_KINDS | P_GATED_KINDS | {ENGRAM_KIND}
AUTH_KIND = 22242
HTTP_AUTH_KIND = 27235
DELETION_KIND = 5


def lookup(kind: int) -> KindInfo | None:
    """The registry row of `kind`, or None for an unknown kind."""
    return REGISTRY.get(kind)


def is_known(kind: int) -> bool:
    """Known = registered and not reserved (relay.md §3.2 item 1)."""
    info = REGISTRY.get(kind)
    return info is not None and info.scope is not Scope.RESERVED


def is_searchable(kind: int) -> bool:
    """relay.md §11 item 1."""
    return kind not in NON_SEARCHABLE_KINDS
