"""The kind registry: one table of every kind the relay knows, and the range predicates.

Source rules: relay.md §3.1 (storage classes by range), §3.2 (the first-release registry),
§5.1 (visibility sets), §4.2 (place: where a kind's channel comes from), §11 (searchable);
issue 25 item 7 (the NIP-01 ephemeral range and the common kinds of third-party clients) and
the operator's `BUZZ_OPEN_KINDS` (kinds opened without code, `parse_open_kinds`).
Every path (ingest, read gates, search, fan-out) reads these tables; nothing re-states them.

`KindTable` is the table a relay serves: the built-in rows, the ranges, and the kinds its
operator opened. `BUILTIN` is the table without operator kinds; the module-level names
(`lookup`, `is_known`, the named sets) are its.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from buzz.core.limits import DEFAULT_MAX_TAGS


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
    AUTH = "auth"  # an authorization token (NIP-42, NIP-98, Blossom): never published, refused in EVENT


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
    (6, "repost", REGULAR, "", M_W, G),
    (7, "reaction", REGULAR, "", M_W, T),
    (9, "stream message", REGULAR, "", M_W, H),
    (16, "generic repost", REGULAR, "", M_W, G),
    (1059, "gift wrap", REGULAR, "PG", M_W, G),
    (1111, "comment", REGULAR, "", M_W, G),
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
    (10050, "DM relay list", REPLACEABLE, "", U_W, G),
    (10063, "blossom server list", REPLACEABLE, "", U_W, G),
    (10100, "agent profile", REPLACEABLE, "", U_W, G),
    (20001, "presence", EPHEMERAL, "", M_W_EPH, OPT_H),
    (20002, "typing indicator", EPHEMERAL, "", M_W_EPH, OPT_H),
    (22242, "auth", EPHEMERAL, "", AUTH, NONE),
    (24200, "agent observer frame", EPHEMERAL, "PG", M_W_EPH, OPT_H),
    (24242, "blossom auth", EPHEMERAL, "", AUTH, NONE),
    (27235, "HTTP auth", EPHEMERAL, "", AUTH, NONE),
    (30000, "follow set", ADDRESSABLE, "", U_W, G),
    (30003, "bookmark set", ADDRESSABLE, "", U_W, G),
    (30023, "long-form article", ADDRESSABLE, "", M_W, G),
    (30024, "long-form draft", ADDRESSABLE, "AO", M_W, G),
    (30030, "emoji set", ADDRESSABLE, "", U_W, G),
    (30078, "app data", ADDRESSABLE, "", U_W, G),
    (30174, "agent engram", ADDRESSABLE, "EG", U_W, G),
    (30175, "persona", ADDRESSABLE, "SG", U_W, G),
    (30176, "team", ADDRESSABLE, "", U_W, G),
    (30177, "managed agent", ADDRESSABLE, "", U_W, G),
    (30178, "team catalog", ADDRESSABLE, "SG", U_W, G),
    (30179, "private managed agent", ADDRESSABLE, "AO", U_W, G),
    (30181, "agent work status", ADDRESSABLE, "", M_W, H),  # jobs spec §12: the channel's readers only
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
    (43001, "job request", REGULAR, "", M_W, H),
    (43002, "job accepted", REGULAR, "", M_W, H),
    (43003, "job progress", REGULAR, "", M_W, H),
    (43004, "job result", REGULAR, "", M_W, H),
    (43005, "job cancel", REGULAR, "", M_W, H),
    (43006, "job failed", REGULAR, "", M_W, H),
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
    (46020, "workflow manual trigger", REGULAR, "", M_W, OPT_H),  # channel: the workflow's (workflows.md §13)
    (46030, "workflow approval grant", REGULAR, "", M_W, OPT_H),  # channel: the approval's (§9.4)
    (46031, "workflow approval deny", REGULAR, "", M_W, OPT_H),
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


@dataclass(frozen=True, slots=True)
class KindRange:
    """Every kind from `first` to `last` (inclusive) that has no row of its own: one `template`
    (its `kind` is `first`; `KindTable.lookup` gives each kind its own number)."""

    first: int
    last: int
    template: KindInfo

    def __contains__(self, kind: object) -> bool:
        return isinstance(kind, int) and self.first <= kind <= self.last


# Issue 25 item 7: the NIP-01 ephemeral range, for the kinds no row claims (NIP-46 remote
# signing, app-specific signals): relayed live, never stored, channel-checked when they name
# one with `h`, visible to every reader of their scope. Auth tokens in the range (22242, 24242,
# 27235) have rows of their own and stay refused.
RANGES: tuple[KindRange, ...] = (
    KindRange(20000, 29999, KindInfo(20000, "ephemeral", EPHEMERAL, frozenset(), M_W_EPH, OPT_H)),
)


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
TOKEN_KINDS = frozenset(k for k, info in REGISTRY.items() if info.scope is Scope.AUTH)
MEMBERSHIP_NOTICE_KINDS = frozenset({44100, 44101})
# workflows.md §2.2 item 6: run records and workflow commands are not message text.
WORKFLOW_RECORD_KINDS = frozenset({*range(46001, 46013), 46020, 46030, 46031})
NON_SEARCHABLE_KINDS = P_GATED_KINDS | AUTHOR_ONLY_KINDS | {ENGRAM_KIND} | WORKFLOW_RECORD_KINDS
# Every kind `visibility.visible_by_sets` may refuse; any other kind passes it for every reader.
SETS_GATED_KINDS = AUTHOR_ONLY_KINDS | SHARED_GATED_KINDS | P_GATED_KINDS | {ENGRAM_KIND}
AUTH_KIND = 22242
HTTP_AUTH_KIND = 27235
DELETION_KIND = 5
GIFT_WRAP_KIND = 1059


# Tags per event (issue 24 item 11): an event of 25,000 tags cost every reader that parsed it
# (four REQs took the relay from 92 MB to 2.2 GB). Lists that name people, events or emoji
# one by one may hold a frame's worth (a `p` tag is ~72 bytes: 512 KiB holds ~7,300); every
# other kind holds at most limits.DEFAULT_MAX_TAGS. Relay-signed events are not checked.
LIST_MAX_TAGS = 10_000
TAG_CAPS: dict[int, int] = {k: LIST_MAX_TAGS for k in (3, 10000, 10001, 10003, 10030, 30000, 30003, 30030)}


# -- the operator's kinds (BUZZ_OPEN_KINDS) ------------------------------------------------------
# The gates an operator may give an opened kind: the relay.md §5.1 sets, by the names the
# operator documentation uses. Shared-gated and engram gates need tag rules of their own and
# stay with the kinds that define them.
OPEN_KIND_GATES: dict[str, frozenset[str]] = {
    "public": frozenset(),
    "author-only": frozenset({"AO"}),
    "p-gated": frozenset({"PG"}),
}
_CLASS_NAMES = {c.value: c for c in StorageClass}
_OPENED_SCOPE = {REGULAR: M_W, REPLACEABLE: U_W, ADDRESSABLE: U_W, EPHEMERAL: M_W_EPH}


def parse_open_kinds(text: str) -> tuple[KindRange, ...]:
    """`BUZZ_OPEN_KINDS`: comma-separated `<kind>[-<last>]:<class>:<gate>` entries, e.g.
    `31922-31925:addressable:public, 5000-5999:regular:author-only`. The class must be the
    one NIP-01 gives every kind of the entry (the store keys versions by it); the gate is
    `public`, `author-only` or `p-gated`. An opened kind is global (an ephemeral one may name
    a channel with `h`). Raises ValueError naming the entry for anything else: a kind the
    built-in table has a row for, overlapping entries, an unknown class or gate."""
    out: list[KindRange] = []
    for raw in text.split(","):
        entry = raw.strip()
        if not entry:
            continue
        parts = [p.strip() for p in entry.split(":")]
        if len(parts) != 3:
            raise ValueError(f"{entry!r}: expected <kind>[-<last>]:<class>:<gate>")
        span, class_name, gate = parts
        first_s, dash, last_s = span.partition("-")
        if not first_s.isdigit() or (dash and not last_s.isdigit()):
            raise ValueError(f"{entry!r}: {span!r} is not a kind number or range")
        first, last = int(first_s), int(last_s if dash else first_s)
        if not 0 <= first <= last <= 65535:
            raise ValueError(f"{entry!r}: kinds are 0-65535, first <= last")
        storage = _CLASS_NAMES.get(class_name)
        if storage is None:
            raise ValueError(f"{entry!r}: class must be one of {', '.join(_CLASS_NAMES)}")
        if gate not in OPEN_KIND_GATES:
            raise ValueError(f"{entry!r}: gate must be one of {', '.join(OPEN_KIND_GATES)}")
        wrong = next((k for k in range(first, last + 1) if storage_class(k) is not storage), None)
        if wrong is not None:
            raise ValueError(
                f"{entry!r}: kind {wrong} is {storage_class(wrong).value} by its number (NIP-01), not {class_name}"
            )
        taken = sorted(k for k in REGISTRY if first <= k <= last)
        if taken:
            raise ValueError(
                f"{entry!r}: kind {taken[0]} ({REGISTRY[taken[0]].name}) is built in; "
                "BUZZ_OPEN_KINDS opens only kinds the relay does not know"
            )
        clash = next((r for r in out if r.first <= last and first <= r.last), None)
        if clash is not None:
            raise ValueError(f"{entry!r}: overlaps {clash.first}-{clash.last}")
        place = OPT_H if storage is EPHEMERAL else G
        info = KindInfo(
            first, "opened by the operator", storage, OPEN_KIND_GATES[gate], _OPENED_SCOPE[storage], place
        )
        out.append(KindRange(first, last, info))
    return tuple(out)


class KindTable:
    """The kinds one relay serves: the built-in rows, the operator's opened ranges (which may
    give kinds of the built-in ephemeral range their own gate), then the built-in ranges. The
    named gate sets include the opened kinds that carry a gate."""

    __slots__ = (
        "_ranges",
        "author_only",
        "opened",
        "p_gated",
        "result_gated",
        "sets_gated",
        "shared_gated",
    )

    def __init__(self, opened: tuple[KindRange, ...] = ()) -> None:
        self.opened = opened
        self._ranges = (*opened, *RANGES)

        def gated(tag: str) -> frozenset[int]:
            return frozenset(k for r in opened if tag in r.template.sets for k in range(r.first, r.last + 1))

        self.author_only = AUTHOR_ONLY_KINDS | gated("AO")
        self.p_gated = P_GATED_KINDS | gated("PG")
        self.result_gated = RESULT_GATED_KINDS
        self.shared_gated = SHARED_GATED_KINDS
        self.sets_gated = SETS_GATED_KINDS | self.author_only | self.p_gated

    def lookup(self, kind: int) -> KindInfo | None:
        """The row of `kind` (a range's template with this number), or None for an unknown kind."""
        info = REGISTRY.get(kind)
        if info is not None:
            return info
        for r in self._ranges:
            if kind in r:
                return KindInfo(
                    kind,
                    r.template.name,
                    r.template.storage,
                    r.template.sets,
                    r.template.scope,
                    r.template.place,
                )
        return None

    def max_tags(self, kind: int) -> int:
        """The most tags an event of `kind` may carry (`TAG_CAPS`, else DEFAULT_MAX_TAGS)."""
        return TAG_CAPS.get(kind, DEFAULT_MAX_TAGS)

    def is_known(self, kind: int) -> bool:
        """Known = in the table and not reserved (relay.md §3.2 item 1)."""
        info = self.lookup(kind)
        return info is not None and info.scope is not Scope.RESERVED


BUILTIN = KindTable()


def lookup(kind: int) -> KindInfo | None:
    """The built-in row of `kind` (a range's included), or None for an unknown kind."""
    return BUILTIN.lookup(kind)


def is_known(kind: int) -> bool:
    """Known = registered and not reserved (relay.md §3.2 item 1)."""
    return BUILTIN.is_known(kind)


def is_searchable(kind: int) -> bool:
    """relay.md §11 item 1. Only built-in rows are indexed: a kind the operator opened is
    stored and served but never searched (its gate is not the index's to know)."""
    return kind in REGISTRY and kind not in NON_SEARCHABLE_KINDS
