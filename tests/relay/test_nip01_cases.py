"""Cases users hit on other relays (issue 2 §6), over real WebSocket, on both backends."""

from __future__ import annotations

import time

import pytest

from buzz.client import RelayError
from buzz.core.event import Event
from tests.support.relay import Identity, RunningRelay


async def test_replaceable_tie_keeps_lowest_id_in_both_orders(relay: RunningRelay, alice: Identity) -> None:
    ts = int(time.time())
    a = Event.create(alice.secret, 0, '{"name":"a"}', created_at=ts)
    b = Event.create(alice.secret, 0, '{"name":"b"}', created_at=ts)
    low, high = sorted([a, b], key=lambda e: e.id)
    for order in ([low, high], [high, low]):
        # A fresh author per order, so each run starts from an empty key.
        who = Identity.new()
        first, second = (Event.create(who.secret, 0, e.content, created_at=ts) for e in order)
        async with relay.client(who) as c:
            r1, r2 = await c.publish(first), await c.publish(second)
            got = await c.query([{"kinds": [0], "authors": [who.pubkey]}])
        assert [e.id for e in got] == [min(first.id, second.id)]
        assert (r1.accepted, r1.message) == (True, "")
        if second.id > first.id:  # the loser arrived second: never stored, and says so (issue 25)
            assert (r2.accepted, r2.message) == (False, "duplicate: have a newer version")
        else:
            assert (r2.accepted, r2.message) == (True, "")


async def test_newer_replaceable_wins_older_is_refused_as_duplicate(
    relay: RunningRelay, alice: Identity
) -> None:
    """Issue 25 item 4: a version that will never be served is `OK false`, not stored."""
    now = int(time.time())  # read at the test, not at import: a loaded run starts it minutes later
    async with relay.client(alice) as c:
        new = Event.create(alice.secret, 0, '{"v":2}', created_at=now)
        old = Event.create(alice.secret, 0, '{"v":1}', created_at=now - 10)
        assert (await c.publish(new)).accepted
        r = await c.publish(old)
        assert (r.accepted, r.message) == (False, "duplicate: have a newer version")
        r = await c.publish(new)
        assert (r.accepted, r.message) == (True, "duplicate:")  # the served version again
        got = await c.query([{"kinds": [0], "authors": [alice.pubkey]}])
        assert [e.id for e in got] == [new.id]


async def test_since_equals_until_equals_created_at_matches(relay: RunningRelay, alice: Identity) -> None:
    ts = int(time.time()) - 5
    async with relay.client(alice) as c:
        e = Event.create(alice.secret, 1, "edge", created_at=ts)
        await c.publish(e)
        got = await c.query([{"kinds": [1], "authors": [alice.pubkey], "since": ts, "until": ts}])
        assert [x.id for x in got] == [e.id]


async def test_empty_authors_matches_nothing(relay: RunningRelay, alice: Identity) -> None:
    async with relay.client(alice) as c:
        await c.publish(Event.create(alice.secret, 1, "x"))
        assert await c.query([{"kinds": [1], "authors": []}]) == []


async def test_limit_zero_gives_eose_then_live(relay: RunningRelay, alice: Identity) -> None:
    async with relay.client(alice) as c:
        await c.publish(Event.create(alice.secret, 1, "stored"))
        sub = await c.subscribe([{"kinds": [1], "authors": [alice.pubkey], "limit": 0}])
        await sub.eose.wait()
        assert sub.queue.empty()
        live = Event.create(alice.secret, 1, "live")
        await c.publish(live)
        assert (await sub.next()).id == live.id


async def test_tag_values_are_exact(relay: RunningRelay, alice: Identity) -> None:
    async with relay.client(alice) as c:
        e = Event.create(alice.secret, 1, "tagged", [["t", "nostr"]])
        await c.publish(e)
        assert await c.query([{"kinds": [1], "#t": ["nos"]}]) == []
        assert await c.query([{"kinds": [1], "#t": ["Nostr"]}]) == []
        assert [x.id for x in await c.query([{"kinds": [1], "#t": ["nostr"]}])] == [e.id]


