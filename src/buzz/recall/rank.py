"""Hybrid ranking of decrypted memories: lexical matches (bm25s) fused with sentence embeddings.

The fusion rule (issue 16, revised by issue 24) gives the lexical side only what the embeddings
cannot see: identifiers. Sentence embeddings place "Dana" and "Omar", or "Atlas-17" and
"Borealis-3", almost on top of each other, but they do read every ordinary word of a question
already, so an ordinary word that a question happens to share with some memory ("get",
"someone", "keep", "fire") is no extra evidence, and on a small or varied store it was the
strongest signal of all. A query term is an identifier (`identifier_terms`) when the query
writes it as one (a digit, two or more capitals as in "GDPR" or "UniFi", or a capital initial
anywhere but at the start of a sentence), or when the memories do (`written_names`: capitalised
somewhere other than at the start of a sentence or line, and never in lower case), which keeps
names found when someone types them in lower case.

The query's identifier terms that occur in some memory (bm25s tokenisation, English stop words
removed) are the lexical side's; the embedding side scores the meaning of the rest:
`STRIPPED_SHARE` of the cosine comes from the query with those terms removed (so a shared name
does not drown the question) and the rest from the whole query (so the words still count). The
lexical score of a memory is the share of the matched terms it contains, each weighted by its
BM25 IDF; term frequency and length normalisation are dropped, because among the notes that
share a name they only add noise. That score is weighted by `LEXICAL_WEIGHT × confidence`, where
confidence is the IDF of the rarest matched term over the IDF of a term found in one memory: a
name found in a handful of notes counts almost fully, a name that half the notes contain hardly
at all. A query with no identifier found in any memory is embedded whole and ranked exactly as
the embeddings rank it. Rank fusion (RRF) is not used: it gives BM25's noise the same vote as the
embeddings. The weights were fitted on a held-out corpus of bench/recall.py (1,000 notes,
another seed), not on the figures it prints; the identifier rule was checked on a second,
independent set (bench/data/recall_makerspace). Plain BM25 (`mode="bm25"`) stays available for
comparison.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import bm25s
import numpy as np

from buzz.recall import embed

LEXICAL_WEIGHT = 1.5  # in cosine units: a memory holding every matched rare term gains ≈ 1.5
STRIPPED_SHARE = 0.75  # of the cosine, from the query without its matched terms
SNIPPET_CHARS = 160
MAX_LIMIT = 100
_WORD = re.compile(r"\w+")
_TOKEN = re.compile(r"(\W*)(\w+)")  # a word and what separates it from the previous one
_SENTENCE_END = frozenset(".!?:;\n")


@dataclass(frozen=True)
class Hit:
    """One ranked memory: `score` is the fused score (higher is better), `snippet` a prefix."""

    slug: str
    score: float
    snippet: str

    def as_json(self) -> dict[str, object]:
        return {"slug": self.slug, "score": round(self.score, 4), "snippet": self.snippet}


def _words(text: str) -> Iterator[tuple[str, bool]]:
    """Each word of `text` and whether it starts a sentence or line (its case says nothing)."""
    for i, match in enumerate(_TOKEN.finditer(text)):
        gap, word = match.groups()
        yield word, i == 0 or not _SENTENCE_END.isdisjoint(gap)


def _is_code(word: str) -> bool:
    """A word that only names something: a digit in it, or two or more capitals."""
    return any(c.isdigit() for c in word) or sum(c.isupper() for c in word) >= 2


def identifier_terms(query: str) -> set[str]:
    """The lower-cased words that `query` writes as names or codes: with a digit, with two or
    more capitals ("GDPR", "UniFi"), or with a capital initial where no sentence starts.
    The first word of a sentence says nothing either way."""
    return {
        word.lower()
        for word, initial in _words(query)
        if _is_code(word) or (word[0].isupper() and not initial)
    }


def _starts_sentence(text: str, at: int) -> bool:
    """Whether the word at `at` in `text` starts a sentence or line."""
    i = at
    while i > 0 and not (text[i - 1].isalnum() or text[i - 1] == "_"):
        i -= 1
        if text[i] in _SENTENCE_END:
            return True
    return i == 0


def written_as_name(term: str, texts: Iterable[str]) -> bool:
    """Whether `texts` write `term` (a lower-cased word) as a name: capitalised at least once
    where no sentence or line starts, and never in lower case."""
    pattern = re.compile(rf"(?<!\w){re.escape(term)}(?!\w)", re.IGNORECASE)
    named = False
    for text in texts:
        for match in pattern.finditer(text):
            word = match.group(0)
            if word.islower():
                return False
            named = named or (word[0].isupper() and not _starts_sentence(text, match.start()))
    return named


def content_terms(texts: Sequence[str]) -> list[list[str]]:
    """Each text's terms as the lexical side sees them: bm25s tokens, English stop words out."""
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
        self._named: dict[str, bool] = {}  # term → the memories write it as a name
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
        terms = content_terms([query])[0]
        known = [t for t in terms if t in self._postings]
        if not known:
            return np.zeros(len(self.slugs), dtype=np.float32), terms
        if self._bm25 is None:  # built on first use: hybrid search does not need it
            self._bm25 = bm25s.BM25()
            self._bm25.index(self._tokens, show_progress=False)
        return np.asarray(self._bm25.get_scores(known), dtype=np.float32), terms

    def lexical_terms(self, query: str) -> list[str]:
        """The query's terms for the lexical side: its identifiers (written as names or codes by
        the query or by the memories) that occur in some memory, in query order."""
        written = identifier_terms(query)
        return [
            t
            for t in dict.fromkeys(content_terms([query])[0])
            if t in self._postings and (t in written or self._written_as_name(t))
        ]

    def _written_as_name(self, term: str) -> bool:
        known = self._named.get(term)
        if known is None:
            known = written_as_name(term, (self.texts[i] for i in self._postings[term]))
            self._named[term] = known
        return known

    def lexical_scores(self, query: str, terms: Sequence[str] | None = None) -> tuple[np.ndarray, list[str]]:
        """The lexical side of the fusion (module docstring), confidence included, shape (n,),
        and the matched terms (empty when none occurs in any memory). `terms`: the query terms
        to match (default: all of them)."""
        out = np.zeros(len(self.slugs), dtype=np.float32)
        wanted = content_terms([query])[0] if terms is None else terms
        matched = [t for t in dict.fromkeys(wanted) if t in self._postings]
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
        lexical, matched = self.lexical_scores(query, self.lexical_terms(query))
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
