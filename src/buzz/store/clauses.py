"""Filter → SQL, shared by both backends (relay.md §6.1–§6.5, §11).

Every predicate of a filter, the `#h` rule and the read scope become one WHERE clause, so the
database applies them before `LIMIT`. Events are read through the alias `e`.

Read scope (relay.md §6.3 item 2, §4.3 item 1, §5.3 item 6): an event is in scope when it is
global, or its channel exists, is not deleted, and is open or has the reader as an active
member. The scope is applied to every filter: for a filter without `#h` it is exactly §6.3
item 2; for a filter with `#h` (channels the relay already found readable) it only removes
rows `visible` would remove anyway, such as an event whose explicit `h` names a readable
channel while its derived channel is not.
"""

from __future__ import annotations

from dataclasses import dataclass

from buzz.core.filters import Filter
from buzz.core.search import search_terms
from buzz.store.base import SYSTEM, Gates, Reader
from buzz.store.dialect import Params

EVENT_COLUMNS = "e.id, e.pubkey, e.created_at, e.kind, e.tags, e.content, e.sig, e.received_at, e.channel_id"
ORDER = "e.created_at DESC, e.id ASC"  # relay.md §6.4 item 2: newest first, then lowest id


def matches_nothing(f: Filter) -> bool:
    """A present empty list (relay.md §6.1 item 2) or an empty search text (§11 item 2)."""
    return f.is_empty_match or (f.search is not None and not search_terms(f.search))


@dataclass(frozen=True, slots=True)
class Page:
    """One page of a filter's candidates: keyset after (created_at, id), or an offset for
    search, whose relevance order has no stable key."""

    size: int
    after: tuple[int, str] | None = None
    offset: int = 0


def readable_channel(reader: Reader, p: Params, alias: str = "c") -> str:
    """relay.md §4.3 item 1 over the channels row `alias`: exists (not deleted), and open or
    the reader is an active member. SYSTEM reads every non-deleted channel."""
    if reader is SYSTEM:
        return f"{alias}.deleted_at IS NULL"
    member = ""
    if reader is not None:
        # A set of pubkeys (a connection that authenticated several) reads the union of theirs.
        who = (
            p.in_list("m.pubkey", reader, "text")
            if isinstance(reader, frozenset)
            else f"m.pubkey = {p.add(reader)}"
        )
        member = (
            f" OR {alias}.id IN (SELECT m.channel_id FROM channel_members m"
            f" WHERE {who} AND m.removed_at IS NULL)"
        )
    return f"{alias}.deleted_at IS NULL AND ({alias}.visibility = 'open'{member})"


def _scope(reader: Reader, p: Params) -> str | None:
    if reader is SYSTEM:
        return None
    channels = f"SELECT c.id FROM channels c WHERE {readable_channel(reader, p)}"
    return f"(e.channel_id IS NULL OR e.channel_id IN ({channels}))"


def _keys(reader: Reader) -> list[str]:
    if reader is None or reader is SYSTEM:
        return []
    return sorted(reader) if isinstance(reader, frozenset) else [reader]


def _tagged(name: str, values: list[str], p: Params) -> str:
    return (
        f"e.id IN (SELECT t.event_id FROM event_tags t"
        f" WHERE t.name = {p.add(name)} AND {p.in_list('t.value', values, 'utf8')})"
    )


def gated_kinds(gates: Gates, f: Filter, reader: Reader) -> frozenset[int]:
    """The gated kinds `f` may match whose gate `f` itself does not already pass for `reader`
    (`authors` or `#p` naming only the reader's keys, relay.md §5.4's own narrowing): the
    kinds whose events `accept` must look at."""
    if reader is SYSTEM:
        return frozenset()
    gated = gates.kinds if f.kinds is None else gates.kinds & f.kinds
    keys = set(_keys(reader))
    if keys and f.authors is not None and f.authors <= keys:
        gated -= gates.author | gates.author_or_p | gates.author_or_shared
    named = f.tags.get("p")
    if keys and named is not None and named <= keys:
        gated -= gates.p_tagged | gates.author_or_p
    return gated