async def test_tag_filters_and_across_keys(relay: RunningRelay, alice: Identity, bob: Identity) -> None:
    async with relay.client(alice) as c:
        both = Event.create(alice.secret, 1, "both", [["t", "x"], ["p", bob.pubkey]])
        only_t = Event.create(alice.secret, 1, "t only", [["t", "x"]])
        await c.publish(both)
        await c.publish(only_t)
        got = await c.query([{"kinds": [1], "#t": ["x"], "#p": [bob.pubkey]}])
        assert [e.id for e in got] == [both.id]


async def test_limit_with_equal_timestamps_newest_then_lowest_id(
    relay: RunningRelay, alice: Identity
) -> None:
    ts = int(time.time()) - 3
    async with relay.client(alice) as c:
        older = Event.create(alice.secret, 1, "older", created_at=ts - 1)
        same = [Event.create(alice.secret, 1, f"same {i}", created_at=ts) for i in range(4)]
        for e in [older, *same]:
            await c.publish(e)
        got = await c.query([{"kinds": [1], "authors": [alice.pubkey], "limit": 3}])
        assert [e.id for e in got] == sorted(e.id for e in same)[:3]


async def test_float_since_is_rejected(relay: RunningRelay, alice: Identity) -> None:
    async with relay.client(alice) as c:
        with pytest.raises(RelayError) as err:
            await c.query([{"kinds": [1], "since": 1.5}])
        assert err.value.message.startswith("invalid: bad filter:")
        with pytest.raises(RelayError):
            await c.query([{"kinds": [1], "since": 1.0}])


async def test_delete_by_address_hides_and_blocks_older(relay: RunningRelay, alice: Identity) -> None:
    ts = int(time.time()) - 100
    async with relay.client(alice) as c:
        art = Event.create(alice.secret, 30023, "v1", [["d", "post"]], created_at=ts)
        assert (await c.publish(art)).accepted
        deletion = Event.create(
            alice.secret, 5, "", [["a", f"30023:{alice.pubkey}:post"]], created_at=ts + 10
        )
        r = await c.publish(deletion)
        assert r.accepted, r.message
        flt = {"kinds": [30023], "authors": [alice.pubkey]}
        assert await c.query([flt]) == []
        older = Event.create(alice.secret, 30023, "v0.5", [["d", "post"]], created_at=ts + 5)
        r = await c.publish(older)
        assert (r.accepted, r.message) == (False, "blocked: deleted")
        r = await c.publish(art)
        assert (r.accepted, r.message) == (False, "blocked: deleted")
        assert await c.query([flt]) == []
        newer = Event.create(alice.secret, 30023, "v2", [["d", "post"]], created_at=ts + 20)
        r = await c.publish(newer)
        assert r.accepted and r.message == ""
        assert [e.id for e in await c.query([flt])] == [newer.id]
        # The kind 5 itself is stored and served.
        assert [e.id for e in await c.query([{"kinds": [5], "authors": [alice.pubkey]}])] == [deletion.id]


async def test_delete_by_id_blocks_resubmission(relay: RunningRelay, alice: Identity) -> None:
    async with relay.client(alice) as c:
        note = Event.create(alice.secret, 1, "regret")
        await c.publish(note)
        r = await c.publish(Event.create(alice.secret, 5, "", [["e", note.id]]))
        assert r.accepted, r.message
        assert await c.query([{"ids": [note.id]}]) == []
        again = await c.publish(note)
        assert (again.accepted, again.message) == (False, "blocked: deleted")  # issue 25 item 4
        assert await c.query([{"ids": [note.id]}]) == []
        assert await c.count([{"kinds": [1], "authors": [alice.pubkey]}]) == 0


