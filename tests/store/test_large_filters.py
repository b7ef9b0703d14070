"""Filters as large as one frame can carry work on both backends (issue 9 item 4).

The relay accepts any filter that fits in `max_message_length` (NIP-11; relay.md §17), so a
list may hold tens of thousands of values. Each case fills most of a default 512 KiB frame
with one list, and the answer must be the same as `Filter.matches` gives over the inserted
events, on SQLite and PostgreSQL, for REQ (`query`) and COUNT (`count`).
"""

from __future__ import annotations

import itertools

import orjson
import pytest

from buzz.core.filters import Filter
from buzz.core.limits import MAX_FILTERS, MAX_FRAME_BYTES
from buzz.core.stored import StoredEvent
from buzz.store.base import EventStore
from tests.store.helpers import BOB, CAROL, ids, insert_all, make

HEX = "0123456789abcdef"


def _frame_bytes(*filters: Filter) -> int:
    return len(orjson.dumps(["REQ", "s", *(f.to_dict() for f in filters)]))


def _hex_prefixes(length: int) -> list[str]:
    return ["".join(p) for p in itertools.product(HEX, repeat=length)]


async def _corpus(store: EventStore) -> list[StoredEvent]:
    events = [
        make(1, f"n{i}", [["t", f"v{i}"], ["p", BOB.pubkey]], created_at=1_700_000_000 + i, who=who)
        for i, who in zip(range(24), itertools.cycle((BOB, CAROL)), strict=False)
    ]
    events.append(make(7, "+", [["t", "v0"]], who=BOB))
    events.append(make(30023, "article", [["d", "x"], ["t", "\u00e9t\u00e9"]], who=CAROL))
    events.append(make(1, "nul", [["t", "a\u0000b"]], who=CAROL))
    events.append(make(1, "astral", [["t", "\U0001f600"]], who=CAROL))
    await insert_all(store, *events)
    return events


def _expected(events: list[StoredEvent], f: Filter) -> list[str]:
    hits = [s for s in events if f.matches(s.event)]
    return ids(sorted(hits, key=lambda s: (-s.event.created_at, s.event.id)))[: f.effective_limit]


async def _same_as_matches(store: EventStore, events: list[StoredEvent], *filters: Filter) -> None:
    assert _frame_bytes(*filters) <= MAX_FRAME_BYTES
    want_union = {i for f in filters for i in _expected(events, f)}
    assert want_union, "the case must match something, or it proves nothing"
    got = await store.query(list(filters), None)
    if len(filters) == 1:
        assert ids(got) == _expected(events, filters[0])
    assert set(ids(got)) == want_union
    assert await store.count(list(filters), None) == len(want_union)


async def test_many_short_id_prefixes(store: EventStore) -> None:
    """65,536 four-character prefixes (≈460 KB): the SQLite expression-tree limit case."""
    events = await _corpus(store)
    theirs = {s.event.id[:4] for s in events[:5]}
    prefixes = [p for p in _hex_prefixes(4) if p not in theirs]
    prefixes = prefixes[:60_000] + sorted(theirs)
    f = Filter.parse({"ids": prefixes})
    await _same_as_matches(store, events, f)


async def test_mixed_id_prefix_lengths_and_full_ids(store: EventStore) -> None:
    """Short prefixes, prefixes covering others and full ids together (≈7,000 ids)."""
    events = await _corpus(store)
    full = [s.event.id for s in events[:3]] + ["ab" * 32, "cd" * 32]
    shorter = [events[3].event.id[:1], events[3].event.id[:2], events[4].event.id[:10]]
    filler = ["".join(p) + "0" * 60 for p in itertools.product(HEX, repeat=3)][:7000]
    f = Filter.parse({"ids": full + shorter + filler})
    await _same_as_matches(store, events, f)


async def test_many_authors(store: EventStore) -> None:
    """7,500 authors (≈500 KB), two of them real."""
    events = await _corpus(store)
    fake = [f"{i:064x}" for i in range(1, 7500)]
    f = Filter.parse({"authors": [*fake, BOB.pubkey]})
    await _same_as_matches(store, events, f)


async def test_every_kind(store: EventStore) -> None:
    """All 65,536 kinds (≈380 KB)."""
    events = await _corpus(store)
    f = Filter.parse({"kinds": list(range(65536))})
    await _same_as_matches(store, events, f)


async def test_many_tag_values(store: EventStore) -> None:
    """50,000 short `#t` values plus a non-ASCII one, an astral one and one holding U+0000 (≈480 KB)."""
    events = await _corpus(store)
    values = [f"x{i}" for i in range(50_000)] + ["v3", "v0", "\u00e9t\u00e9", "a\u0000b", "a", "\U0001f600"]
    f = Filter.parse({"#t": values})
    await _same_as_matches(store, events, f)


async def test_max_filters_each_with_large_lists(store: EventStore) -> None:
    """MAX_FILTERS filters in one REQ/COUNT, each with several large lists."""
    events = await _corpus(store)
    per = [
        Filter.parse(
            {
                "ids": [f"{n:x}{p}" for p in _hex_prefixes(2)] + [events[n].event.id[:6]],
                "authors": [f"{i:064x}" for i in range(1, 60)] + [events[n].event.pubkey],
                "kinds": list(range(0, 2000)),
                "#t": [f"y{i}" for i in range(800)] + [f"v{n}"],
                "#p": [BOB.pubkey],
            }
        )
        for n in range(MAX_FILTERS)
    ]
    await _same_as_matches(store, events, *per)


@pytest.mark.parametrize("name", ["ids", "authors", "kinds", "#t"])
async def test_large_list_alone_matches_nothing_extra(store: EventStore, name: str) -> None:
    """A large list of values none of which occurs matches nothing (no accidental widening)."""
    await _corpus(store)
    lists = {
        "ids": ["".join(p) + "f" * 58 for p in itertools.product(HEX, repeat=2)] + ["0" * 64],
        "authors": [f"{i:064x}" for i in range(1, 5000)],
        "kinds": list(range(100, 30000)),
        "#t": [f"z{i}" for i in range(20_000)],
    }
    f = Filter.parse({name: lists[name]})
    assert await store.query([f], None) == []
    assert await store.count([f], None) == 0
