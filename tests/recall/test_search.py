"""Searching decrypted engram heads (issue 16 item 1): live entries only, cache reuse."""

from __future__ import annotations

from pathlib import Path

from buzz.core import engram
from buzz.core.engram_body import MemoryBody
from buzz.core.keys import public_key
from buzz.recall.cache import VectorCache, cache_path, derive_key
from buzz.recall.search import documents, search_heads

AGENT_SK = "a1" * 32
OWNER_SK = "b2" * 32
AGENT, OWNER = public_key(AGENT_SK), public_key(OWNER_SK)


def _heads(entries: list[tuple[str, str | None, int]]) -> dict[str, engram.Record]:
    events = [engram.build_event(AGENT_SK, OWNER, MemoryBody(s, v), t) for s, v, t in entries]
    opened = engram.open_candidates(events, AGENT, OWNER, OWNER_SK, AGENT)
    assert opened.skipped == 0
    return engram.heads_by_slug(opened.records)


ENTRIES = [
    ("mem/dana", "Dana prefers async reviews over meetings", 1_700_000_100),
    ("mem/omar", "Omar drinks green tea", 1_700_000_000),
    ("mem/omar", "Omar is allergic to peanuts", 1_700_000_200),  # newer head wins
    ("mem/budget", "The Q3 budget for project Atlas is 40,000 euros", 1_700_000_100),
    ("mem/old", "Lena's birthday is on 14 May", 1_700_000_000),
    ("mem/old", None, 1_700_000_300),  # tombstone: not searchable
]


def test_only_live_heads_are_indexed_with_slug_words() -> None:
    docs = documents(_heads(ENTRIES))
    assert [slug for slug, _ in docs] == ["mem/budget", "mem/dana", "mem/omar"]
    assert dict(docs)["mem/omar"] == "omar\nOmar is allergic to peanuts"


def test_search_finds_the_paraphrase_and_never_a_tombstone(tmp_path: Path) -> None:
    heads = _heads(ENTRIES)
    hits = search_heads(heads, "what food should Omar avoid?", 5)
    assert hits[0].slug == "mem/omar"
    assert hits[0].snippet == "Omar is allergic to peanuts"
    assert all(h.slug != "mem/old" for h in search_heads(heads, "when is Lena's birthday?", 5))


def test_the_cache_is_reused_until_a_head_changes(tmp_path: Path) -> None:
    path = cache_path(OWNER, AGENT, tmp_path)
    key = derive_key(OWNER_SK, AGENT)
    heads = _heads(ENTRIES)
    first = VectorCache.load(path, key)
    before = search_heads(heads, "how much money can Atlas spend?", 3, first)
    assert (first.hits, first.misses) == (0, 3) and path.exists()
    warm = VectorCache.load(path, key)
    assert search_heads(heads, "how much money can Atlas spend?", 3, warm) == before
    assert (warm.hits, warm.misses) == (3, 0)
    changed = _heads([*ENTRIES, ("mem/dana", "Dana prefers written feedback", 1_700_000_400)])
    after = VectorCache.load(path, key)
    search_heads(changed, "how does Dana like feedback?", 3, after)
    assert (after.hits, after.misses, after.dropped) == (2, 1, 1)
