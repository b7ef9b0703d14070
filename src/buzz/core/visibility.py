"""Who may read what: the per-event sets predicate and the filter gates.

Source rules: relay.md §5.2 (`event_is_shared`), §5.3 (per-event predicate; this module owns
items 2–5, the relay adds item 6, channel readability, and storage item 1), §5.4 (filter
gates, run on every filter without `#h`, in order p-gate → engram gate → author-only gate).
Every read path (stored REQ, live fan-out, ids lookups, COUNT, search, /query) calls these
two functions; none re-states a rule.

The history path (`POST /history`, issue 16 item 3, docs/decisions.md 81) is the one path that
serves superseded versions; `HISTORY_READERS` is its gate table and `history_visible` its
per-version predicate.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from buzz.core.errors import Restricted
from buzz.core.event import Event, Tags
from buzz.core.filters import Filter
from buzz.core.kinds import (
    AUTHOR_ONLY_KINDS,
    ENGRAM_KIND,
    P_GATED_KINDS,
    RESULT_GATED_KINDS,
    SETS_GATED_KINDS,
    SHARED_GATED_KINDS,
)

P_GATE_MESSAGE = "p-gated events require #p matching your pubkey"
ENGRAM_GATE_MESSAGE = "agent-engram reads require authors=[self] or #p=[self]"
AUTHOR_ONLY_GATE_MESSAGE = "author-only kinds require authors=[self]"


def event_is_shared(tags: Tags) -> bool:
    """Exactly one tag `["shared","true"]` and no other `shared` tag of any shape (relay.md §5.2).

    Fails closed on every inexact shape; does not rely on ingest validation having run.
    """
    n = 0
    for t in tags:
        if t[0] != "shared":
            continue
        if len(t) != 2 or t[1] != "true":
            return False
        n += 1
    return n == 1


def p_values(event: Event) -> frozenset[str]:
    """P(e): values of `p` tags with at least 2 elements (relay.md §1 item 2)."""
    return frozenset(event.tag_values("p"))


def sets_admit_all(filters: Iterable[Filter]) -> bool:
    """True when no event matching `filters` can fail `visible_by_sets`: every filter names its
    kinds and none of them is in SETS_GATED_KINDS (docs/decisions.md 102). COUNT then skips the
    per-event predicate and stays one SQL statement."""
    return all(f.kinds is not None and f.kinds.isdisjoint(SETS_GATED_KINDS) for f in filters)


def visible_by_sets(event: Event, reader: str | None) -> bool:
    """relay.md §5.3 items 2–5 for `reader` (None = unauthenticated, sees no gated event).

    The author is not exempt from the p-gate: an agent cannot read back its own 44200.
    """
    kind = event.kind
    if kind in AUTHOR_ONLY_KINDS and reader != event.pubkey:
        return False
    if kind in SHARED_GATED_KINDS and reader != event.pubkey and not event_is_shared(event.tags):
        return False
    if kind in P_GATED_KINDS and (reader is None or reader not in p_values(event)):
        return False
    return not (
        kind == ENGRAM_KIND and reader != event.pubkey and (reader is None or reader not in p_values(event))
    )


def author_or_p_target(event: Event, reader: str) -> bool:
    """The reader signed the version or is named by one of its `p` tags (for 30174: the
    agent or the owner its owner tag names, engram.md §11.1)."""
    return reader == event.pubkey or reader in p_values(event)


HistoryRule = Callable[[Event, str], bool]

HISTORY_READERS: Mapping[int, HistoryRule] = {ENGRAM_KIND: author_or_p_target}
"""The history gate table: the only kinds whose stored versions (superseded ones included) the
history path serves, each with who may read one version. Every other kind is refused there."""


def history_visible(event: Event, reader: str | None) -> bool:
    """May `reader` read this stored version (head or superseded) through the history path?

    Only for a kind in HISTORY_READERS, only when its rule holds and `visible_by_sets` holds too
    (a kind's ordinary sets are never loosened). Channel readability is the caller's (history
    kinds are global-only). Deleted versions never reach this test: the store drops them.
    """
    rule = HISTORY_READERS.get(event.kind)
    if rule is None or reader is None:
        return False
    return visible_by_sets(event, reader) and rule(event, reader)


def _all_equal(values: Iterable[str] | None, reader: str) -> bool:
    if not values:
        return False
    return all(v == reader for v in values)


def check_filter_gates(flt: Filter, reader: str) -> None:
    """Run the relay.md §5.4 gates on one filter; raise Restricted with the first failing gate.

    Filters with `#h` are exempt here (channel readability is checked separately, §6.3).
    """
    if "h" in flt.tags:
        return
    kinds = flt.kinds
    # 1. p-gate
    if kinds is None or not kinds.isdisjoint(P_GATED_KINDS):
        p_ok = _all_equal(flt.tags.get("p"), reader)
        ids_ok = bool(flt.ids) and (kinds is None or kinds.isdisjoint(RESULT_GATED_KINDS))
        if not (p_ok or ids_ok):
            raise Restricted(P_GATE_MESSAGE)
    # 2. engram gate
    if (kinds is not None and ENGRAM_KIND in kinds) or (kinds is None and flt.ids is None):
        if not (_all_equal(flt.authors, reader) or _all_equal(flt.tags.get("p"), reader)):
            raise Restricted(ENGRAM_GATE_MESSAGE)
    # 3. author-only gate
    if kinds and kinds <= AUTHOR_ONLY_KINDS and not _all_equal(flt.authors, reader):
        raise Restricted(AUTHOR_ONLY_GATE_MESSAGE)
