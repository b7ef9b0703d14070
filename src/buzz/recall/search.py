"""Search an agent's decrypted memory heads (issue 16 item 1): the glue between engram heads,
the encrypted vector cache and the ranking.

Input is what `engram.heads_by_slug` returns after the reader opened the records; only live
memory entries are searched (tombstones and `core` are not). The text that is indexed is the
slug's words followed by the value, so a slug like `mem/dana-preferences` counts as content.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from buzz.core.engram_body import MemoryBody
from buzz.core.engram_head import Record
from buzz.recall.cache import VectorCache
from buzz.recall.rank import Hit, RecallIndex, snippet

_SLUG_SEPARATORS = re.compile(r"[/_\-.]+")


def documents(heads: Mapping[str, Record]) -> list[tuple[str, str]]:
    """Live memory entries as `(slug, text)`, sorted by slug; text = slug words + "\\n" + value."""
    docs = []
    for slug, record in heads.items():
        body = record.body
        if isinstance(body, MemoryBody) and body.value is not None:
            words = _SLUG_SEPARATORS.sub(" ", slug.removeprefix("mem/")).strip()
            docs.append((slug, f"{words}\n{body.value}"))
    return sorted(docs)


def search_heads(
    heads: Mapping[str, Record], query: str, limit: int, cache: VectorCache | None = None
) -> list[Hit]:
    """The best `limit` live entries for `query`, best first; snippets show the value only.

    With a cache, only entries whose text changed are embedded, and the cache is saved when
    anything changed. Raises ValueError (bad limit) and embed.EmbeddingUnavailable.
    """
    docs = documents(heads)
    vectors = None
    if cache is not None:
        vectors = cache.vectors_for([text for _, text in docs])
        if cache.changed:
            cache.save()
    hits = RecallIndex(docs, vectors).search(query, limit)
    values = {slug: text.split("\n", 1)[1] for slug, text in docs}
    return [Hit(h.slug, h.score, snippet(values[h.slug])) for h in hits]
