"""Hybrid ranking of decrypted memories: lexical matches (bm25s) fused with sentence embeddings.

The fusion rule (issue 16) splits the query between the two sides. The query's terms that occur
in some memory (bm25s tokenisation, English stop words removed) are the lexical side's; the
embedding side scores the meaning of the rest: `STRIPPED_SHARE` of the cosine comes from the
query with those terms removed (so a shared name does not drown the question) and the rest
from the whole query (so the words still count). The lexical score of a memory is the share of
the matched terms it contains, each weighted by its BM25 IDF; term frequency and length
normalisation are dropped, because among the notes that share a name they only add noise.
That score is weighted by `LEXICAL_WEIGHT × confidence`, where confidence is the IDF of the
rarest matched term over the IDF of a term found in one memory: a name found in a handful of
notes counts almost fully, a word that half the notes contain hardly at all. A query that
shares no term with any memory is embedded whole and ranked exactly as the embeddings rank it.
Rank fusion (RRF) is not used: it gives BM25's noise the same vote as the embeddings. The
weights were fitted on a held-out corpus of bench/recall.py (1,000 notes, another seed), not
on the figures it prints. Plain BM25 (`mode="bm25"`) stays available for comparison.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import bm25s
import numpy as np

from buzz.recall import embed

LEXICAL_WEIGHT = 1.5  # in cosine units: a memory holding every matched rare term gains ≈ 1.5
STRIPPED_SHARE = 0.75  # of the cosine, from the query without its matched terms
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
        self._tokens: bm25s.tokenization.Tokenized | None = None
        self._bm25: bm25s.BM25 | None = None
        self._postings: dict[str, np.ndarray] = {}  # term → indices of the memories holding it
        if docs:
            # ids, not strings: bm25s tokenises ten times faster that way
            self._tokens = bm25s.tokenize(self.texts, stopwords="en", show_progress=False)
            names = {i: t for t, i in self._tokens.vocab.items()}
            holders: dict[str, list[int]] = {}
            for row, ids in enumerate(self._tokens.ids):
                for term_id in set(ids):
                    holders.setdefault(names[term_id], []).append(row)
            self._postings = {t: np.asarray(rows, dtype=np.int64) for t, rows in holders.items()}

    def _idf(self, term: str) -> float:
        """BM25's IDF (the Lucene form bm25s uses): ln(1 + (N − df + ½) / (df + ½))."""
        n, df = len(self.slugs), len(self._postings[term])
        return math.log(1.0 + (n - df + 0.5) / (df + 0.5))

    def __len__(self) -> int:
        return len(self.slugs)

    def embedding_scores(self, query: str) -> np.ndarray:
        """Cosine of the query with every memory, shape (n,)."""
        if not self.slugs:
            return np.zeros(0, dtype=np.float32)
        return self.vectors @ embed.encode([query])[0]

    def bm25_scores(self, query: str) -> tuple[np.ndarray, list[str]]:
        """Plain BM25 score of every memory (0 where no term matches) and the query's terms."""
        terms = _terms([query])[0]
        known = [t for t in terms if t in self._postings]
        if not known:
            return np.zeros(len(self.slugs), dtype=np.float32), terms
        if self._bm25 is None:  # built on first use: hybrid search does not need it
            self._bm25 = bm25s.BM25()
            self._bm25.index(self._tokens, show_progress=False)
        return np.asarray(self._bm25.get_scores(known), dtype=np.float32), terms

    def lexical_scores(self, query: str) -> tuple[np.ndarray, list[str]]:
        """The lexical side of the fusion (module docstring), confidence included, shape (n,),
        and the matched terms (empty when the query shares no term with any memory)."""
        out = np.zeros(len(self.slugs), dtype=np.float32)
        matched = [t for t in dict.fromkeys(_terms([query])[0]) if t in self._postings]
        if not matched:
            return out, matched
        weights = {t: self._idf(t) for t in matched}
        for term, weight in weights.items():
            out[self._postings[term]] += weight
        rarest = math.log(1.0 + (len(self.slugs) - 0.5) / 1.5)  # the IDF of a term in one memory
        confidence = max(weights.values()) / rarest if rarest > 0 else 0.0
        return out * (confidence / sum(weights.values())), matched

    def hybrid_scores(self, query: str) -> np.ndarray:
        """The fused score of every memory (module docstring), shape (n,)."""
        lexical, matched = self.lexical_scores(query)
        if not matched:
            return self.embedding_scores(query)
        rest = _without(query, set(matched))
        queries = embed.encode([query, rest] if rest else [query])
        cosines = self.vectors @ queries.T  # (n, 1 or 2): one model run, one product
        whole = cosines[:, 0]
        stripped = cosines[:, -1]
        cosine = STRIPPED_SHARE * stripped + (1.0 - STRIPPED_SHARE) * whole
        return cosine + LEXICAL_WEIGHT * lexical

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
        if len(scores) > limit:  # only the candidates that can reach the top `limit` are sorted
            cut = float(np.partition(scores, len(scores) - limit)[len(scores) - limit])
            candidates = np.flatnonzero(scores >= cut).tolist()
        else:
            candidates = list(range(len(scores)))
        order = sorted(candidates, key=lambda i: (-float(scores[i]), self.slugs[i]))
        return [Hit(self.slugs[i], float(scores[i]), snippet(self.texts[i])) for i in order[:limit]]