def gate_clause(gates: Gates, f: Filter, reader: Reader, p: Params) -> str | None:
    """`gates` in SQL for `reader` over `f`'s events: a row of a gated kind is kept only when
    the reader may see it by author, `p` tag or `shared` tag. None when no kind of the filter
    needs it (`gated_kinds`), so ungated reads keep their plans."""
    gated = gated_kinds(gates, f, reader)
    if not gated:
        return None
    kinds = f.kinds
    keys = _keys(reader)
    by_author = gated & (gates.author | gates.author_or_p | gates.author_or_shared)
    by_p = gated & (gates.p_tagged | gates.author_or_p)
    shared = gated & gates.author_or_shared
    ok: list[str] = []
    if keys and by_author:
        ok.append(f"({p.in_list('e.kind', by_author, 'int')} AND {p.in_list('e.pubkey', keys, 'text')})")
    if keys and by_p:
        ok.append(f"({p.in_list('e.kind', by_p, 'int')} AND {_tagged('p', keys, p)})")
    if shared:
        # Only one-letter tags are indexed: whether a `shared` tag says `true` is `accept`'s
        # to find out (its refusals are bounded by READ_MAX_REFUSED).
        ok.append(p.in_list("e.kind", shared, "int"))
    if kinds is not None and kinds <= gated:
        return "(" + " OR ".join(ok) + ")" if ok else "FALSE"
    return "(" + " OR ".join([f"NOT {p.in_list('e.kind', gated, 'int')}", *ok]) + ")"


def _ids(prefixes: frozenset[str], p: Params) -> str:
    """relay.md §6.4 item 1: prefix match. A hex prefix `x` covers exactly [x, x + "g").

    The prefixes are one bound list joined against the id index, not one OR term each: a
    frame holds tens of thousands of short prefixes (issue 9 item 4)."""
    exact = [v for v in prefixes if len(v) == 64]
    short = [v for v in prefixes if len(v) < 64]
    parts = [p.in_list("e.id", exact, "text")] if exact else []
    if short:
        parts.append(
            f"e.id IN (SELECT x.id FROM {p.table(short, 'j')}"
            " JOIN events x ON x.id >= j.value AND x.id < j.value || 'g')"
        )
    return parts[0] if len(parts) == 1 else "(" + " OR ".join(parts) + ")"


def _tag(name: str, values: frozenset[str], p: Params) -> str:
    """NIP-01: one of the event's `name` tags has a value in `values` (`#h` too: decision 174)."""
    return (
        f"e.id IN (SELECT t.event_id FROM event_tags t"
        f" WHERE t.name = {p.add(name)} AND {p.in_list('t.value', values, 'utf8')})"
    )


def _kind_column(f: Filter, p: Params) -> str:
    """`e.kind`, or on SQLite `+e.kind` (no index on it) when ids or tags select the rows:
    without table statistics SQLite's planner otherwise walks every event of the kind in
    time order (`events_by_kind`) instead of the few the id or tag index names."""
    if p.dialect.name == "sqlite" and f.authors is None and (f.ids is not None or f.tags):
        return "+e.kind"
    return "e.kind"


def where(
    f: Filter, reader: Reader, p: Params, *, without_h: bool = False, gates: Gates | None = None
) -> str:
    """Every matching clause of `f` (§6.1, §6.2), the read scope and `deleted_at IS NULL`;
    `without_h`: all but the `#h` clause (the caller applies it); `gates`: the reader's
    per-event gates as far as SQL applies them (`gate_clause`)."""
    parts = ["e.deleted_at IS NULL"]
    if f.ids is not None:
        parts.append(_ids(f.ids, p))
    if f.authors is not None:
        parts.append(p.in_list("e.pubkey", f.authors, "text"))
    if f.kinds is not None:
        parts.append(p.in_list(_kind_column(f, p), f.kinds, "int"))
    if f.since is not None:
        parts.append(f"e.created_at >= {p.add(f.since)}")
    if f.until is not None:
        parts.append(f"e.created_at <= {p.add(f.until)}")
    for name in sorted(f.tags):
        if not (without_h and name == "h"):
            parts.append(_tag(name, f.tags[name], p))
    scope = _scope(reader, p)
    if scope is not None:
        parts.append(scope)
    if gates is not None:
        gate = gate_clause(gates, f, reader, p)
        if gate is not None:
            parts.append(gate)
    return " AND ".join(parts)


def _from_where(
    f: Filter, reader: Reader, p: Params, extra: str = "", gates: Gates | None = None
) -> tuple[str, str | None]:
    """FROM … WHERE … of a filter (and `extra`, ` AND …`), and the search placeholder when
    `f.search` is set."""
    clause = where(f, reader, p, gates=gates) + extra
    if f.search is None:
        return f"FROM events e WHERE {clause}", None
    ref = p.add(p.dialect.search_arg(search_terms(f.search)))
    return p.dialect.search_from(ref, clause), ref


