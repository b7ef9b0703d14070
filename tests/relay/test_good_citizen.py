"""Issue 25, the relay's part: what third-party Nostr clients hit, over real WebSocket on both
backends (the clients themselves run in tests/interop/). Decisions 170–176."""

from __future__ import annotations

import time

import aiohttp
import orjson
import pytest

from buzz.client import RelayError
from buzz.core.event import Event
from buzz.core.filters import Filter
from buzz.core.nip42 import build_auth_event
from buzz.core.stored import relay_signed
from buzz.relay.auth.banwatch import BANNED, close_banned
from buzz.relay.config import ConfigError, RelayConfig
from tests.support.relay import Identity, RunningRelay, relay_on
from tests.workspace.helpers import (
    accepted,
    create_channel,
    drain,
    ids,
    live,
    message,
    put_user,
    refused,
    settle,
)

DAY = 86_400


# -- item 1, 7: the clock window of gift wraps, the new kinds -----------------------------------------
async def test_gift_wraps_are_dated_up_to_three_days_back(relay: RunningRelay, alice: Identity) -> None:
    now = int(time.time())
    wrapper, bob = Identity.new(), Identity.new()
    async with relay.client(alice) as a:
        wrap = Event.create(wrapper.secret, 1059, "sealed", [["p", bob.pubkey]], created_at=now - 36 * 3600)
        await accepted(a, wrap)  # NIP-59 dates wraps up to two days back
        edge = Event.create(
            wrapper.secret, 1059, "sealed", [["p", bob.pubkey]], created_at=now - 3 * DAY + 60
        )
        await accepted(a, edge)
        too_old = Event.create(wrapper.secret, 1059, "x", [["p", bob.pubkey]], created_at=now - 3 * DAY - 60)
        await refused(relay, a, too_old, "invalid: event timestamp too far from server time")
        future = Event.create(wrapper.secret, 1059, "x", [["p", bob.pubkey]], created_at=now + 960)
        await refused(relay, a, future, "invalid: event timestamp too far from server time")  # unchanged
        old_note = Event.create(alice.secret, 1, "x", created_at=now - 36 * 3600)
        await refused(relay, a, old_note, "invalid: event timestamp too far from server time")  # only 1059
    async with relay.client(bob) as b:
        assert await ids(b, {"kinds": [1059], "#p": [bob.pubkey]}) == {wrap.id, edge.id}
    async with relay.client(alice) as a:
        assert await ids(a, {"ids": [wrap.id]}) == set()  # readable only by its p recipient
        with pytest.raises(RelayError) as err:
            await a.query([{"kinds": [1059]}])
        assert err.value.message == "restricted: p-gated events require #p matching your pubkey"


async def test_common_kinds_of_other_clients(relay: RunningRelay, alice: Identity, bob: Identity) -> None:
    """10050, 10063, 1111, 6, 16 stored and served to everyone; 30024 to its author only."""
    now = int(time.time())
    async with relay.client(alice) as a, relay.client(bob) as b:
        note = Event.create(alice.secret, 1, "a note")
        await accepted(a, note)
        inbox_old = Event.create(
            alice.secret, 10050, "", [["relay", "wss://old.example"]], created_at=now - 5
        )
        inbox = Event.create(alice.secret, 10050, "", [["relay", relay.url]], created_at=now)
        events = [
            inbox_old,
            inbox,
            Event.create(alice.secret, 10063, "", [["server", "https://blossom.example"]]),
            Event.create(
                alice.secret, 1111, "a comment", [["E", note.id], ["K", "1"], ["e", note.id], ["k", "1"]]
            ),
            Event.create(alice.secret, 6, note.to_json(), [["e", note.id], ["p", alice.pubkey]]),
            Event.create(alice.secret, 16, note.to_json(), [["e", note.id], ["k", "1"]]),
        ]
        for event in events:
            await accepted(a, event)
        served = {e.id for e in events[1:]}
        assert await ids(b, {"authors": [alice.pubkey], "kinds": [10050, 10063, 1111, 6, 16]}) == served
        assert await ids(b, {"kinds": [10050], "authors": [alice.pubkey]}) == {inbox.id}  # replaceable
        draft = Event.create(alice.secret, 30024, "unfinished", [["d", "essay"]])
        await accepted(a, draft)
        assert await ids(a, {"kinds": [30024], "authors": [alice.pubkey]}) == {draft.id}
        with pytest.raises(RelayError) as err:
            await b.query([{"kinds": [30024]}])
        assert err.value.message == "restricted: author-only kinds require authors=[self]"
        assert draft.id not in await ids(b, {"authors": [alice.pubkey]})
        assert draft.id in await ids(a, {"authors": [alice.pubkey]})


