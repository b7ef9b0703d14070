"""NIP-50 search (relay.md §11): whole tokens, relevance order, non-searchable kinds."""

from __future__ import annotations

import asyncio

import pytest

from buzz.core.stored import StoredEvent
from buzz.store.base import SYSTEM, Effect, EventStore, PutReaction, ReactionExists, SoftDelete
from tests.store.helpers import (
    ALICE,
    BOB,
    CAROL,
    STORED,
    T0,
    by_id,
    create_channel,
    flt,
    ids,
    insert_all,
    make,
    query_ids,
)


async def test_relevance_first_then_newest_then_lowest_id(store: EventStore) -> None:
    """relay.md §11 item 5."""
    strong = make(1, "apple apple apple banana", created_at=T0)
    weak_old = make(1, "apple cherry dolphin elephant fig grape", created_at=T0 + 1)
    weak_new = make(1, "apple cherry dolphin elephant fig grape", created_at=T0 + 2, who=BOB)
    twin = make(1, "apple cherry dolphin elephant fig grape", created_at=T0 + 1, who=CAROL)
    unrelated = make(1, "banana split", created_at=T0 + 3)
    await insert_all(store, strong, weak_old, weak_new, twin, unrelated)
    weak_ties = ids(by_id(weak_old, twin))
    assert await query_ids(store, flt(search="APPLE")) == [strong.event.id, weak_new.event.id, *weak_ties]
    assert await query_ids(store, flt(search="apple", limit=2)) == [strong.event.id, weak_new.event.id]
    assert await query_ids(store, flt(search="apple", limit=0)) == []


async def test_every_term_is_a_whole_token(store: EventStore) -> None:
    """relay.md §11 item 3: AND of terms, whole tokens, case-insensitive, no stemming."""
    both = make(1, "The Quick brown fox")
    one = make(1, "quick thinking")
    await insert_all(store, both, one)
    assert await query_ids(store, flt(search="fox quick")) == [both.event.id]
    assert set(await query_ids(store, flt(search="QUICK"))) == {both.event.id, one.event.id}
    assert await query_ids(store, flt(search="qui")) == []
    assert await query_ids(store, flt(search="foxes")) == []
    assert await query_ids(store, flt(search='quick "fox"')) == [both.event.id]


@pytest.mark.parametrize("text", ["", "   ", "\0", " \0 \t "])
async def test_empty_search_text_has_no_results(store: EventStore, text: str) -> None:
    """relay.md §11 item 2."""
    await store.insert(make(1, "anything"))
    assert await query_ids(store, flt(search=text)) == []


async def test_query_text_normalized(store: EventStore) -> None:
    """relay.md §11 item 2: NUL becomes a space, the text is cut to 4096 characters."""
    target = make(1, "alpha beta")
    await store.insert(target)
    assert await query_ids(store, flt(search="alpha\0beta")) == [target.event.id]
    beyond_cut = "alpha" + " " * 4091 + "missing"
    assert await query_ids(store, flt(search=beyond_cut)) == [target.event.id]
    assert await query_ids(store, flt(search="alpha missing")) == []


@pytest.mark.parametrize("kind", [1059, 30300, 44200, 30174])
async def test_non_searchable_kinds_never_match(store: EventStore, kind: int) -> None:
    """relay.md §11 item 1, §18 item 70."""
    hidden = make(kind, "zebra", [["p", ALICE.pubkey], ["d", "x"]])
    shown = make(1, "zebra")
    await insert_all(store, hidden, shown)
    for reader in (ALICE.pubkey, SYSTEM):
        assert await query_ids(store, flt(search="zebra"), reader=reader) == [shown.event.id]
    assert await query_ids(store, flt(kinds=[kind]), reader=ALICE.pubkey) == [hidden.event.id]


async def test_other_fields_scope_and_deletion_restrict_hits(store: EventStore) -> None:
    """relay.md §11 items 4 and 6, §18 items 73–74."""
    private_c = await create_channel(store, "private")
    in_private = make(9, "walrus", [["h", private_c]], channel=private_c)
    by_bob = make(1, "walrus", who=BOB, created_at=T0 + 1)
    by_alice = make(7, "walrus", created_at=T0 + 2)
    deleted = make(1, "walrus", created_at=T0 + 3)
    await insert_all(store, in_private, by_bob, by_alice, deleted)
    await store.insert(make(5, tags=[["e", deleted.event.id]]), [SoftDelete(deleted.event.id)])
    assert await query_ids(store, flt(search="walrus", authors=[BOB.pubkey])) == [by_bob.event.id]
    assert await query_ids(store, flt(search="walrus", kinds=[7])) == [by_alice.event.id]
    outsider = set(await query_ids(store, flt(search="walrus"), reader=CAROL.pubkey))
    assert outsider == {by_bob.event.id, by_alice.event.id}
    member = set(await query_ids(store, flt(search="walrus"), reader=ALICE.pubkey))
    assert member == {by_bob.event.id, by_alice.event.id, in_private.event.id}


async def test_search_with_accept_pages_in_rank_order(store: EventStore) -> None:
    events = [make(1, f"otter {i}", created_at=T0 + i) for i in range(60)]
    await insert_all(store, *events)
    got = await store.query([flt(search="otter", limit=3)], None, lambda s: s.event.created_at < T0 + 5)
    assert [s.event.created_at for s in got] == [T0 + 4, T0 + 3, T0 + 2]


async def test_writes_committed_together_are_found_and_a_failed_one_is_not(store: EventStore) -> None:
    """Writes that reach the store at once share a group commit on SQLite, which indexes their
    text together at its end (relay.md §11 item 1): every stored event is found, also past a
    reaction's insert among them and texts larger than one index statement takes; a write
    that fails (a second active reaction, §9 item 3) leaves no text behind."""
    channel_id = await create_channel(store)
    target = make(9, "target", [["h", channel_id]], channel=channel_id)
    await store.insert(target)

    def message(i: int, extra: str = "") -> StoredEvent:
        return make(9, f"zebra note{i} {extra}", [["h", channel_id]], created_at=T0 + i, channel=channel_id)

    def reaction(created_at: int) -> tuple[StoredEvent, list[Effect]]:
        r = make(
            7, "zebra", [["e", target.event.id], ["h", channel_id]], created_at=created_at, channel=channel_id
        )
        return r, [PutReaction(r.event.id, ALICE.pubkey, target.event.id, "zebra")]

    messages = [message(i) for i in range(20)] + [message(20 + i, "filler " * 100_000) for i in range(3)]
    kept, kept_effects = reaction(T0 + 100)
    refused, refused_effects = reaction(T0 + 101)
    writes = [store.insert(m) for m in messages[:10]]
    writes += [store.insert(kept, kept_effects)]
    writes += [store.insert(m) for m in messages[10:]]
    writes += [store.insert(refused, refused_effects)]
    outcomes = await asyncio.gather(*writes, return_exceptions=True)
    assert outcomes[:-1] == [STORED] * (len(messages) + 1)
    assert isinstance(outcomes[-1], ReactionExists)
    found = set(await query_ids(store, flt(search="zebra", limit=100), reader=SYSTEM))
    assert found == {m.event.id for m in messages} | {kept.event.id}
    assert await query_ids(store, flt(search="note21 filler")) == [messages[21].event.id]
    assert await store.get(refused.event.id) is None
