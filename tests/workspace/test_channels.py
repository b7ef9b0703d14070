"""Channels and membership (relay.md §4.1–§4.7; §18 items 39–54, 97, 98), over real WebSocket
on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest

from buzz.client import RelayError
from buzz.core.channel_id import new_channel_id
from buzz.core.event import Event
from tests.support.relay import Identity, RunningRelay
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
    snapshot,
)


async def _state(client, channel_id: str, kind: int) -> Event:
    events = await client.query([{"kinds": [kind], "#d": [channel_id]}])
    assert len(events) == 1, events
    return events[0]


async def _self_key(running: RunningRelay) -> str:
    async with aiohttp.ClientSession() as http, http.get(running.http_url + "/info") as response:
        return json.loads(await response.text())["self"]


# -- §18 items 43, 44, 45 and the 9007 rules --------------------------------------------------------
async def test_create_makes_owner_and_publishes_signed_state(relay: RunningRelay, alice: Identity) -> None:
    self_key = await _self_key(relay)
    async with relay.client(alice) as a:
        c = await create_channel(a, alice, "open", ["about", "our room"], ["topic", "planning"])
        metadata = await _state(a, c, 39000)
        admins = await _state(a, c, 39001)
        members = await _state(a, c, 39002)
        roles = await _state(a, c, 39003)
    assert {metadata.pubkey, admins.pubkey, members.pubkey, roles.pubkey} == {self_key}
    assert [list(t) for t in metadata.tags] == [
        ["d", c],
        ["h", c],  # so `#h` filters match it by NIP-01 (decision 174)
        ["name", "general"],
        ["about", "our room"],
        ["public"],
        ["closed"],
        ["t", "stream"],
        ["topic", "planning"],
    ]
    assert [list(t) for t in admins.tags] == [["d", c], ["h", c], ["p", alice.pubkey, "owner"]]
    assert [list(t) for t in members.tags] == [["d", c], ["h", c], ["p", alice.pubkey, "", "owner"]]
    assert [list(t) for t in roles.tags][:2] == [["d", c], ["h", c]]
    assert [t[1] for t in roles.tags if t[0] == "role"] == ["owner", "admin", "member", "guest", "bot"]
    channel = await relay.relay.store.get_channel(c)
    member = await relay.relay.store.get_member(c, alice.pubkey)
    assert channel is not None and (channel.name, channel.created_by) == ("general", alice.pubkey)
    assert member is not None and (member.role, member.active) == ("owner", True)


async def test_create_refusals(relay: RunningRelay, alice: Identity) -> None:
    async with relay.client(alice) as a:
        c = await create_channel(a, alice)
        again = Event.create(alice.secret, 9007, "", [["h", c], ["name", "other"]])
        await refused(relay, a, again, "duplicate: channel already exists")
        fresh = new_channel_id()
        cases = [
            ([["h", fresh]], "invalid: channel name is required"),  # bad input: 9007 without a name
            ([["h", fresh], ["name", " # "]], "invalid: channel name is required"),
            ([["h", fresh], ["name", "x"], ["visibility", "secret"]], "invalid: invalid visibility: secret"),
            ([["h", fresh], ["name", "x"], ["channel_type", "dm"]], "invalid: invalid channel_type: dm"),
            ([["h", fresh], ["name", "x"], ["ttl", "0"]], "invalid: invalid ttl value: 0"),
            ([["name", "x"]], "invalid: channel-scoped events must include an h tag"),
        ]
        for tags, expected in cases:
            await refused(relay, a, Event.create(alice.secret, 9007, "", tags), expected)


async def test_deleted_channel_id_cannot_be_reused(relay: RunningRelay, alice: Identity) -> None:
    async with relay.client(alice) as a:
        c = await create_channel(a, alice)
        await accepted(a, Event.create(alice.secret, 9008, "", [["h", c]]))
        again = Event.create(alice.secret, 9007, "", [["h", c], ["name", "back"]])
        await refused(relay, a, again, "duplicate: channel already exists")


# -- §18 items 39, 40, 41, 42 -------------------------------------------------------------------------
async def test_private_channel_is_neither_readable_nor_writable_by_non_members(
    relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    async with relay.client(alice) as a, relay.client(bob) as b:
        private = await create_channel(a, alice, "private")
        opened = await create_channel(a, alice, "open")
        for c in (private, new_channel_id()):
            with pytest.raises(RelayError) as err:
                await b.query([{"kinds": [9], "#h": [c]}])
            assert err.value.message == "restricted: not a channel member"
            with pytest.raises(RelayError) as err:
                await b.count([{"#h": [c]}])
            assert err.value.message == "restricted: not a channel member"
            await refused(
                relay, b, Event.create(bob.secret, 9, "hi", [["h", c]]), "restricted: not a channel member"
            )
        note = await message(b, bob, opened, "a non-member writes to an open channel")
        assert note.id in await ids(b, {"kinds": [9], "#h": [opened]})


async def test_needs_h_and_global_only_placement(relay: RunningRelay, alice: Identity) -> None:
    async with relay.client(alice) as a:
        await refused(
            relay,
            a,
            Event.create(alice.secret, 9, "no h"),
            "invalid: channel-scoped events must include an h tag",
        )
        c = await create_channel(a, alice, "private")
        profile = Event.create(alice.secret, 0, "{}", [["h", c]])
        await accepted(a, profile)
    stored = await relay.relay.store.get(profile.id)
    assert stored is not None and stored.channel_id is None  # tag kept, channel forced to NULL
    assert ("h", c) in stored.event.tags


# -- §18 items 46, 47, 48 and the 9000 / 9001 rules ------------------------------------------------
async def test_put_user_rules(relay: RunningRelay, alice: Identity, bob: Identity, carol: Identity) -> None:
    async with relay.client(alice) as a, relay.client(bob) as b:
        private = await create_channel(a, alice, "private")
        await put_user(a, alice, private, bob.pubkey)
        # bad input: a 9000 from a non-admin in a private channel
        add_carol = Event.create(bob.secret, 9000, "", [["h", private], ["p", carol.pubkey]])
        await refused(relay, b, add_carol, "invalid: only owners/admins may add private-channel members")
        grant = Event.create(bob.secret, 9000, "", [["h", private], ["p", bob.pubkey], ["role", "admin"]])
        await refused(relay, b, grant, "invalid: only owners/admins may grant owner or admin")
        demote_self = Event.create(
            bob.secret, 9000, "", [["h", private], ["p", bob.pubkey], ["role", "guest"]]
        )
        await refused(relay, b, demote_self, "invalid: only owners/admins may change an active member's role")
        demote_owner = Event.create(
            alice.secret, 9000, "", [["h", private], ["p", alice.pubkey], ["role", "admin"]]
        )
        await refused(relay, a, demote_owner, "invalid: cannot demote the last owner")
        bad_role = Event.create(
            alice.secret, 9000, "", [["h", private], ["p", carol.pubkey], ["role", "king"]]
        )
        await refused(relay, a, bad_role, "invalid: invalid role: king")
        await refused(
            relay, a, Event.create(alice.secret, 9000, "", [["h", private]]), "invalid: missing p tag"
        )
        opened = await create_channel(a, alice, "open")
        await put_user(b, bob, opened, carol.pubkey)  # open channel: anyone may add anyone
        await put_user(a, alice, private, bob.pubkey, "admin")
    bob_row = await relay.relay.store.get_member(private, bob.pubkey)
    carol_row = await relay.relay.store.get_member(opened, carol.pubkey)
    assert bob_row is not None and bob_row.role == "admin"
    assert carol_row is not None and (carol_row.role, carol_row.invited_by) == ("member", bob.pubkey)


async def test_put_user_emits_notice_readable_by_target(
    relay: RunningRelay, alice: Identity, bob: Identity, carol: Identity
) -> None:
    async with relay.client(alice) as a, relay.client(bob) as b, relay.client(carol) as c:
        channel = await create_channel(a, alice, "private")
        notices = await live(b, {"kinds": [44100], "#p": [bob.pubkey]})
        await put_user(a, alice, channel, bob.pubkey)
        notice = await notices.next()
        stored = await b.query([{"kinds": [44100], "#p": [bob.pubkey]}])
        assert [e.id for e in stored] == [notice.id]
        assert [list(t) for t in notice.tags] == [["p", bob.pubkey], ["h", channel]]
        assert json.loads(notice.content) == {
            "type": "member_added",
            "channel_id": channel,
            "actor": alice.pubkey,
        }
        assert notice.pubkey == relay.relay.pubkey
        assert await c.query([{"kinds": [44100], "#p": [carol.pubkey]}]) == []
        members = await _state(b, channel, 39002)  # now readable by the new member
        assert ["p", bob.pubkey, "", "member"] in [list(t) for t in members.tags]


async def test_remove_user_revokes_live_subscription(
    relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    async with relay.client(alice) as a, relay.client(bob) as b:
        channel = await create_channel(a, alice, "private")
        await put_user(a, alice, channel, bob.pubkey)
        sub = await live(b, {"kinds": [9], "#h": [channel]})
        other = await live(b, {"kinds": [1], "authors": [alice.pubkey]})
        notices = await live(b, {"kinds": [44101], "#p": [bob.pubkey]})
        await accepted(a, Event.create(alice.secret, 9001, "", [["h", channel], ["p", bob.pubkey]]))
        with pytest.raises(RelayError) as err:
            await sub.next()
        assert err.value.message == "restricted: channel access revoked"
        notice = await notices.next()
        assert json.loads(notice.content)["type"] == "member_removed"
        await message(a, alice, channel, "after the removal")
        await accepted(a, Event.create(alice.secret, 1, "global still flows"))
        assert (await other.next()).content == "global still flows"
        assert other.closed_reason is None
        with pytest.raises(RelayError) as err:
            await b.query([{"kinds": [9], "#h": [channel]}])
        assert err.value.message == "restricted: not a channel member"


async def test_remove_user_rules(
    relay: RunningRelay, alice: Identity, bob: Identity, carol: Identity
) -> None:
    async with relay.client(alice) as a, relay.client(bob) as b:
        channel = await create_channel(a, alice, "open")
        await put_user(a, alice, channel, bob.pubkey)
        await put_user(a, alice, channel, carol.pubkey)
        kick = Event.create(bob.secret, 9001, "", [["h", channel], ["p", carol.pubkey]])
        await refused(relay, b, kick, "invalid: actor not authorized")
        last = Event.create(alice.secret, 9001, "", [["h", channel], ["p", alice.pubkey]])
        await refused(relay, a, last, "invalid: cannot remove the last owner")
        stranger = Identity.new()
        await accepted(a, Event.create(alice.secret, 9001, "", [["h", channel], ["p", stranger.pubkey]]))
        await accepted(b, Event.create(bob.secret, 9001, "", [["h", channel], ["p", bob.pubkey]]))
        gone = Event.create(bob.secret, 9001, "", [["h", channel], ["p", bob.pubkey], ["x", "again"]])
        await refused(relay, b, gone, "invalid: actor is not an active member")
    assert await relay.relay.store.get_member(channel, stranger.pubkey) is None
    bob_row = await relay.relay.store.get_member(channel, bob.pubkey)
    assert bob_row is not None and not bob_row.active


async def test_registered_owner_may_remove_its_agent(
    relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    from buzz.core.nip_oa import build_auth_tag

    agent = Identity.new()
    async with relay.client(agent, auth_tags=[build_auth_tag(bob.secret, agent.pubkey)]):
        pass  # AUTH with the NIP-OA tag records agent → bob (relay.md §7.3 item 4)
    async with relay.client(alice) as a, relay.client(bob) as b:
        channel = await create_channel(a, alice, "open")
        await put_user(a, alice, channel, bob.pubkey)
        await put_user(a, alice, channel, agent.pubkey)
        await accepted(b, Event.create(bob.secret, 9001, "", [["h", channel], ["p", agent.pubkey]]))
    row = await relay.relay.store.get_member(channel, agent.pubkey)
    assert row is not None and not row.active


# -- §18 items 49, 50 ------------------------------------------------------------------------------
async def test_join_and_leave(relay: RunningRelay, alice: Identity, bob: Identity) -> None:
    async with relay.client(alice) as a, relay.client(bob) as b:
        private = await create_channel(a, alice, "private")
        opened = await create_channel(a, alice, "open")
        await refused(
            relay, b, Event.create(bob.secret, 9021, "", [["h", private]]), "restricted: channel is private"
        )
        missing = Event.create(bob.secret, 9021, "", [["h", new_channel_id()]])
        await refused(relay, b, missing, "invalid: channel not found")
        await accepted(b, Event.create(bob.secret, 9021, "", [["h", opened]]))
        row = await relay.relay.store.get_member(opened, bob.pubkey)
        assert row is not None and (row.role, row.active) == ("member", True)
        joined = [json.loads(e.content) for e in await b.query([{"kinds": [40099], "#h": [opened]}])]
        assert {"type": "member_joined", "actor": bob.pubkey} in joined
        await refused(
            relay,
            a,
            Event.create(alice.secret, 9022, "", [["h", opened]]),
            "invalid: cannot remove the last owner",
        )
        await accepted(b, Event.create(bob.secret, 9022, "", [["h", opened]]))
        again = Event.create(bob.secret, 9022, "", [["h", opened], ["x", "1"]])
        await refused(relay, b, again, "invalid: actor is not an active member")
        members = await _state(a, opened, 39002)
        assert [list(t) for t in members.tags] == [
            ["d", opened],
            ["h", opened],
            ["p", alice.pubkey, "", "owner"],
        ]


# -- §18 items 51, 52 and the 9002 rules ----------------------------------------------------------
async def test_edit_metadata(relay: RunningRelay, alice: Identity, bob: Identity) -> None:
    async with relay.client(alice) as a, relay.client(bob) as b:
        channel = await create_channel(a, alice, "open")
        await put_user(a, alice, channel, bob.pubkey)
        rename = Event.create(bob.secret, 9002, "", [["h", channel], ["name", "mine"]])
        await refused(
            relay, b, rename, "invalid: actor not authorized for name/about/archived/visibility/ttl changes"
        )
        await accepted(b, Event.create(bob.secret, 9002, "", [["h", channel], ["topic", "lunch"]]))
        stranger = Identity.new()
        async with relay.client(stranger) as s:
            topic = Event.create(stranger.secret, 9002, "", [["h", channel], ["purpose", "x"]])
            await refused(relay, s, topic, "invalid: not a member")
        bad = [
            (
                [["h", channel]],
                "invalid: kind:9002 must include at least one metadata tag "
                "(name, about, archived, topic, purpose, visibility, ttl)",
            ),
            ([["h", channel], ["archived", "yes"]], "invalid: invalid archived value: yes"),
            ([["h", channel], ["name", "#"]], "invalid: channel name is required"),
            ([["h", channel], ["visibility", "hidden"]], "invalid: invalid visibility: hidden"),
            ([["h", channel], ["ttl", "-5"]], "invalid: invalid ttl value: -5"),
        ]
        for tags, expected in bad:
            await refused(relay, a, Event.create(alice.secret, 9002, "", tags), expected)
        edit = [["h", channel], ["name", "#plans"], ["about", "a"], ["ttl", "3600"], ["purpose", "ship"]]
        await accepted(a, Event.create(alice.secret, 9002, "", edit))
        row = await relay.relay.store.get_channel(channel)
        assert row is not None
        assert (row.name, row.about, row.ttl_seconds, row.topic, row.purpose) == (
            "plans",
            "a",
            3600,
            "lunch",
            "ship",
        )
        metadata = await _state(a, channel, 39000)
        assert ["name", "plans"] in [list(t) for t in metadata.tags] and ["ttl", "3600"] in [
            list(t) for t in metadata.tags
        ]
        await accepted(a, Event.create(alice.secret, 9002, "", [["h", channel], ["ttl", ""]]))
        row = await relay.relay.store.get_channel(channel)
        assert row is not None and row.ttl_seconds is None
        renamed = [json.loads(e.content) for e in await a.query([{"kinds": [40099], "#h": [channel]}])]
        assert {"type": "channel_renamed", "actor": alice.pubkey, "name": "plans"} in renamed


async def test_archived_channel(relay: RunningRelay, alice: Identity, bob: Identity) -> None:
    async with relay.client(alice) as a, relay.client(bob) as b:
        channel = await create_channel(a, alice, "open")
        await put_user(a, alice, channel, bob.pubkey)
        before = await message(b, bob, channel, "before archiving")
        await accepted(a, Event.create(alice.secret, 9002, "", [["h", channel], ["archived", "true"]]))
        await refused(
            relay, b, Event.create(bob.secret, 9, "late", [["h", channel]]), "invalid: channel is archived"
        )
        topic = Event.create(bob.secret, 9002, "", [["h", channel], ["topic", "x"]])
        await refused(relay, b, topic, "invalid: channel is archived")
        assert before.id in await ids(b, {"kinds": [9], "#h": [channel]})  # archived stays readable
        metadata = await _state(b, channel, 39000)
        assert ["archived", "true"] in [list(t) for t in metadata.tags]
        await accepted(a, Event.create(alice.secret, 9002, "", [["h", channel], ["archived", "false"]]))
        await message(b, bob, channel, "after unarchiving")
        row = await relay.relay.store.get_channel(channel)
        assert row is not None and row.archived_at is None


# -- §18 items 53, 54 ------------------------------------------------------------------------------
async def test_delete_group(relay: RunningRelay, alice: Identity, bob: Identity) -> None:
    async with relay.client(alice) as a, relay.client(bob) as b:
        channel = await create_channel(a, alice, "open")
        await put_user(a, alice, channel, bob.pubkey, "admin")
        note = await message(b, bob, channel, "soon gone")
        sub = await live(b, {"kinds": [9], "#h": [channel]})
        assert [e.id for e in drain(sub)] == [note.id]
        by_admin = Event.create(bob.secret, 9008, "", [["h", channel]])
        await refused(relay, b, by_admin, "invalid: only owner can delete group")
        missing = Event.create(alice.secret, 9008, "", [["h", new_channel_id()]])
        await refused(relay, a, missing, "restricted: not a channel member")
        await accepted(a, Event.create(alice.secret, 9008, "", [["h", channel]]))
        with pytest.raises(RelayError) as err:
            await sub.next()
        assert err.value.message == "restricted: channel access revoked"
        assert await a.query([{"ids": [note.id]}]) == []
        assert await a.query([{"kinds": [39000, 39001, 39002, 39003], "#d": [channel]}]) == []
        with pytest.raises(RelayError) as err:
            await a.query([{"#h": [channel]}])
        assert err.value.message == "restricted: not a channel member"


async def test_state_versions_strictly_increase(relay: RunningRelay, alice: Identity) -> None:
    async with relay.client(alice) as a:
        channel = await create_channel(a, alice, "open")
        for topic in ("one", "two", "three", "four"):
            await accepted(a, Event.create(alice.secret, 9002, "", [["h", channel], ["topic", topic]]))
        current = await _state(a, channel, 39000)
    assert ["topic", "four"] in [list(t) for t in current.tags]
    rows = await relay.relay.store._read(_versions_txn, channel)  # type: ignore[attr-defined]
    assert len(rows) == 5 and rows == sorted(set(rows))  # 9007 + four edits, strictly increasing


async def _versions_txn(conn, channel_id: str) -> list[int]:
    sql = "SELECT created_at FROM events WHERE kind = 39000 AND channel_id = " + conn.dialect.placeholder(1)
    return sorted(int(r[0]) for r in await conn.fetch(sql, [channel_id]))


# -- §18 items 97, 98 ------------------------------------------------------------------------------
async def test_metadata_discovery_follows_readability(
    relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    async with relay.client(alice) as a, relay.client(bob) as b:
        channel = await create_channel(a, alice, "private")
        assert await b.query([{"kinds": [39000], "#d": [channel]}]) == []
        assert len(await a.query([{"kinds": [39000], "#d": [channel]}])) == 1
        assert await b.query([{"kinds": [39002], "#p": [bob.pubkey]}]) == []
        await put_user(a, alice, channel, bob.pubkey)
        found = await b.query([{"kinds": [39002], "#p": [bob.pubkey]}])
        assert [e.tags[0] for e in found] == [("d", channel)]  # channel discovery (§6.3 item 2)


async def test_open_to_private_revokes_non_members(
    relay: RunningRelay, alice: Identity, bob: Identity, carol: Identity
) -> None:
    async with relay.client(alice) as a, relay.client(bob) as b, relay.client(carol) as c:
        channel = await create_channel(a, alice, "open")
        await put_user(a, alice, channel, bob.pubkey)
        member_sub = await live(b, {"kinds": [9], "#h": [channel]})
        outsider_sub = await live(c, {"kinds": [9], "#h": [channel]})
        await accepted(a, Event.create(alice.secret, 9002, "", [["h", channel], ["visibility", "private"]]))
        with pytest.raises(RelayError) as err:
            await outsider_sub.next()
        assert err.value.message == "restricted: channel access revoked"
        note = await message(a, alice, channel, "members only now")
        assert (await member_sub.next()).id == note.id
        assert member_sub.closed_reason is None
        await settle(c)
        assert drain(outsider_sub) == []


async def test_refusals_leave_no_follow_ups(relay: RunningRelay, alice: Identity, bob: Identity) -> None:
    async with relay.client(alice) as a, relay.client(bob) as b:
        channel = await create_channel(a, alice, "private")
        before = await snapshot(relay)
        results = await asyncio.gather(
            *(
                b.publish(Event.create(bob.secret, 9000, str(i), [["h", channel], ["p", bob.pubkey]]))
                for i in range(3)
            )
        )
        assert {(r.accepted, r.message) for r in results} == {(False, "restricted: not a channel member")}
        assert await snapshot(relay) == before


async def test_delivery_rechecks_access_without_eviction(
    relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    """§4.7 item 3, §12.1 item 3: a missed eviction cannot leak (membership changed behind the
    relay's back: no follow-up ran, only the cache was invalidated)."""
    from buzz.core.stored import verify_stored
    from buzz.store.base import RemoveMember

    async with relay.client(alice) as a, relay.client(bob) as b:
        channel = await create_channel(a, alice, "private")
        await put_user(a, alice, channel, bob.pubkey)
        sub = await live(b, {"kinds": [9], "#h": [channel]})
        silent = verify_stored(Event.create(alice.secret, 9001, "", [["h", channel], ["p", bob.pubkey]]))
        await relay.relay.store.insert(silent.with_channel(channel), [RemoveMember(channel, bob.pubkey)])
        relay.relay.access.invalidate(channel)
        await message(a, alice, channel, "not for bob")
        await settle(b)
        assert drain(sub) == [] and sub.closed_reason is None