async def test_the_ephemeral_range_is_relayed_live_and_tokens_are_refused(
    relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    async with relay.client(alice) as a, relay.client(bob) as b:
        sub = await live(b, {"kinds": [24133], "#p": [bob.pubkey]})
        signal = Event.create(alice.secret, 24133, "encrypted request", [["p", bob.pubkey]])
        await accepted(a, signal)
        assert (await sub.next()).id == signal.id
        assert await ids(b, {"ids": [signal.id]}) == set()  # never stored
        private = await create_channel(a, alice, "private")
        in_channel = Event.create(alice.secret, 25000, "", [["h", private]])
        await refused(
            relay,
            b,
            Event.create(bob.secret, 25000, "", [["h", private]]),
            "restricted: not a channel member",
        )
        await accepted(a, in_channel)
        for kind, why in (
            (27235, "NIP-98 HTTP auth events are sent in an Authorization header, never published"),
            (24242, "Blossom auth events are sent in an Authorization header, never published"),
            (22242, "AUTH events cannot be submitted via EVENT"),
        ):
            await refused(
                relay, a, Event.create(alice.secret, kind, "", [["u", relay.http_url]]), f"invalid: {why}"
            )


# -- item 2: several AUTHs on one socket -------------------------------------------------------------
async def test_two_keys_on_one_socket_write_as_both_and_read_the_union(
    relay: RunningRelay, alice: Identity, bob: Identity, carol: Identity
) -> None:
    wrapper = Identity.new()
    async with relay.client(carol) as c:
        private = await create_channel(c, carol, "private")
        await put_user(c, carol, private, bob.pubkey)
        said = await message(c, carol, private, "for members")
        wraps = {}
        for who in (alice, bob, carol):
            wraps[who.pubkey] = Event.create(wrapper.secret, 1059, "sealed", [["p", who.pubkey]])
            await accepted(c, wraps[who.pubkey])
    async with relay.client(alice) as a:
        with pytest.raises(RelayError):
            await a.query([{"kinds": [9], "#h": [private]}])
        second = build_auth_event(bob.secret, await a.challenge, relay.url)  # type: ignore[arg-type]
        r = await a._send_and_wait_ok("AUTH", second)
        assert (r.accepted, r.message) == (True, "")
        # Writes: events of either key; not of a key the socket did not authenticate.
        await accepted(a, Event.create(alice.secret, 1, "from alice"))
        await accepted(a, Event.create(bob.secret, 1, "from bob"))
        stranger = Event.create(carol.secret, 1, "from carol")
        await refused(relay, a, stranger, "invalid: event pubkey does not match authenticated identity")
        # Reads: the union of both keys' rights.
        assert await ids(a, {"kinds": [9], "#h": [private]}) == {said.id}
        both = {wraps[alice.pubkey].id, wraps[bob.pubkey].id}
        assert await ids(a, {"kinds": [1059], "#p": [alice.pubkey, bob.pubkey]}) == both
        assert await ids(a, {"authors": [wrapper.pubkey]}) == both
        assert await a.count([{"kinds": [1059], "#p": [bob.pubkey]}]) == 1
        with pytest.raises(RelayError):
            await a.query([{"kinds": [1059], "#p": [carol.pubkey]}])
        feed = await live(a, {"kinds": [9], "#h": [private]})
        assert [e.id for e in drain(feed)] == [said.id]
        async with relay.client(carol) as c:
            later = await message(c, carol, private, "live for members")
        assert (await feed.next()).id == later.id


async def test_a_socket_holds_at_most_sixteen_keys(sqlite_relay: RunningRelay) -> None:
    first = Identity.new()
    async with sqlite_relay.client(first) as c:
        challenge = await c.challenge  # type: ignore[misc]
        for _ in range(15):
            who = Identity.new()
            r = await c._send_and_wait_ok("AUTH", build_auth_event(who.secret, challenge, sqlite_relay.url))
            assert r.accepted, r.message
        extra = Identity.new()
        r = await c._send_and_wait_ok("AUTH", build_auth_event(extra.secret, challenge, sqlite_relay.url))
        assert (r.accepted, r.message) == (False, "restricted: at most 16 pubkeys per connection")
        again = build_auth_event(first.secret, challenge, sqlite_relay.url)  # a key it holds: fine
        assert (await c._send_and_wait_ok("AUTH", again)).accepted


# -- item 3: filters without kinds ------------------------------------------------------------------
async def test_filters_without_kinds_are_served(relay: RunningRelay, alice: Identity, bob: Identity) -> None:
    wrapper = Identity.new()
    async with relay.client(alice) as a, relay.client(bob) as b:
        note = Event.create(alice.secret, 1, "hello", [["k", "1"]])
        await accepted(a, note)
        reminder = Event.create(alice.secret, 30300, "sealed", [["d", "r"], ["not_before", "0"]])
        await accepted(a, reminder)
        wrap = Event.create(wrapper.secret, 1059, "sealed", [["p", bob.pubkey], ["k", "1"]])
        await accepted(a, wrap)
        assert await ids(b, {"authors": [alice.pubkey]}) == {note.id}  # the reminder dropped
        assert await ids(a, {"authors": [alice.pubkey]}) == {note.id, reminder.id}
        assert await ids(b, {"#k": ["1"]}) == {note.id, wrap.id}
        assert await ids(a, {"#k": ["1"]}) == {note.id}
        assert {note.id, wrap.id} <= await ids(b, {})
        assert wrap.id not in await ids(a, {})
        assert await b.count([{"authors": [alice.pubkey, wrapper.pubkey]}]) == 2
        sub = await live(b, {"authors": [alice.pubkey], "limit": 0})
        assert drain(sub) == []  # limit 0: live only
        later = Event.create(alice.secret, 1, "live")
        hidden = Event.create(alice.secret, 30300, "sealed", [["d", "r2"], ["not_before", "0"]])
        await accepted(a, hidden)
        await accepted(a, later)
        assert (await sub.next()).id == later.id  # the author-only event was not delivered
        # CLOSED only when every kind the filter can match is gated for the reader.
        with pytest.raises(RelayError) as err:
            await b.query([{"kinds": [30300, 30179]}])
        assert err.value.message == "restricted: author-only kinds require authors=[self]"
        assert await ids(b, {"kinds": [30300, 1], "authors": [alice.pubkey]}) == {note.id, later.id}


# -- item 6: NIP-09 lists of targets ----------------------------------------------------------------
async def test_deletion_of_a_list_of_targets(relay: RunningRelay, alice: Identity, bob: Identity) -> None:
    now = int(time.time())
    async with relay.client(alice) as a, relay.client(bob) as b:
        notes = [Event.create(alice.secret, 1, f"note {i}") for i in range(3)]
        for note in notes:
            await accepted(a, note)
        article = Event.create(alice.secret, 30023, "v1", [["d", "post"]], created_at=now - 10)
        await accepted(a, article)
        theirs = Event.create(bob.secret, 1, "bob's")
        await accepted(b, theirs)
        mixed = Event.create(alice.secret, 5, "", [["e", notes[0].id], ["e", theirs.id]])
        await refused(relay, a, mixed, f"invalid: must be event author of {theirs.id}")
        unknown = Event.create(alice.secret, 5, "", [["e", notes[0].id], ["e", "ab" * 32]])
        await refused(relay, a, unknown, f"invalid: target event not found: {'ab' * 32}")
        c = await create_channel(a, alice)
        said = await message(a, alice, c, "in a channel")
        across = Event.create(alice.secret, 5, "", [["e", notes[0].id], ["e", said.id], ["h", c]])
        await refused(
            relay, a, across, "invalid: deletion targets must all be in one channel (or all outside channels)"
        )
        many = Event.create(alice.secret, 5, "", [["e", f"{i:064x}"] for i in range(101)])
        await refused(relay, a, many, "invalid: too many deletion targets (101, max 100)")
        tags = [
            ["e", notes[0].id],
            ["e", notes[1].id],
            ["e", notes[1].id],
            ["a", f"30023:{alice.pubkey}:post"],
        ]
        deletion = Event.create(alice.secret, 5, "", tags)
        await accepted(a, deletion)
        left = await ids(b, {"authors": [alice.pubkey], "kinds": [1, 30023]})
        assert left == {notes[2].id}
        for gone in (notes[0], notes[1]):
            r = await a.publish(gone)
            assert (r.accepted, r.message) == (False, "blocked: deleted")


# -- item 8: NIP-11 --------------------------------------------------------------------------------
async def _info(running: RunningRelay) -> dict:
    async with aiohttp.ClientSession() as s:
        async with s.get(running.http_url + "/", headers={"Accept": "application/nostr+json"}) as resp:
            return await resp.json(content_type=None)  # type: ignore[no-any-return]


async def test_nip11_omits_unset_fields_and_advertises_the_clock_window(tmp_path, alice: Identity) -> None:
    async with relay_on(tmp_path / "plain") as running:
        doc = await _info(running)
    assert "pubkey" not in doc and "contact" not in doc
    assert None not in doc.values()
    assert (doc["limitation"]["created_at_lower_limit"], doc["limitation"]["created_at_upper_limit"]) == (
        900,
        900,
    )
    assert {17, 22, 42, 59} <= set(doc["supported_nips"])
    async with relay_on(
        tmp_path / "set", owner_pubkey=alice.pubkey, relay_contact="ops@example.org", max_past_drift_s=0
    ) as running:
        doc = await _info(running)
    assert (doc["pubkey"], doc["contact"]) == (alice.pubkey, "ops@example.org")
    assert "created_at_lower_limit" not in doc["limitation"]  # the past side is off


# -- operator kinds (BUZZ_OPEN_KINDS) ----------------------------------------------------------------
async def test_operator_opens_kinds_with_a_gate(tmp_path, alice: Identity, bob: Identity) -> None:
    env = {
        "BUZZ_OPEN_KINDS": "31922-31923:addressable:public, 5000-5999:regular:author-only, 21000:ephemeral:p-gated"
    }
    opened = RelayConfig.from_env(env).open_kinds
    async with relay_on(tmp_path, open_kinds=opened) as running:
        async with running.client(alice) as a, running.client(bob) as b:
            event = Event.create(alice.secret, 31922, "", [["d", "meetup"], ["title", "Meetup"]])
            await accepted(a, event)
            assert await ids(b, {"kinds": [31922], "authors": [alice.pubkey]}) == {event.id}
            job = Event.create(alice.secret, 5100, "private job")
            await accepted(a, job)
            assert await ids(a, {"kinds": [5100], "authors": [alice.pubkey]}) == {job.id}
            assert job.id not in await ids(b, {"authors": [alice.pubkey]})
            with pytest.raises(RelayError) as err:
                await b.query([{"kinds": [5100]}])
            assert err.value.message == "restricted: author-only kinds require authors=[self]"
            assert await ids(b, {"search": "private", "authors": [alice.pubkey]}) == set()  # not indexed
            to_alice = await live(a, {"kinds": [21000], "#p": [alice.pubkey]})
            nosy = await live(b, {"kinds": [21000, 1]})
            ping = Event.create(bob.secret, 21000, "", [["p", alice.pubkey]])
            await accepted(b, ping)
            assert (await to_alice.next()).id == ping.id
            await settle(b)
            assert nosy.queue.empty()  # p-gated: not for bob's subscription
            await refused(
                running,
                a,
                Event.create(alice.secret, 31924, "", [["d", "x"]]),
                "restricted: unknown event kind",
            )


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("9:regular:public", "kind 9 (stream message) is built in"),
        ("31922:regular:public", "kind 31922 is addressable by its number (NIP-01), not regular"),
        ("19999-20001:replaceable:public", "kind 20000 is ephemeral by its number (NIP-01), not replaceable"),
        ("5000-5010:regular:public,5005:regular:public", "overlaps 5000-5010"),
        ("5000:regular:secret", "gate must be one of public, author-only, p-gated"),
        ("5000", "expected <kind>[-<last>]:<class>:<gate>"),
        ("70000:regular:public", "kinds are 0-65535"),
    ],
)
def test_bad_open_kinds_stop_the_relay(value: str, why: str) -> None:
    with pytest.raises(ConfigError) as err:
        RelayConfig.from_env({"BUZZ_OPEN_KINDS": value})
    assert str(err.value).startswith("BUZZ_OPEN_KINDS: ") and why in str(err.value), str(err.value)


