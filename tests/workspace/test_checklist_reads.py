"""relay.md §18 items 55–69 and 74–77: filter gates, COUNT and deletion as a client sees them,
over real WebSocket on both backends. (Items 64–65 and 70–73 are in test_records / test_search,
the path × reader matrix in test_gates_matrix.)"""

from __future__ import annotations

import time

import pytest

from buzz.client import RelayClient, RelayError
from buzz.core.event import Event
from buzz.core.nip_oa import build_auth_tag
from buzz.core.stored import verify_stored
from tests.support.relay import Identity, RunningRelay
from tests.workspace.helpers import accepted, create_channel, ids, message, refused

P_GATE = "restricted: p-gated events require #p matching your pubkey"
ENGRAM_GATE = "restricted: agent-engram reads require authors=[self] or #p=[self]"
AO_GATE = "restricted: author-only kinds require authors=[self]"


async def _closed(client: RelayClient, *filters: dict, count: bool = False) -> str:
    with pytest.raises(RelayError) as err:
        if count:
            await client.count(list(filters))
        else:
            await client.query(list(filters))
    return err.value.message


async def _inject(relay: RunningRelay, event: Event) -> Event:
    await relay.relay.store.insert(verify_stored(event))
    return event


async def test_p_gated_reads(relay: RunningRelay, alice: Identity, bob: Identity) -> None:
    throwaway = Identity.new()
    async with relay.client(alice) as a, relay.client(bob) as b:
        to_alice = Event.create(throwaway.secret, 1059, "wrapped", [["p", alice.pubkey]])
        to_bob = Event.create(throwaway.secret, 1059, "wrapped", [["p", bob.pubkey]])
        for wrap in (to_alice, to_bob):
            await accepted(a, wrap)  # §8 item 4: 1059 may carry another pubkey
        assert await _closed(a, {"kinds": [1059]}) == P_GATE  # 55
        assert await _closed(a, {"kinds": [1059], "#p": [alice.pubkey, bob.pubkey]}) == P_GATE  # 56
        assert await ids(a, {"kinds": [1059], "#p": [alice.pubkey]}) == {to_alice.id}
        assert await ids(b, {"ids": [to_alice.id]}) == set()  # 58
        assert await ids(a, {"ids": [to_alice.id]}) == {to_alice.id}
        # 59, changed by issue 25 item 3 (decision 171): a filter without kinds is served, each
        # gift wrap dropped for a reader it does not name.
        assert await ids(a, {"authors": [throwaway.pubkey]}) == {to_alice.id}
        assert await ids(b, {"authors": [throwaway.pubkey]}) == {to_bob.id}
        assert await ids(a, {}) == {to_alice.id}
        assert (await a.count([{"since": 0}]), await b.count([{"since": 0}])) == (1, 1)
        assert await _closed(a, {"kinds": [1059, 44200]}) == P_GATE  # every kind it names is gated
        assert await ids(a, {"kinds": [1059, 1], "authors": [throwaway.pubkey]}) == {to_alice.id}


async def test_turn_metrics_are_result_gated(relay: RunningRelay, alice: Identity) -> None:
    owner, agent = alice, Identity.new()
    metric = await _inject(
        relay, Event.create(agent.secret, 44200, "enc", [["p", owner.pubkey], ["agent", agent.pubkey]])
    )
    async with relay.client(owner) as o, relay.client(agent) as g:
        assert await _closed(o, {"ids": [metric.id], "kinds": [44200]}) == P_GATE  # 57
        assert await ids(g, {"ids": [metric.id]}) == set()  # 66: the agent cannot read its own
        assert await ids(g, {"kinds": [44200], "#p": [agent.pubkey]}) == set()
        assert await ids(o, {"kinds": [44200], "#p": [owner.pubkey]}) == {metric.id}


async def test_engram_gate(relay: RunningRelay, alice: Identity, bob: Identity, carol: Identity) -> None:
    engram = await _inject(relay, Event.create(alice.secret, 30174, "enc", [["d", "m1"], ["p", bob.pubkey]]))
    async with relay.client(alice) as a, relay.client(bob) as b, relay.client(carol) as c:
        assert await _closed(c, {"kinds": [30174]}) == ENGRAM_GATE  # 60
        assert await _closed(c, {"ids": [engram.id], "kinds": [30174]}) == ENGRAM_GATE  # 61
        assert await ids(c, {"ids": [engram.id]}) == set()
        assert await ids(a, {"kinds": [30174], "authors": [alice.pubkey]}) == {engram.id}
        assert await ids(b, {"kinds": [30174], "#p": [bob.pubkey]}) == {engram.id}


