"""Search text → terms (relay.md §11 items 2–3; issue 24 item 9: repeats dropped, count and
length capped)."""

from __future__ import annotations

import pytest

from buzz.core.errors import Invalid
from buzz.core.limits import SEARCH_MAX_TERM_BYTES, SEARCH_MAX_TERMS
from buzz.core.search import check_search, search_terms


def test_repeats_in_any_case_are_one_term() -> None:
    assert search_terms("word " * 800) == ["word"]
    assert search_terms(" Fox\0fox FOX  hen fox ") == ["Fox", "hen"]
    assert search_terms(" \0 ") == []


def test_distinct_terms_and_term_bytes_are_capped() -> None:
    check_search(" ".join(f"t{i}" for i in range(SEARCH_MAX_TERMS)) + " t0" * 500)
    with pytest.raises(Invalid, match=f"too many terms \\({SEARCH_MAX_TERMS + 1} distinct"):
        check_search(" ".join(f"t{i}" for i in range(SEARCH_MAX_TERMS + 1)))
    check_search("é" * (SEARCH_MAX_TERM_BYTES // 2))
    with pytest.raises(Invalid, match="search term too long"):
        check_search("é" * (SEARCH_MAX_TERM_BYTES // 2 + 1))