async def test_deleting_someone_elses_event_does_nothing(
    relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    async with relay.client(alice) as a, relay.client(bob) as b:
        note = Event.create(alice.secret, 1, "mine")
        await a.publish(note)
        r = await b.publish(Event.create(bob.secret, 5, "", [["e", note.id]]))
        assert not r.accepted and r.message == "invalid: must be event author"
        assert [e.id for e in await a.query([{"ids": [note.id]}])] == [note.id]
        assert await b.query([{"kinds": [5], "authors": [bob.pubkey]}]) == []


async def test_duplicate_is_ok_true(relay: RunningRelay, alice: Identity) -> None:
    async with relay.client(alice) as c:
        e = Event.create(alice.secret, 1, "twice")
        assert (await c.publish(e)).message == ""
        r = await c.publish(e)
        assert r.accepted and r.message.startswith("duplicate:")


async def test_ephemeral_fanned_out_never_stored(relay: RunningRelay, alice: Identity, bob: Identity) -> None:
    async with relay.client(alice) as a, relay.client(bob) as b:
        sub = await b.subscribe([{"kinds": [20002], "authors": [alice.pubkey]}])
        await sub.eose.wait()
        typing = Event.create(alice.secret, 20002, "")
        r = await a.publish(typing)
        assert r.accepted, r.message
        assert (await sub.next()).id == typing.id
        assert await b.query([{"kinds": [20002], "authors": [alice.pubkey]}]) == []


async def test_contact_list_with_1500_p_tags(relay: RunningRelay, alice: Identity) -> None:
    follows = [Identity.new().pubkey for _ in range(1500)]
    async with relay.client(alice) as c:
        e = Event.create(alice.secret, 3, "", [["p", pk] for pk in follows])
        r = await c.publish(e)
        assert r.accepted and r.message == ""
        got = await c.query([{"kinds": [3], "authors": [alice.pubkey]}])
        assert got[0].id == e.id and len(got[0].tags) == 1500


async def test_content_with_every_escape_round_trips(relay: RunningRelay, alice: Identity) -> None:
    content = 'q"b\\n\nr\rt\tb\bf\fu\u0001s/ls\u2028ps\u2029del\x7f emoji 😀 ünï'
    async with relay.client(alice) as c:
        e = Event.create(alice.secret, 1, content)
        assert (await c.publish(e)).accepted
        got = await c.query([{"ids": [e.id]}])
        assert got[0].content == content and got[0].id == e.id


async def test_bad_frames_get_notice_and_socket_survives(sqlite_relay: RunningRelay, alice: Identity) -> None:
    async with sqlite_relay.client(alice) as c:
        for frame in ["not json", '{"a":1}', "[]", '["NOPE"]', "[1,2]"]:
            await c.send_raw(frame)
        e = Event.create(alice.secret, 1, "still here")
        assert (await c.publish(e)).accepted
        assert len(c.notices) == 5
        assert all(n.startswith("invalid message:") for n in c.notices)


async def test_auth_with_wrong_challenge_gets_ok_false(sqlite_relay: RunningRelay, alice: Identity) -> None:
    from buzz.core.nip42 import build_auth_event

    async with sqlite_relay.client(alice, auth=False) as c:
        await c.challenge
        bad = build_auth_event(alice.secret, "0" * 64, sqlite_relay.url)
        r = await c._send_and_wait_ok("AUTH", bad)
        assert not r.accepted and r.message == "auth-required: verification failed"


async def test_duplicate_gets_no_second_live_delivery(
    relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    async with relay.client(alice) as a, relay.client(bob) as b:
        sub = await b.subscribe([{"kinds": [1], "authors": [alice.pubkey]}])
        await sub.eose.wait()
        e = Event.create(alice.secret, 1, "once")
        await a.publish(e)
        assert (await sub.next()).id == e.id
        r = await a.publish(e)
        assert r.message.startswith("duplicate:")
        marker = Event.create(alice.secret, 1, "marker")
        await a.publish(marker)
        assert (await sub.next()).id == marker.id  # nothing in between


async def test_e_tag_values_are_case_sensitive(relay: RunningRelay, alice: Identity) -> None:
    async with relay.client(alice) as c:
        target = "ab" * 32
        e = Event.create(alice.secret, 1, "ref", [["e", target]])
        await c.publish(e)
        assert await c.query([{"kinds": [1], "#e": [target.upper()]}]) == []
        assert [x.id for x in await c.query([{"kinds": [1], "#e": [target]}])] == [e.id]


async def test_or_across_filters_and_within_a_tag_key(relay: RunningRelay, alice: Identity) -> None:
    async with relay.client(alice) as c:
        a = Event.create(alice.secret, 1, "a", [["t", "a"]])
        b = Event.create(alice.secret, 1, "b", [["t", "b"]])
        z = Event.create(alice.secret, 1, "z", [["t", "z"]])
        for e in (a, b, z):
            await c.publish(e)
        within = await c.query([{"kinds": [1], "#t": ["a", "b"]}])
        assert {e.id for e in within} == {a.id, b.id}
        across = await c.query([{"kinds": [1], "#t": ["a"]}, {"kinds": [1], "#t": ["z"]}])
        assert {e.id for e in across} == {a.id, z.id}
