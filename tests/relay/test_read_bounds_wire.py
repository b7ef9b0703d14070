"""Read bounds as a client meets them (issue 24 items 9–11, docs/limits.md "Reads"): search
terms deduplicated and capped, COUNT refused past its budget of gated candidates, tags per
event capped by kind. Real relay, real WebSocket."""

from __future__ import annotations

import pytest

from buzz.client import RelayClient
from buzz.client.relay_client import RelayError
from buzz.core.event import Event
from buzz.core.limits import COUNT_EXACT_BUDGET, DEFAULT_MAX_TAGS, SEARCH_MAX_TERM_BYTES, SEARCH_MAX_TERMS
from buzz.core.stored import verify_stored
from tests.support.relay import Identity, RunningRelay


async def _refusal(client: RelayClient, filters: list[dict], count: bool = False) -> str:
    with pytest.raises(RelayError) as refused:
        await (client.count(filters) if count else client.query(filters))
    return str(refused.value)


async def test_search_terms_are_deduplicated_and_capped(relay: RunningRelay, alice: Identity) -> None:
    async with relay.client(alice) as a:
        note = Event.create(alice.secret, 1, "the quick brown fox", [])
        assert (await a.publish(note)).accepted
        # 4 KB of one word (107 s on SQLite before) is one term.
        assert [e.id for e in await a.query([{"search": "Quick " * 680}])] == [note.id]
        words = [f"w{i}" for i in range(SEARCH_MAX_TERMS + 1)]
        assert await _refusal(a, [{"search": " ".join(words)}]) == (
            f"invalid: search has too many terms ({SEARCH_MAX_TERMS + 1} distinct, max {SEARCH_MAX_TERMS})"
        )
        assert await a.query([{"search": " ".join(words[:-1] * 3)}]) == []
        long = "x" * (SEARCH_MAX_TERM_BYTES + 1)
        assert await _refusal(a, [{"search": f"fox {long}"}]) == (
            f"invalid: search term too long ({SEARCH_MAX_TERM_BYTES + 1} bytes, max {SEARCH_MAX_TERM_BYTES})"
        )
        assert [e.id for e in await a.query([{"search": "fox"}])] == [note.id]  # the connection lives


async def test_count_past_its_budget_of_gated_candidates_is_refused(
    relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    rows = [
        (verify_stored(Event.create(alice.secret, 30300, "x", [["d", f"r{i}"]])), ())
        for i in range(COUNT_EXACT_BUDGET + 1)
    ]
    await relay.relay.store.insert_many(rows)
    async with relay.client(alice) as a, relay.client(bob) as b:
        assert (await a.publish(Event.create(alice.secret, 1, "note", []))).accepted
        # Each of alice's author-only rows is hers to count: one past the budget is refused.
        assert await _refusal(a, [{"kinds": [1, 30300]}], count=True) == (
            "restricted: count filter requires narrower constraints"
        )
        assert await _refusal(a, [{}], count=True) == "restricted: count filter requires narrower constraints"
        # authors=[self] passes the gate in SQL: counted exactly; bob reads none of them.
        assert await a.count([{"kinds": [30300], "authors": [alice.pubkey]}]) == COUNT_EXACT_BUDGET + 1
        assert await b.count([{"kinds": [1, 30300]}]) == 1
        assert await b.count([{}]) == 1


async def test_tags_per_event_are_capped_by_kind(sqlite_relay: RunningRelay, alice: Identity) -> None:
    async with sqlite_relay.client(alice) as a:
        over = Event.create(alice.secret, 1, "", [["t", "x"]] * (DEFAULT_MAX_TAGS + 1))
        result = await a.publish(over)
        assert not result.accepted
        assert (
            result.message
            == f"invalid: too many tags ({DEFAULT_MAX_TAGS + 1}, max {DEFAULT_MAX_TAGS} for kind 1)"
        )
        assert (await a.publish(Event.create(alice.secret, 1, "", [["t", "x"]] * DEFAULT_MAX_TAGS))).accepted
        # A contact list may name more people than a note carries tags.
        follows = [["p", f"{i:064x}"] for i in range(DEFAULT_MAX_TAGS + 1)]
        assert (await a.publish(Event.create(alice.secret, 3, "", follows))).accepted
