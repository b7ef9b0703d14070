"""Ranking of the client-side recall index on a small fixed set (issue 16 item 1)."""

from __future__ import annotations

import numpy as np
import pytest

from buzz.recall import embed
from buzz.recall.rank import MAX_LIMIT, RecallIndex, identifier_terms, snippet, written_as_name

NOTES = [
    ("dana-reviews", "Dana prefers async reviews over meetings"),
    ("atlas-budget", "The Q3 budget for project Atlas is 40,000 euros"),
    ("db-choice", "We decided to move the database to PostgreSQL in March"),
    ("omar-food", "Omar is allergic to peanuts"),
    ("lena-birthday", "Lena's birthday is on 14 May"),
    ("dana-tea", "Dana drinks green tea, never coffee"),
    ("dana-languages", "Dana speaks fluent Japanese and some Korean"),
]


@pytest.fixture(scope="module")
def index() -> RecallIndex:
    return RecallIndex(NOTES)


def test_vectors_are_unit_rows_of_the_packaged_model() -> None:
    vectors = embed.encode(["Dana prefers async reviews", ""])
    assert vectors.shape == (2, embed.DIMENSIONS)
    assert np.allclose(np.linalg.norm(vectors[0]), 1.0, atol=1e-5)


@pytest.mark.parametrize(
    ("query", "slug"),
    [
        ("how does Dana like to get feedback?", "dana-reviews"),
        ("how much money can Atlas spend this quarter?", "atlas-budget"),
        ("what food should Omar avoid?", "omar-food"),
        ("peanuts", "omar-food"),
        ("what beverage should I offer Dana?", "dana-tea"),
        ("what languages does Dana know?", "dana-languages"),
    ],
)
def test_hybrid_ranks_the_paraphrased_note_first(index: RecallIndex, query: str, slug: str) -> None:
    assert index.search(query, 1)[0].slug == slug


@pytest.mark.parametrize(
    ("query", "slug"),
    [
        ("what data store did the team choose?", "db-choice"),
        ("what nuts cause a reaction?", "omar-food"),
        ("when is the celebration of her birth?", "lena-birthday"),
        ("how much cash is available this quarter?", "atlas-budget"),
    ],
)
def test_a_query_sharing_no_word_ranks_exactly_as_embeddings(
    index: RecallIndex, query: str, slug: str
) -> None:
    bm25, _ = index.bm25_scores(query)
    assert not bm25.any()
    hybrid = [(h.slug, h.score) for h in index.search(query, len(NOTES))]
    alone = [(h.slug, h.score) for h in index.search(query, len(NOTES), mode="embedding")]
    assert hybrid == alone
    assert hybrid[0][0] == slug


def test_a_shared_name_does_not_drown_the_question(index: RecallIndex) -> None:
    # Three notes name Dana; BM25 sees only the name and picks the shortest note.
    query = "what beverage should I offer Dana?"
    assert index.search(query, 1, mode="bm25")[0].slug != "dana-tea"
    assert index.search(query, 1)[0].slug == "dana-tea"


def test_an_exact_word_match_outranks_a_shared_chance_word(index: RecallIndex) -> None:
    hits = index.search("Lena birthday", 2, mode="bm25")
    assert hits[0].slug == "lena-birthday"
    assert hits[1].score == 0.0


def test_results_carry_score_and_snippet_best_first(index: RecallIndex) -> None:
    hits = index.search("Dana async reviews", 3)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert hits[0].as_json() == {
        "slug": "dana-reviews",
        "score": round(hits[0].score, 4),
        "snippet": "Dana prefers async reviews over meetings",
    }


def test_cached_vectors_give_the_same_ranking(index: RecallIndex) -> None:
    again = RecallIndex(NOTES, index.vectors.copy())
    query = "when does Lena celebrate turning a year older?"
    assert [h.slug for h in again.search(query, 5)] == [h.slug for h in index.search(query, 5)]


def test_bad_arguments_are_refused(index: RecallIndex) -> None:
    with pytest.raises(ValueError, match="limit"):
        index.search("x", 0)
    with pytest.raises(ValueError, match="limit"):
        index.search("x", MAX_LIMIT + 1)
    with pytest.raises(ValueError, match="mode"):
        index.search("x", 1, mode="rrf")
    with pytest.raises(ValueError, match="shape"):
        RecallIndex(NOTES, np.zeros((1, embed.DIMENSIONS), dtype=np.float32))


