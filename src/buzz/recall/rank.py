"""Hybrid ranking of decrypted memories: BM25 (bm25s) fused with static sentence embeddings.

The fusion rule (issue 16) splits the query between the two scorers. The query's terms that
occur in some memory (English stop words removed) are BM25's: its scores are divided by their
maximum (so they lie in [0, 1]) and weighted by `BM25_WEIGHT × coverage`, where coverage is
the share of the query's terms that the best BM25 document contains. The rest of the query,
those words removed, is embedded and scored by cosine, so a shared name does not drown the
meaning of the question. A query that shares no term with any memory gives BM25 all zeros and
is embedded whole: the hybrid order is then exactly the embedding order. Rank fusion (RRF) is
not used: it gives BM25's noise the same vote as the embeddings.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import bm25s
import numpy as np

from buzz.recall import embed

BM25_WEIGHT = 1.0  # in cosine units: at full coverage, the top BM25 hit gains 1.0 (bench/recall.py)
SNIPPET_CHARS = 160
MAX_LIMIT = 100
_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class Hit:
    """One ranked memory: `score` is the fused score (higher is better), `snippet` a prefix."""

    slug: str
    score: float
    snippet: str

    def as_json(self) -> dict[str, object]:
        return {"slug": self.slug, "score": round(self.score, 4), "snippet": self.snippet}


def _terms(texts: Sequence[str]) -> list[list[str]]:
    return bm25s.tokenize(list(texts), stopwords="en", return_ids=False, show_progress=False)


def _without(text: str, terms: set[str]) -> str:
    """`text` minus the words whose lower-cased form is in `terms`."""
    return " ".join(w for w in _WORD.findall(text) if w.lower() not in terms)


def snippet(text: str) -> str:
    """The first SNIPPET_CHARS characters of `text` with whitespace collapsed (… if cut)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= SNIPPET_CHARS else flat[: SNIPPET_CHARS - 1] + "…"


class RecallIndex:
    """An in-memory index over `(slug, text)` pairs.

    `vectors` (shape (n, embed.DIMENSIONS)) may be passed from a cache so nothing is
    re-embedded; otherwise the texts are embedded here. Raises embed.EmbeddingUnavailable
    when the model package is missing.
    """

    def __init__(self, docs: Sequence[tuple[str, str]], vectors: np.ndarray | None = None):
        self.slugs = [slug for slug, _ in docs]
        self.texts = [text for _, text in docs]
        if vectors is None:
            vectors = embed.encode(self.texts)
        if vectors.shape != (len(docs), embed.DIMENSIONS):
            raise ValueError(f"vectors shape {vectors.shape} does not match {len(docs)} docs")
        self.vectors = vectors.astype(np.float32, copy=False)
        self._doc_terms: list[set[str]] = []
        self._bm25: bm25s.BM25 | None = None
        if docs:
            # ids, not strings: bm25s tokenises ten times faster that way
            tokens = bm25s.tokenize(self.texts, stopwords="en", show_progress=False)
            names = {i: t for t, i in tokens.vocab.items()}
            self._doc_terms = [{names[i] for i in row} for row in tokens.ids]
            if any(self._doc_terms):
                self._bm25 = bm25s.BM25()
                self._bm25.index(tokens, show_progress=False)

    def __len__(self) -> int:
        return len(self.slugs)

    def embedding_scores(self, query: str) -> np.ndarray:
        """Cosine of the query with every memory, shape (n,)."""
        if not self.slugs:
            return np.zeros(0, dtype=np.float32)
        return self.vectors @ embed.encode([query])[0]

    def bm25_scores(self, query: str) -> tuple[np.ndarray, list[str]]:
        """BM25 score of every memory (0 where no term matches) and the query's terms."""
        terms = _terms([query])[0]
        if self._bm25 is None or not terms:
            return np.zeros(len(self.slugs), dtype=np.float32), terms
        known = [t for t in terms if t in self._bm25.vocab_dict]
        if not known:
            return np.zeros(len(self.slugs), dtype=np.float32), terms
        return np.asarray(self._bm25.get_scores(known), dtype=np.float32), terms

    def hybrid_scores(self, query: str) -> np.ndarray:
        """The fused score of every memory (module docstring), shape (n,)."""
        bm25, terms = self.bm25_scores(query)
        top = float(bm25.max()) if bm25.size else 0.0
        if top <= 0.0:
            return self.embedding_scores(query)
        matched = {t for t in terms if t in self._bm25.vocab_dict}  # type: ignore[union-attr]
        cosine = self.embedding_scores(_without(query, matched) or query)
        best = self._doc_terms[int(bm25.argmax())]
        coverage = sum(1 for t in set(terms) if t in best) / len(set(terms))
        return cosine + BM25_WEIGHT * coverage * (bm25 / top)

    def search(self, query: str, limit: int = 10, mode: str = "hybrid") -> list[Hit]:
        """The best `limit` memories for `query`, best first (ties by slug).

        mode: "hybrid" (default), "embedding" or "bm25". Raises ValueError on a bad limit/mode.
        """
        if not 1 <= limit <= MAX_LIMIT:
            raise ValueError(f"limit must be 1..{MAX_LIMIT}")
        scorer = {
            "hybrid": self.hybrid_scores,
            "embedding": self.embedding_scores,
            "bm25": lambda q: self.bm25_scores(q)[0],
        }.get(mode)
        if scorer is None:
            raise ValueError(f"unknown mode {mode!r}")
        if not self.slugs:
            return []
        scores = scorer(query)
        order = sorted(range(len(scores)), key=lambda i: (-float(scores[i]), self.slugs[i]))
        return [Hit(self.slugs[i], float(scores[i]), snippet(self.texts[i])) for i in order[:limit]]
