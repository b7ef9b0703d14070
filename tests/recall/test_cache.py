"""The encrypted embedding cache (issue 16 item 1): hits, invalidation, sealing."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from buzz.core.keys import public_key
from buzz.recall.cache import CACHE_MAX_BYTES, VectorCache, cache_path, derive_key

READER = "11" * 32
OTHER = "22" * 32
AGENT = public_key("33" * 32)
TEXTS = ["Dana prefers async reviews over meetings", "Omar is allergic to peanuts"]


def _cache(tmp_path: Path, secret: str = READER) -> VectorCache:
    path = cache_path(public_key(secret), AGENT, tmp_path)
    return VectorCache.load(path, derive_key(secret, AGENT))


def test_second_lookup_hits_and_gives_the_same_vectors(tmp_path: Path) -> None:
    first = _cache(tmp_path)
    vectors = first.vectors_for(TEXTS)
    assert (first.hits, first.misses) == (0, 2)
    first.save()
    again = _cache(tmp_path)
    assert np.array_equal(again.vectors_for(TEXTS), vectors)
    assert (again.hits, again.misses) == (2, 0)


def test_a_changed_head_misses_and_stale_entries_are_dropped(tmp_path: Path) -> None:
    cache = _cache(tmp_path)
    cache.vectors_for(TEXTS)
    cache.save()
    changed = [TEXTS[0], "Omar is allergic to peanuts and shellfish"]
    again = _cache(tmp_path)
    again.vectors_for(changed)
    assert (again.hits, again.misses) == (1, 1)
    again.save()
    assert len(_cache(tmp_path).vectors) == 2


def test_the_file_is_sealed_and_other_readers_cannot_open_it(tmp_path: Path) -> None:
    cache = _cache(tmp_path)
    cache.vectors_for(TEXTS)
    cache.save()
    blob = cache.path.read_bytes()
    assert b"Dana" not in blob and b"model" not in blob
    assert cache.path.stat().st_mode & 0o077 == 0
    stranger = VectorCache.load(cache.path, derive_key(OTHER, AGENT))
    assert stranger.vectors == {}
    assert derive_key(READER, AGENT) != derive_key(READER, public_key(OTHER))


def test_tampered_renamed_or_oversized_files_are_treated_as_empty(tmp_path: Path) -> None:
    cache = _cache(tmp_path)
    cache.vectors_for(TEXTS)
    cache.save()
    key = derive_key(READER, AGENT)
    renamed = cache.path.with_name("other.bin")
    renamed.write_bytes(cache.path.read_bytes())
    assert VectorCache.load(renamed, key).vectors == {}
    blob = bytearray(cache.path.read_bytes())
    blob[-1] ^= 1
    cache.path.write_bytes(bytes(blob))
    assert VectorCache.load(cache.path, key).vectors == {}
    with cache.path.open("wb") as out:
        out.truncate(CACHE_MAX_BYTES + 1)
    assert VectorCache.load(cache.path, key).vectors == {}