async def test_author_only_gate_and_count(relay: RunningRelay, alice: Identity, bob: Identity) -> None:
    now = int(time.time())
    async with relay.client(alice) as a, relay.client(bob) as b:
        mine = Event.create(alice.secret, 30300, "sealed", [["d", "r"], ["not_before", str(now)]])
        theirs = Event.create(bob.secret, 30300, "sealed", [["d", "r"], ["not_before", str(now)]])
        profile = Event.create(bob.secret, 0, "{}")
        await accepted(a, mine)
        await accepted(b, theirs)
        await accepted(b, profile)
        persona = Event.create(bob.secret, 30175, '{"display_name": "Helper"}', [["d", "quiet"]])
        await accepted(b, persona)
        assert await _closed(a, {"kinds": [30300]}) == AO_GATE  # 62
        assert await ids(a, {"kinds": [30300], "authors": [alice.pubkey]}) == {mine.id}
        mixed = {"kinds": [30300, 0], "authors": [alice.pubkey, bob.pubkey]}  # 63
        assert await ids(a, mixed) == {mine.id, profile.id}
        assert await a.count([mixed]) == 2  # 68: no foreign author-only event counted
        assert await b.count([mixed]) == 2
        personas = {"kinds": [30175], "authors": [bob.pubkey]}
        assert (await a.count([personas]), await b.count([personas])) == (0, 1)  # 68: unshared persona
        assert await _closed(a, {"kinds": [30300]}, count=True) == AO_GATE  # 69
        private = await create_channel(b, bob, "private")
        assert (
            await _closed(a, {"kinds": [9], "#h": [private]}, count=True)
            == "restricted: not a channel member"
        )


async def test_kind_5_deletes_everywhere(relay: RunningRelay, alice: Identity, bob: Identity) -> None:
    async with relay.client(alice) as a, relay.client(bob) as b:
        c = await create_channel(a, alice)
        note = await message(a, alice, c, "pineapple pizza")
        view = {"kinds": [9], "#h": [c]}
        assert await ids(b, view) == {note.id} and await b.count([view]) == 1
        await refused(
            relay,
            b,
            Event.create(bob.secret, 5, "", [["e", note.id], ["h", c]]),
            "invalid: must be event author",
        )  # 75
        two = Event.create(alice.secret, 5, "", [["e", note.id], ["e", note.id]])
        await refused(
            relay, a, two, f'invalid: deletions of a channel event must carry its channel: add ["h","{c}"]'
        )  # 76, changed by issue 25 items 5–6: a repeated target counts once, the h is required
        deletion = Event.create(alice.secret, 5, "", [["e", note.id], ["h", c]])
        await accepted(a, deletion)  # 74
        assert await ids(b, view) == set()
        assert await ids(b, {"ids": [note.id]}) == set()
        assert await b.count([view]) == 0
        assert await ids(b, {"search": "pineapple", "kinds": [9]}) == set()
        assert await ids(b, {"ids": [deletion.id]}) == {deletion.id}
        resubmitted = await a.publish(note)  # not restored, and says so (issue 25 item 4)
        assert (resubmitted.accepted, resubmitted.message) == (False, "blocked: deleted")


async def test_registered_owner_may_delete(relay: RunningRelay, alice: Identity) -> None:
    agent = Identity.new()
    async with relay.client(agent, auth_tags=[build_auth_tag(alice.secret, agent.pubkey)]) as g:
        note = Event.create(agent.secret, 1, "agent note")
        await accepted(g, note)
    async with relay.client(alice) as a:
        await accepted(a, Event.create(alice.secret, 5, "", [["e", note.id]]))  # 75
        assert await ids(a, {"ids": [note.id]}) == set()


async def test_address_deletion(relay: RunningRelay, alice: Identity) -> None:
    now = int(time.time())
    address = f"30023:{alice.pubkey}:essay"
    async with relay.client(alice) as a:
        first = Event.create(alice.secret, 30023, "v1", [["d", "essay"]], created_at=now - 10)
        await accepted(a, first)
        await accepted(a, Event.create(alice.secret, 5, "", [["a", address]], created_at=now - 5))
        flt = {"kinds": [30023], "authors": [alice.pubkey]}
        assert await ids(a, flt) == set()  # 77
        stale = Event.create(alice.secret, 30023, "v2", [["d", "essay"]], created_at=now - 5)
        answer = await a.publish(stale)
        assert (answer.accepted, answer.message) == (False, "blocked: deleted")  # issue 25 item 4
        assert await ids(a, flt) == set()
        fresh = Event.create(alice.secret, 30023, "v3", [["d", "essay"]], created_at=now - 4)
        await accepted(a, fresh)
        assert await ids(a, flt) == {fresh.id}


async def test_deleted_profile_is_not_revived(relay: RunningRelay, alice: Identity) -> None:
    now = int(time.time())
    async with relay.client(alice) as a:
        old = Event.create(alice.secret, 0, '{"name":"old"}', created_at=now - 20)
        live_profile = Event.create(alice.secret, 0, '{"name":"new"}', created_at=now - 10)
        await accepted(a, old)
        await accepted(a, live_profile)
        await accepted(a, Event.create(alice.secret, 5, "", [["e", live_profile.id]]))  # 99
        older = Event.create(alice.secret, 0, '{"name":"older"}', created_at=now - 15)
        answer = await a.publish(older)
        assert (answer.accepted, answer.message) == (False, "duplicate: have a newer version")  # issue 25
        assert await ids(a, {"kinds": [0], "authors": [alice.pubkey]}) == set()
