"""Lifecycle events and their ingest rules (huddle.md §3.6, §5.8, §8; relay.md §9 item 10)."""

from __future__ import annotations

import asyncio
import json

import pytest

from buzz.client import RelayError
from buzz.core.event import Event
from tests.huddle.support import ChannelSpec, join, make_channel, refused
from tests.support.deadline import scaled
from tests.support.relay import Identity, RunningRelay

LIFECYCLE = [48101, 48102, 48103]


async def collect(sub, count: int) -> list[Event]:  # type: ignore[no-untyped-def]
    return [await sub.next(timeout=5) for _ in range(count)]


async def test_join_leave_end_are_relay_signed(
    relay: RunningRelay, alice: Identity, bob: Identity, carol: Identity
) -> None:
    cid = await make_channel(relay, ChannelSpec(alice, members=[bob]))
    async with relay.client(alice) as watcher:
        sub = await watcher.subscribe([{"kinds": LIFECYCLE, "#h": [cid]}])
        await asyncio.wait_for(sub.eose.wait(), scaled(5))
        a = await join(relay, alice, cid)
        b = await join(relay, bob, cid)
        await b.ws.send_str('{"type":"leave"}')  # §5.7: cleanup, 48102
        await b.expect_close()
        await a.ws.close()  # the last leaver: 48102 then 48103
        events = await collect(sub, 5)
        assert [(e.kind, e.first_tag("p")) for e in events] == [
            (48101, alice.pubkey),
            (48101, bob.pubkey),
            (48102, bob.pubkey),
            (48102, alice.pubkey),
            (48103, alice.pubkey),
        ]
        relay_key = relay.relay.pubkey
        for event in events:
            assert event.pubkey == relay_key and event.tag_values("h") == [cid]
        bodies = [json.loads(e.content) for e in events]
        assert [b.get("roster_revision") for b in bodies] == [1, 2, 3, 4, None]
        assert bodies[4] == {"ephemeral_channel_id": cid}
        assert all(b["ephemeral_channel_id"] == cid for b in bodies)
        assert bodies[0]["admission_id"] != bodies[1]["admission_id"]
        assert bodies[0]["admission_id"] == bodies[3]["admission_id"]  # same seat joined and left
        stored = await watcher.query([{"kinds": LIFECYCLE, "#h": [cid]}])
        assert {e.id for e in stored} == {e.id for e in events}
    async with relay.client(carol) as outsider:  # gated like the channel
        with pytest.raises(RelayError) as err:
            await outsider.query([{"kinds": LIFECYCLE, "#h": [cid]}])
        assert err.value.message == "restricted: not a channel member"
    for peer in (a, b):
        await peer.close()


async def test_ingest_rules(sqlite_relay: RunningRelay, alice: Identity, bob: Identity) -> None:
    parent = await make_channel(sqlite_relay, ChannelSpec(alice, members=[bob]))
    permanent = await make_channel(sqlite_relay, ChannelSpec(alice, members=[bob]))
    huddle = await make_channel(sqlite_relay, ChannelSpec(alice, ttl=3600))
    body = json.dumps
    async with sqlite_relay.client(alice) as c, sqlite_relay.client(bob) as b:
        for kind in (48101, 48102):
            r = await c.publish(
                Event.create(alice.secret, kind, body({"ephemeral_channel_id": huddle}), [["h", parent]])
            )
            assert (r.accepted, r.message) == (False, "restricted: relay-only kind")
        cases = [
            (
                alice,
                "not json",
                "invalid: kind 48100 content must be a JSON object with ephemeral_channel_id",
            ),
            (
                alice,
                body({"ephemeral_channel_id": "x"}),
                "invalid: ephemeral_channel_id must be a canonical UUID",
            ),
            (alice, body({"ephemeral_channel_id": permanent}), "invalid: huddle channel must have a ttl"),
            (
                bob,
                body({"ephemeral_channel_id": huddle}),
                "invalid: huddle channel was not created by the author",
            ),
        ]
        for who, content, message in cases:
            client = c if who is alice else b
            r = await client.publish(Event.create(who.secret, 48100, content, [["h", parent]]))
            assert (r.accepted, r.message) == (False, message)
        r = await c.publish(
            Event.create(alice.secret, 48100, body({"ephemeral_channel_id": huddle}), [["h", parent]])
        )
        assert r.accepted, r.message
        end = body({"ephemeral_channel_id": huddle})
        r = await b.publish(Event.create(bob.secret, 48103, end, [["h", parent]]))
        assert (r.accepted, r.message) == (
            False,
            "invalid: only the huddle channel's creator or the relay may end a huddle",
        )
        r = await c.publish(Event.create(alice.secret, 48103, end, [["h", parent]]))
        assert r.accepted, r.message


async def test_ttl_channel_joins_through_its_parent(
    sqlite_relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    """§3.6: a parent member joins a private TTL channel linked by a creator-signed 48100 and is
    added as `member` invited by the creator; without the link, or the parent, it is refused."""
    relay = sqlite_relay.relay
    parent = await make_channel(sqlite_relay, ChannelSpec(alice, members=[bob]))
    huddle = await make_channel(sqlite_relay, ChannelSpec(alice, ttl=3600))
    not_member = {"type": "error", "message": "not a member"}
    assert await refused(sqlite_relay, bob, huddle, parent=parent) == not_member  # no 48100 yet
    async with sqlite_relay.client(alice) as c:
        started = Event.create(
            alice.secret, 48100, json.dumps({"ephemeral_channel_id": huddle}), [["h", parent]]
        )
        assert (await c.publish(started)).accepted
        sub = await c.subscribe([{"kinds": LIFECYCLE, "#h": [parent]}])
        await asyncio.wait_for(sub.eose.wait(), scaled(5))
        assert await refused(sqlite_relay, bob, huddle) == not_member  # no parent_channel_id
        peer = await join(sqlite_relay, bob, huddle, parent=parent)
        assert peer.joined is not None and peer.joined["type"] == "joined"
        member = await relay.store.get_member(huddle, bob.pubkey)
        assert (
            member is not None
            and member.active
            and (member.role, member.invited_by) == ("member", alice.pubkey)
        )
        joined_event = await sub.next(timeout=5)
        assert (joined_event.kind, joined_event.tag_values("h")) == (48101, [parent])  # lifecycle parent
        await peer.ws.close()
        left_event = await sub.next(timeout=5)
        assert left_event.kind == 48102
        # §5.8 step 4: the last leaver ends a TTL huddle: the channel is archived, then 48103.
        ended_event = await sub.next(timeout=5)
        assert (ended_event.kind, ended_event.pubkey) == (48103, relay.pubkey)
        assert ended_event.tag_values("p") == [bob.pubkey]
        channel = await relay.store.get_channel(huddle)
        assert channel is not None and channel.archived_at is not None
        assert await refused(sqlite_relay, bob, huddle, parent=parent) == not_member  # archived
        await peer.close()
