"""Search text → terms (relay.md §11 items 2–3), normalised and bounded (issue 24 item 9).

The text is trimmed, NUL characters become spaces, it is cut to SEARCH_MAX_QUERY_CHARS and
split on whitespace. Matching is per whole token and case-insensitive, so a term that repeats
an earlier one (in any case) adds nothing but cost: 4 KB of one word cost 107 s on SQLite.
Repeats are dropped; more than SEARCH_MAX_TERMS distinct terms, or a term longer than
SEARCH_MAX_TERM_BYTES, is refused (`check_search`) rather than searched for less than asked.
"""

from __future__ import annotations

from buzz.core.errors import Invalid
from buzz.core.limits import SEARCH_MAX_QUERY_CHARS, SEARCH_MAX_TERM_BYTES, SEARCH_MAX_TERMS


def search_terms(text: str) -> list[str]:
    """The distinct terms of `text` in their first order; an empty list means no results."""
    seen: set[str] = set()
    terms: list[str] = []
    for term in text.strip().replace("\0", " ")[:SEARCH_MAX_QUERY_CHARS].split():
        key = term.casefold()
        if key not in seen:
            seen.add(key)
            terms.append(term)
    return terms


def check_search(text: str) -> None:
    """Raise Invalid when the search text has too many distinct terms or a term too long."""
    terms = search_terms(text)
    if len(terms) > SEARCH_MAX_TERMS:
        raise Invalid(f"search has too many terms ({len(terms)} distinct, max {SEARCH_MAX_TERMS})")
    for term in terms:
        n = len(term.encode())
        if n > SEARCH_MAX_TERM_BYTES:
            raise Invalid(f"search term too long ({n} bytes, max {SEARCH_MAX_TERM_BYTES})")
