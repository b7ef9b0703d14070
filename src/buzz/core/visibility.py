"""Who may read what: the per-event sets predicate and the filter gates.

Source rules: relay.md §5.2 (`event_is_shared`), §5.3 (per-event predicate; this module owns
items 2–5, the relay adds item 6, channel readability, and storage item 1), §5.4 (filter
gates, run on every filter without `#h`, in order p-gate → engram gate → author-only gate).
Every read path (stored REQ, live fan-out, ids lookups, COUNT, search, /query) calls these
two functions; none re-states a rule.

Issue 25 (docs/decisions.md 171): a filter is refused only when every kind it can match is
gated for the reader — one that names no kinds, or names an ungated kind beside gated ones, is
served and `visible_by_sets` drops each gated event the reader may not see. The reader is one
pubkey, or the set of pubkeys a connection authenticated (NIP-42 allows several): it reads
with the union of their rights. The kind table (`KindTable`) is the relay's, which includes
the kinds its operator opened.

The history path (`POST /history`, issue 16 item 3, docs/decisions.md 81) is the one path that
serves superseded versions; `HISTORY_READERS` is its gate table and `history_visible` its
per-version predicate.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from buzz.core.errors import Restricted
from buzz.core.event import Event, Tags
from buzz.core.filters import Filter
from buzz.core.kinds import BUILTIN, ENGRAM_KIND, KindTable

P_GATE_MESSAGE = "p-gated events require #p matching your pubkey"
ENGRAM_GATE_MESSAGE = "agent-engram reads require authors=[self] or #p=[self]"
AUTHOR_ONLY_GATE_MESSAGE = "author-only kinds require authors=[self]"

Reader = str | frozenset[str] | None
"""Who reads: one pubkey, the pubkeys of a connection that authenticated several (the union of
their rights), or None (unauthenticated: no gated event)."""


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


def sets_admit_all(filters: Iterable[Filter], table: KindTable = BUILTIN) -> bool:
    """True when no event matching `filters` can fail `visible_by_sets`: every filter names its
    kinds and none of them is gated (docs/decisions.md 102). COUNT then skips the per-event
    predicate and stays one SQL statement."""
    return all(f.kinds is not None and f.kinds.isdisjoint(table.sets_gated) for f in filters)


def visible_by_sets(event: Event, reader: Reader, table: KindTable = BUILTIN) -> bool:
    """relay.md §5.3 items 2–5 for `reader` (None = unauthenticated, sees no gated event; a set
    of pubkeys sees what any of them sees).

    The author is not exempt from the p-gate: an agent cannot read back its own 44200.
    """
    if event.kind not in table.sets_gated:
        return True
    if isinstance(reader, frozenset):
        return any(_visible_to(event, r, table) for r in reader)
    return _visible_to(event, reader, table)


def _visible_to(event: Event, reader: str | None, table: KindTable) -> bool:
    kind = event.kind
    if kind in table.author_only and reader != event.pubkey:
        return False
    if kind in table.shared_gated and reader != event.pubkey and not event_is_shared(event.tags):
        return False
    if kind in table.p_gated and (reader is None or reader not in p_values(event)):
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


def _all_within(values: Iterable[str] | None, reader: Reader) -> bool:
    """Every value names the reader (one of the reader's pubkeys); False for none."""
    if not values or reader is None:
        return False
    if isinstance(reader, frozenset):
        return all(v in reader for v in values)
    return all(v == reader for v in values)


def _kind_refusal(kind: int, flt: Filter, reader: Reader, table: KindTable) -> str | None:
    """The relay.md §5.4 gate that `flt` fails for events of `kind`, in gate order, or None
    when the filter may read that kind (an ungated kind, or the gate's own narrowing)."""
    if kind in table.p_gated:
        p_ok = _all_within(flt.tags.get("p"), reader)
        ids_ok = bool(flt.ids) and kind not in table.result_gated
        if not (p_ok or ids_ok):
            return P_GATE_MESSAGE
    if kind == ENGRAM_KIND and not (
        _all_within(flt.authors, reader) or _all_within(flt.tags.get("p"), reader)
    ):
        return ENGRAM_GATE_MESSAGE
    if kind in table.author_only and not _all_within(flt.authors, reader):
        return AUTHOR_ONLY_GATE_MESSAGE
    return None


_GATE_ORDER = (P_GATE_MESSAGE, ENGRAM_GATE_MESSAGE, AUTHOR_ONLY_GATE_MESSAGE)


def check_filter_gates(flt: Filter, reader: Reader, table: KindTable = BUILTIN) -> None:
    """Run the relay.md §5.4 gates on one filter; raise Restricted when every kind the filter
    can match is gated for the reader, with the first gate (p → engram → author-only) that
    refuses one of them.

    A filter without `kinds` can match ungated kinds, so it is never refused here: each gated
    event it meets is dropped by `visible_by_sets` (issue 25, docs/decisions.md 171). Filters
    with `#h` are exempt here (channel readability is checked separately, §6.3).
    """
    if "h" in flt.tags or not flt.kinds:
        return
    refusals = set()
    for kind in flt.kinds:
        refusal = _kind_refusal(kind, flt, reader, table)
        if refusal is None:
            return
        refusals.add(refusal)
    raise Restricted(next(m for m in _GATE_ORDER if m in refusals))