def _after(page: Page, p: Params) -> str:
    if page.after is None:
        return ""
    created_at, event_id = page.after
    c = p.add(created_at)
    return f" AND (e.created_at < {c} OR (e.created_at = {c} AND e.id > {p.add(event_id)}))"


def select_page(f: Filter, reader: Reader, page: Page, p: Params, gates: Gates | None = None) -> str:
    """One page of `f`'s matches in §6.4 order (search: §11 item 5), as full event rows;
    `gates` as in `where` (a `#h` window's own channels hold no gated kind: they are
    global-only, so only its part 2 applies them)."""
    if f.search is None and "h" in f.tags and len(f.tags["h"]) <= p.dialect.h_by_channel_max:
        return _h_by_channel_page(f, reader, page, p, gates)
    body, ref = _from_where(f, reader, p, _after(page, p), gates)
    order = ORDER if ref is None else f"{p.dialect.search_order(ref)}, {ORDER}"
    offset = f" OFFSET {page.offset}" if page.offset else ""
    return f"SELECT {EVENT_COLUMNS} {body} ORDER BY {order} LIMIT {page.size}{offset}"


def _h_by_channel_page(f: Filter, reader: Reader, page: Page, p: Params, gates: Gates | None) -> str:
    """`select_page` for a `#h` filter as two disjoint parts whose union is its match (an h
    tag in V):

    1. per channel c of V, its events (channel index, newest first, stopping after one page)
       that have an h tag in V;
    2. events with an h tag in V whose own channel is not in V (another channel, several h
       tags, a global kind with an h tag): the tag rows of V that do not name their event's
       own channel (`in_channel`, a small partial index), each event looked up and kept when
       its channel is not in V.

    Each part is only read up to the page, so a window costs one page of rows however long
    the channel, instead of every event of the kind sorted by time."""
    values = f.tags["h"]
    tag_in = p.in_list("t.value", values, "utf8")  # one parameter, read by `h_ok` and `others`
    h_ok = _h_ok(tag_in, p)
    if not p.dialect.lateral:
        return _h_unrolled_page(f, reader, page, p, tag_in, h_ok, gates)
    # The read scope of part 1 is that of its channel, tested once per channel (not per row):
    # fewer per-row filters the planner must guess keeps its estimate above one page, so it
    # walks the index in order and stops, rather than fetch and sort the whole channel.
    channels = p.table(values, "hv")
    after = _after(page, p)  # its parameters are read by both parts
    in_scope = ""
    if reader is not SYSTEM:
        in_scope = f" WHERE hv.value IN (SELECT c.id FROM channels c WHERE {readable_channel(reader, p)})"
    own = (
        f"SELECT {EVENT_COLUMNS} FROM events e WHERE e.channel_id = hv.value"
        f" AND {where(f, SYSTEM, p, without_h=True)}{after} AND {h_ok}"
        f" ORDER BY {ORDER} LIMIT {page.size}"
    )
    others = _others(tag_in, p)
    elsewhere = f"(e.channel_id IS NULL OR NOT {p.in_list('e.channel_id', values, 'text')})"
    # One key lookup per such id (LIMIT 1 keeps the lateral subquery a lookup).
    rest = (
        f"SELECT r.* FROM ({others}) AS o (id) CROSS JOIN LATERAL (SELECT {EVENT_COLUMNS} FROM events e"
        f" WHERE e.id = o.id AND {where(f, reader, p, without_h=True, gates=gates)}{after} AND {elsewhere}"
        " LIMIT 1) AS r"
    )
    union = f"SELECT w.* FROM {channels} CROSS JOIN LATERAL ({own}) AS w{in_scope} UNION ALL {rest}"
    return f"SELECT {EVENT_COLUMNS} FROM ({union}) AS e ORDER BY {ORDER} LIMIT {page.size}"


def _others(tag_in: str, p: Params) -> str:
    # Before decision 101 this was every h row of V EXCEPT every event of V's channels: two
    # index ranges as long as the channel, the largest cost of a page at 1M events. Without
    # table statistics SQLite prefers event_tags_by_value (two equalities), which holds every h
    # row of the channel; the partial index holds only the few others.
    hint = "" if p.dialect.lateral else " INDEXED BY event_tags_h_elsewhere"
    return (
        f"SELECT DISTINCT t.event_id FROM event_tags t{hint}"
        f" WHERE t.name = 'h' AND COALESCE(t.in_channel, 0) = 0 AND {tag_in}"
    )


