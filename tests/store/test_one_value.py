"""A one-value list is an equality on PostgreSQL (decision 354): same rows, same order."""

from __future__ import annotations

from buzz.store.base import EventStore
from buzz.store.dialect import POSTGRES, Params
from tests.store.helpers import ALICE, BOB, T0, by_id, flt, ids, insert_all, make, query_ids


def test_one_value_is_an_equality_several_are_any() -> None:
    one = Params(POSTGRES)
    assert one.in_list("e.pubkey", ["ab"], "text") == "e.pubkey = $1::text"
    assert one.in_list("e.kind", [9], "int") == "e.kind = $2::bigint"
    assert one.in_list("t.value", ["x"], "utf8") == "t.value = $3::bytea"
    assert one.values == ["ab", 9, b"x"]
    several = Params(POSTGRES)
    assert several.in_list("e.pubkey", ["b", "a"], "text") == "e.pubkey = ANY($1::text[])"
    assert several.values == [["a", "b"]]


async def test_one_author_and_kind_read_like_several(store: EventStore) -> None:
    """`{"authors":[a],"kinds":[k]}` (equalities) and the same with a second author and kind
    that match nothing (`= ANY`) give the same newest-first page."""
    mine = [make(1, f"a{i}", created_at=T0 + i // 2, who=ALICE) for i in range(7)]
    others = [make(1, "b", who=BOB), make(7, "k7", who=ALICE)]
    await insert_all(store, *mine, *others)
    want = ids(sorted(by_id(*mine), key=lambda e: -e.event.created_at))[:5]
    one = await query_ids(store, flt(authors=[ALICE.pubkey], kinds=[1], limit=5))
    assert one == want
    several = await query_ids(store, flt(authors=[ALICE.pubkey, "44" * 32], kinds=[1, 2], limit=5))
    assert several == want
