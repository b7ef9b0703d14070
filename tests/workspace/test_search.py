"""NIP-50 search in the workspace (relay.md §11, §7.5 item 7, §7.7 item 1; §18 items 61, 70–73),
over real WebSocket on both backends."""

from __future__ import annotations

import pytest

from buzz.client import RelayError
from buzz.core.event import Event
from buzz.core.stored import verify_stored
from tests.support.relay import Identity, RunningRelay
from tests.workspace.helpers import accepted, create_channel, drain, ids, message, put_user, settle


async def _inject(relay: RunningRelay, event: Event) -> None:
    """Store an event as the ingest path would after its rules (for kinds whose writers are
    other components: wraps, turn metrics, engrams)."""
    await relay.relay.store.insert(verify_stored(event))


async def test_member_finds_channel_message_and_non_member_does_not(
    relay: RunningRelay, alice: Identity, bob: Identity, carol: Identity
) -> None:
    async with relay.client(alice) as a, relay.client(bob) as b, relay.client(carol) as c:
        private = await create_channel(a, alice, "private")
        opened = await create_channel(a, alice, "open", name="lobby")
        await put_user(a, alice, private, bob.pubkey)
        secret = await message(a, alice, private, "the quarterly roadmap is ready")
        public = await message(a, alice, opened, "roadmap discussion welcome")
        assert await ids(b, {"search": "roadmap", "kinds": [9]}) == {secret.id, public.id}
        assert await ids(b, {"search": "QUARTERLY Roadmap", "kinds": [9]}) == {
            secret.id
        }  # case-insensitive, AND
        assert await ids(b, {"search": "roadmap", "#h": [private]}) == {secret.id}
        assert await ids(c, {"search": "roadmap", "kinds": [9]}) == {
            public.id
        }  # only readable channels (§18 item 73)
        with pytest.raises(RelayError) as err:
            await c.query([{"search": "roadmap", "#h": [private]}])
        assert err.value.message == "restricted: not a channel member"
        assert await ids(b, {"search": "road", "kinds": [9]}) == set()  # whole tokens only
        assert await ids(b, {"search": "   ", "kinds": [9]}) == set()


async def test_non_searchable_kinds_never_match(relay: RunningRelay, alice: Identity, bob: Identity) -> None:
    word = "zebracorn"
    note = Event.create(alice.secret, 1, f"a {word} note")
    wrap = Event.create(Identity.new().secret, 1059, f"{word} wrapped", [["p", alice.pubkey]])
    reminder = Event.create(alice.secret, 30300, f"{word} later", [["d", "r1"], ["not_before", "1"]])
    metric = Event.create(bob.secret, 44200, f"{word} usage", [["p", alice.pubkey], ["agent", bob.pubkey]])
    engram = Event.create(bob.secret, 30174, f"{word} memory", [["d", "m"], ["p", alice.pubkey]])
    lease = Event.create(alice.secret, 30350, f"{word} lease", [["d", "l"]])
    for event in (note, wrap, reminder, metric, engram, lease):
        await _inject(relay, event)
    async with relay.client(alice) as a:
        assert await ids(a, {"search": word, "kinds": [1]}) == {note.id}
        assert await ids(a, {"search": word, "kinds": [1059, 44200], "#p": [alice.pubkey]}) == set()
        assert await ids(a, {"search": word, "kinds": [30300, 30350], "authors": [alice.pubkey]}) == set()
        assert await ids(a, {"search": word, "kinds": [30174], "#p": [alice.pubkey]}) == set()
        # the same events are visible to alice through ordinary reads
        assert await ids(a, {"kinds": [1059, 44200], "#p": [alice.pubkey]}) == {wrap.id, metric.id}
        assert await ids(a, {"kinds": [30300, 30350], "authors": [alice.pubkey]}) == {reminder.id, lease.id}


async def test_search_refusals(relay: RunningRelay, alice: Identity) -> None:
    async with relay.client(alice) as a:
        with pytest.raises(RelayError) as err:
            await a.query([{"search": "x", "kinds": [1]}, {"kinds": [1]}])
        assert err.value.message == "error: mixed search and non-search filters not supported"
        with pytest.raises(RelayError) as err:
            await a.count([{"search": "x", "kinds": [1]}])
        assert err.value.message == "invalid: search is not supported in COUNT"
        with pytest.raises(RelayError) as err:  # gates run before the search branch (§18 item 61)
            await a.query([{"kinds": [30174], "search": "x"}])
        assert err.value.message == "restricted: agent-engram reads require authors=[self] or #p=[self]"
        with pytest.raises(RelayError) as err:
            await a.query([{"kinds": [1059], "search": "x"}])
        assert err.value.message == "restricted: p-gated events require #p matching your pubkey"


async def test_search_ends_with_eose_and_is_never_live(
    relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    async with relay.client(alice) as a, relay.client(bob) as b:
        c = await create_channel(a, alice)
        before = await message(a, alice, c, "kiwi before")
        sub = await b.subscribe([{"search": "kiwi", "kinds": [9], "#h": [c]}])
        await sub.eose.wait()
        assert [e.id for e in drain(sub)] == [before.id]
        assert sub.closed_reason is None
        after = await message(a, alice, c, "kiwi after")
        plain = await b.subscribe([{"kinds": [9], "#h": [c]}])  # a live sub on the same connection
        await plain.eose.wait()
        await accepted(a, Event.create(alice.secret, 9, "kiwi live", [["h", c]]))
        await settle(b)
        assert {e.content for e in drain(plain)} == {"kiwi after", "kiwi before", "kiwi live"}
        assert drain(sub) == []  # the search subscription got nothing after EOSE
        assert after.id != before.id