# -- relay-signed channel state carries h (decision 174) ---------------------------------------------
async def test_state_without_h_is_republished_at_start(relay: RunningRelay, alice: Identity) -> None:
    """A 39000 stored before state versions carried `h` (a `#h` filter no longer matches it)
    differs from the rows: the start-up repair republishes it, with `h`."""
    async with relay.client(alice) as a:
        c = await create_channel(a, alice)
    (stored,) = await relay.relay.store.query(
        [Filter(kinds=frozenset({39000}), tags={"d": frozenset({c})})], None
    )
    old_tags = [list(t) for t in stored.event.tags if t[0] != "h"]
    legacy = Event.create(relay.relay.secret_key, 39000, "", old_tags, stored.event.created_at + 1)
    await relay.relay.store.insert(relay_signed(legacy, c))
    async with relay.client(alice) as a:
        assert await a.query([{"kinds": [39000], "#h": [c]}]) == []
        assert await relay.relay.emitter.repair_all() >= 1
        (newest,) = await a.query([{"kinds": [39000], "#h": [c]}])
    assert ["h", c] in [list(t) for t in newest.tags] and newest.created_at > legacy.created_at


async def test_a_ban_of_the_second_key_closes_the_socket(
    sqlite_relay: RunningRelay, alice: Identity, bob: Identity, carol: Identity
) -> None:
    """The ban watch closes a connection when any key it authenticated is banned."""
    async with aiohttp.ClientSession() as s, s.ws_connect(sqlite_relay.url) as ws:
        challenge = orjson.loads((await ws.receive(5)).data)[1]
        for who in (alice, bob):
            await ws.send_str(
                orjson.dumps(
                    ["AUTH", build_auth_event(who.secret, challenge, sqlite_relay.url).to_dict()]
                ).decode()
            )
            assert orjson.loads((await ws.receive(5)).data)[2] is True
        connections = sqlite_relay.relay.connections
        assert close_banned(connections, frozenset({carol.pubkey})) == 0
        assert close_banned(connections, frozenset({bob.pubkey})) == 1
        assert orjson.loads((await ws.receive(5)).data) == ["NOTICE", BANNED]
        assert (await ws.receive(5)).type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
        assert ws.close_code == 1008
