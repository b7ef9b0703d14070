"""relay.md §18 items 88 and 89 and §12.4 items 2–5: two replicas, one PostgreSQL, one Redis."""

from __future__ import annotations

import pytest

from buzz.core.event import Event
from tests.replicas.helpers import closed, next_of_kind, nothing_more, wait_until
from tests.support.relay import Identity, RunningRelay
from tests.workspace.helpers import accepted, create_channel, drain, live, message, put_user

pytestmark = [pytest.mark.redis, pytest.mark.postgres]

Pair = tuple[RunningRelay, RunningRelay]


async def test_global_event_from_a_reaches_b_exactly_once(
    replicas: Pair, alice: Identity, bob: Identity
) -> None:
    """§18 item 88: also when two filters of the subscription match, and for A's own subscriber."""
    a, b = replicas
    async with a.client(alice) as on_a, b.client(bob) as on_b:
        remote = await live(on_b, {"kinds": [1], "authors": [alice.pubkey]}, {"kinds": [1]})
        local = await live(on_a, {"kinds": [1]})
        note = Event.create(alice.secret, 1, "hello from replica A")
        await accepted(on_a, note)
        assert (await remote.next()).id == note.id
        assert (await local.next()).id == note.id
        await nothing_more(remote, local)


async def test_channel_event_reaches_an_h_subscription_on_b_exactly_once(
    replicas: Pair, alice: Identity, bob: Identity
) -> None:
    a, b = replicas
    async with a.client(alice) as on_a, b.client(bob) as on_b:
        channel = await create_channel(on_a, alice, "open")
        remote = await live(on_b, {"#h": [channel], "kinds": [9]})
        local = await live(on_a, {"#h": [channel], "kinds": [9]})
        sent = await message(on_a, alice, channel, "to every replica")
        assert (await remote.next()).id == sent.id
        assert (await local.next()).id == sent.id
        reply = await message(on_b, bob, channel, "and back")  # the other direction too
        assert (await local.next()).id == reply.id
        assert (await remote.next()).id == reply.id
        await nothing_more(remote, local)


async def test_member_removed_on_a_is_evicted_on_b_and_gets_nothing(
    replicas: Pair, alice: Identity, bob: Identity, carol: Identity
) -> None:
    """§18 item 89: the access change travels on the control topic; B evicts and re-checks."""
    a, b = replicas
    async with a.client(alice) as on_a, b.client(bob) as bob_b, b.client(carol) as carol_b:
        channel = await create_channel(on_a, alice, "private")
        await put_user(on_a, alice, channel, bob.pubkey)
        await put_user(on_a, alice, channel, carol.pubkey)
        bobs = await live(bob_b, {"#h": [channel]})
        carols = await live(carol_b, {"#h": [channel], "kinds": [9]})
        before = await message(on_a, alice, channel, "before")  # B caches bob's membership
        assert (await next_of_kind(bobs, 9)).id == before.id
        assert (await carols.next()).id == before.id

        await accepted(on_a, Event.create(alice.secret, 9001, "", [["h", channel], ["p", bob.pubkey]]))
        assert await closed(bobs) == "restricted: channel access revoked"
        after = await message(on_a, alice, channel, "after")
        assert (await carols.next()).id == after.id  # B did deliver it, to its remaining reader
        bob_conn = next(c for c in b.relay.connections if getattr(c, "pubkey", None) == bob.pubkey)
        assert bob_conn.subs == {}  # type: ignore[attr-defined]
        assert after.id not in {e.id for e in drain(bobs)}
        again = await bob_b.subscribe([{"#h": [channel]}])
        assert await closed(again) == "restricted: not a channel member"


async def test_own_events_come_back_from_redis_and_are_dropped(
    replicas: Pair, alice: Identity, bob: Identity
) -> None:
    """§12.4 items 2 and 4: the echo cache drops A's own publication; B takes it once."""
    a, b = replicas
    async with a.client(alice) as on_a, b.client(bob) as on_b:
        local = await live(on_a, {"kinds": [1]})
        remote = await live(on_b, {"kinds": [1]})
        echoes, received = a.relay.stats["bus_echo_dropped"], b.relay.stats["bus_received"]
        note = Event.create(alice.secret, 1, "echo")
        await accepted(on_a, note)
        assert note.id in a.relay.bus.echo  # type: ignore[union-attr]
        assert (await local.next()).id == note.id
        assert (await remote.next()).id == note.id
        await wait_until(lambda: a.relay.stats["bus_echo_dropped"] > echoes, what="A to drop its echo")
        assert b.relay.stats["bus_received"] == received + 1
        await nothing_more(local, remote)


async def test_ephemeral_events_cross_replicas(replicas: Pair, alice: Identity, bob: Identity) -> None:
    """§12.2 item 1: typing (20002) in a channel is fanned out, never stored, on every replica."""
    a, b = replicas
    async with a.client(alice) as on_a, b.client(bob) as on_b:
        channel = await create_channel(on_a, alice, "open")
        remote = await live(on_b, {"#h": [channel], "kinds": [20002]})
        typing = Event.create(alice.secret, 20002, "", [["h", channel]])
        await accepted(on_a, typing)
        assert (await remote.next()).id == typing.id
        await nothing_more(remote)