def _h_unrolled_page(
    f: Filter, reader: Reader, page: Page, p: Params, tag_in: str, h_ok: str, gates: Gates | None
) -> str:
    """`_h_by_channel_page` without LATERAL (SQLite): part 1 is one ordered, limited subquery
    per channel of V, written out (`Dialect.h_by_channel_max` bounds how many); part 2 a plain
    join, which SQLite runs as one key lookup per tag row."""
    values = sorted(f.tags["h"])
    after = _after(page, p)
    base = where(f, SYSTEM, p, without_h=True)  # the text is shared: its parameters are added once
    scope = ""
    if reader is not SYSTEM:
        scope = f" AND e.channel_id IN (SELECT c.id FROM channels c WHERE {readable_channel(reader, p)})"
    own = [
        f"SELECT * FROM (SELECT {EVENT_COLUMNS} FROM events e WHERE e.channel_id = {p.add(c)}"
        f" AND {base}{after} AND {h_ok}{scope} ORDER BY {ORDER} LIMIT {page.size})"
        for c in values
    ]
    elsewhere = f"(e.channel_id IS NULL OR NOT {p.in_list('e.channel_id', values, 'text')})"
    rest = (
        f"SELECT {EVENT_COLUMNS} FROM ({_others(tag_in, p)}) AS o"
        " JOIN events e ON e.id = o.event_id"
        f" WHERE {where(f, reader, p, without_h=True, gates=gates)}{after} AND {elsewhere}"
    )
    union = " UNION ALL ".join([*own, f"SELECT * FROM ({rest})"])
    return f"SELECT {EVENT_COLUMNS} FROM ({union}) AS e ORDER BY {ORDER} LIMIT {page.size}"


def count_union(
    filters: list[Filter],
    reader: Reader,
    p: Params,
    without: frozenset[int] = frozenset(),
    gates: Gates | None = None,
) -> str:
    """COUNT of the distinct ids matching any of `filters` (non-empty list), leaving out
    events of the kinds `without` (the gated ones, counted one by one); `gates` as in `where`."""
    extra = f" AND NOT {p.in_list('e.kind', without, 'int')}" if without else ""
    selects = [
        _h_ids(f, reader, p, extra, gates)
        if "h" in f.tags
        else f"SELECT e.id {_from_where(f, reader, p, extra, gates)[0]}"
        for f in filters
    ]
    if len(selects) == 1:
        return f"SELECT COUNT(*) FROM ({selects[0]}) AS matched"
    union = " UNION ".join(f"SELECT m{i}.id FROM ({s}) AS m{i}" for i, s in enumerate(selects))
    return f"SELECT COUNT(*) FROM ({union}) AS matched"


def _h_ids(f: Filter, reader: Reader, p: Params, extra: str = "", gates: Gates | None = None) -> str:
    """The ids a `#h` filter matches, each once, for COUNT: `_h_by_channel_page`'s two
    disjoint parts without a limit — the events of V's channels (channel index) that pass
    `h_ok`, and the few whose h tag in V does not name their own channel. The generic OR of
    `_tag` reads every event of the kind instead (decision 102)."""
    values = f.tags["h"]
    tag_in = p.in_list("t.value", values, "utf8")
    channel_in = p.in_list("e.channel_id", values, "text")
    base = where(f, reader, p, without_h=True, gates=gates) + extra  # shared text: parameters added once
    own = f"SELECT e.id FROM events e WHERE {channel_in} AND {base} AND {_h_ok(tag_in, p)}"
    rest = (
        f"SELECT e.id FROM ({_others(tag_in, p)}) AS o JOIN events e ON e.id = o.event_id"
        f" WHERE {base} AND (e.channel_id IS NULL OR NOT {channel_in})"
    )
    return f"{own} UNION ALL {rest}"


def _h_ok(tag_in: str, p: Params) -> str:
    """An event of a channel in V matches `#h` V when one of its h tags is in V; one without
    an h tag does not (NIP-01, decision 174: relay.md §6.2's fallback is gone)."""
    any_of = p.dialect.bool_or
    return f"COALESCE((SELECT {any_of}({tag_in}) FROM event_tags t WHERE t.event_id = e.id AND t.name = 'h'), FALSE)"