def test_empty_index_and_snippet_cut() -> None:
    assert RecallIndex([]).search("anything", 3) == []
    long = "word " * 100
    cut = snippet(long)
    assert len(cut) == 160 and cut.endswith("…")


def test_a_rare_name_counts_more_than_a_common_word() -> None:
    # "dana" is in one note of eight, "notes" in all but one: a matched term's weight follows
    # its rarity, so the shared word cannot lift the notes that merely contain it.
    docs = [(f"n{i}", f"team notes number {i} about the weekly plan") for i in range(6)]
    docs += [("dana", "Dana prefers async reviews over meetings"), ("other", "notes")]
    index = RecallIndex(docs)
    rare, matched = index.lexical_scores("Dana")
    assert matched == ["dana"] and rare.max() == rare[6] > 0.6
    common, matched = index.lexical_scores("notes")
    assert matched == ["notes"] and 0 < common.max() < rare.max() / 5
    assert index.search("how does Dana like feedback in notes?", 1)[0].slug == "dana"


def test_only_the_top_candidates_are_ordered_and_ties_go_by_slug() -> None:
    docs = [(f"s{i:02d}", "identical text") for i in range(12)]
    index = RecallIndex(docs)
    assert [h.slug for h in index.search("identical text", 3)] == ["s00", "s01", "s02"]


# -- issue 24 item 3: the lexical side takes identifiers only -----------------------------------
def test_identifier_terms_are_the_words_a_query_writes_as_names_or_codes() -> None:
    assert identifier_terms("how does Dana like to get feedback?") == {"dana"}
    assert identifier_terms("Where is the GDPR note for Atlas-17?") == {"gdpr", "atlas", "17"}
    assert identifier_terms("what do visitors type to get online?") == set()
    assert identifier_terms("Dana") == set()  # a sentence's first word says nothing either way
    assert identifier_terms("ok. Where is the UniFi controller?\nWho set up Q3?") == {"unifi", "q3"}


def test_written_names_are_capitalised_mid_sentence_and_never_lower_case() -> None:
    texts = [
        "Dana Kowal prefers async reviews",
        "Fire evacuation: the lamp post across the road",
        "the fire door stays shut",
        "- Tool tags: red means induction",
        "Ravi rotates it on the UniFi controller",
    ]
    words = {"dana", "kowal", "fire", "evacuation", "tool", "tags", "ravi", "unifi", "lamp"}
    assert {w for w in words if written_as_name(w, texts)} == {"kowal", "unifi"}


def test_a_common_word_shared_with_another_memory_does_not_outvote_the_meaning() -> None:
    # The question shares only "someone" with the rota note and no word with the laser note:
    # that word is no evidence the embeddings lacked, so the order is exactly theirs.
    docs = [
        (
            "laser-lens",
            "Trotec laser: wipe the focus lens and mirrors with optic wipes every 20 h of cutting",
        ),
        ("rota", "Changing a rota session: post in the channel and wait until someone confirms cover"),
        ("kitchen", "The fridge is cleared every Sunday evening; label food with a name and date"),
        ("parking", "The yard bays are for loading only, 30 minutes at most"),
    ]
    index = RecallIndex(docs)
    query = "how often should someone clean the glass in the beam engraver?"
    assert index.lexical_scores(query)[1] == ["someone"] and index.lexical_terms(query) == []
    hybrid = [(h.slug, h.score) for h in index.search(query, len(docs))]
    assert hybrid == [(h.slug, h.score) for h in index.search(query, len(docs), mode="embedding")]
    assert hybrid[0][0] == "laser-lens"


def test_a_name_typed_in_lower_case_is_found_as_the_memories_write_it() -> None:
    docs = [("tea", "Dana Kowal drinks green tea"), ("runs", "Omar Berg runs marathons")]
    index = RecallIndex(docs)
    assert index.lexical_terms("what does dana kowal drink?") == ["kowal"]
    assert index.lexical_terms("what does Dana Kowal drink?") == ["dana", "kowal"]
