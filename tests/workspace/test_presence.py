"""Presence and typing (relay.md §12.2; agents.md §3.8 item 3): ephemeral, never stored;
the newest 20001 per pubkey is served on stored reads for 90 s. Over real WebSocket."""

from __future__ import annotations

import time

from buzz.core.event import Event
from buzz.core.stored import verify_stored
from buzz.relay.delivery.presence import Presence, presence_status
from tests.support.relay import Identity, RunningRelay
from tests.workspace.helpers import accepted, create_channel, drain, ids, live, put_user, settle


async def test_presence_is_served_on_stored_reads(
    relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    async with relay.client(alice) as a, relay.client(bob) as b:
        flt = {"kinds": [20001], "authors": [alice.pubkey]}
        assert await b.query([flt]) == []
        t = int(time.time())
        online = Event.create(alice.secret, 20001, "online", created_at=t - 1)
        await accepted(a, Event.create(alice.secret, 20001, "away", created_at=t - 2))
        await accepted(a, online)
        older = Event.create(alice.secret, 20001, "busy", created_at=t - 3)
        await accepted(a, older)  # older than the newest seen: presence keeps `online`
        assert [e.id for e in await b.query([flt])] == [online.id]
        assert await ids(b, {"kinds": [20001]}) == set()  # without authors: never from storage
        assert await ids(b, {"kinds": [20001], "authors": [alice.pubkey], "limit": 0}) == set()
        await accepted(a, Event.create(alice.secret, 20001, '{"status":"offline"}', created_at=t))
        assert await b.query([flt]) == []
    assert await relay.relay.store.get(online.id, include_deleted=True) is None


async def test_channel_presence_follows_readability(
    relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    async with relay.client(alice) as a, relay.client(bob) as b:
        c = await create_channel(a, alice, "private")
        status = Event.create(alice.secret, 20001, "online", [["h", c]])
        await accepted(a, status)
        flt = {"kinds": [20001], "authors": [alice.pubkey]}
        assert await b.query([flt]) == []
        await put_user(a, alice, c, bob.pubkey)
        assert [e.id for e in await b.query([flt])] == [status.id]
        assert [e.id for e in await b.query([{**flt, "#h": [c]}])] == [status.id]


async def test_typing_is_channel_gated_and_never_stored(
    relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    async with relay.client(alice) as a, relay.client(bob) as b:
        c = await create_channel(a, alice, "private")
        typing = Event.create(bob.secret, 20002, "", [["h", c]])
        result = await b.publish(typing)
        assert (result.accepted, result.message) == (False, "restricted: not a channel member")
        await put_user(a, alice, c, bob.pubkey)
        watching = await live(a, {"kinds": [20002], "#h": [c]})
        everywhere = await live(a, {"kinds": [20002]})
        await accepted(b, typing)
        assert (await watching.next()).id == typing.id
        await settle(a)
        assert drain(everywhere) == []  # a channel event reaches only filters naming its channel
        assert await ids(a, {"kinds": [20002], "#h": [c]}) == set()


def test_presence_register_expires_and_clears() -> None:
    now = [100.0]
    presence = Presence(ttl_s=90, clock=lambda: now[0])
    who = Identity.new()
    online = verify_stored(Event.create(who.secret, 20001, "online", created_at=10))
    presence.update(online)
    assert presence.current([who.pubkey]) == [online] and presence.status(who.pubkey) == "online"
    now[0] += 89
    assert presence.status(who.pubkey) == "online"
    now[0] += 2
    assert presence.current([who.pubkey]) == [] and presence.status(who.pubkey) == "offline"
    presence.update(verify_stored(Event.create(who.secret, 20001, "online", created_at=20)))
    presence.update(verify_stored(Event.create(who.secret, 20001, "offline", created_at=21)))
    assert presence.current([who.pubkey]) == []


def test_presence_status_is_cut_to_128_bytes() -> None:
    assert presence_status("ä" * 100) == "ä" * 64
    assert presence_status('{"status":"away","note":"lunch"}') == "away"
    assert presence_status('{"mood":"ok"}') == '{"mood":"ok"}'
