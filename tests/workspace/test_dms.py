"""Direct messages (relay.md §4.8; §18 item 83), over real WebSocket on both backends."""

from __future__ import annotations

import itertools
import json

import pytest

from buzz.client import RelayError
from buzz.core.event import Event
from tests.support.relay import Identity, RunningRelay
from tests.workspace.helpers import accepted, create_channel, live, message, refused

_NONCE = itertools.count()


def _response(message_text: str) -> dict[str, object]:
    prefix, _, body = message_text.partition(":")
    assert prefix == "response", message_text
    assert body == json.dumps(json.loads(body), separators=(",", ":")), body  # compact JSON
    return json.loads(body)


async def _open(client, who: Identity, *others: str) -> dict[str, object]:
    """A new 41010 event (a nonce tag keeps same-second events distinct) and its response."""
    tags = [["p", pk] for pk in others] + [["n", str(next(_NONCE))]]
    return _response((await accepted(client, Event.create(who.secret, 41010, "", tags))).message)


async def test_open_creates_then_reuses(
    relay: RunningRelay, alice: Identity, bob: Identity, carol: Identity
) -> None:
    async with relay.client(alice) as a, relay.client(bob) as b, relay.client(carol) as c:
        notices = await live(b, {"kinds": [44100], "#p": [bob.pubkey]})
        first = await _open(a, alice, bob.pubkey, carol.pubkey)
        assert first["created"] is True
        dm = str(first["channel_id"])
        again = await _open(a, alice, carol.pubkey, bob.pubkey)
        assert again == {"channel_id": dm, "created": False}
        from_bob = await _open(b, bob, alice.pubkey, carol.pubkey)
        assert from_bob == {"channel_id": dm, "created": False}
        assert json.loads((await notices.next()).content)["channel_id"] == dm
        channel = await relay.relay.store.get_channel(dm)
        assert channel is not None and (channel.channel_type, channel.visibility) == ("dm", "private")
        members = await relay.relay.store.active_members(dm)
        assert sorted(m.pubkey for m in members) == sorted([alice.pubkey, bob.pubkey, carol.pubkey])
        assert {m.role for m in members} == {"member"}
        metadata = (await c.query([{"kinds": [39000], "#d": [dm]}]))[0]
        tags = [list(t) for t in metadata.tags]
        assert ["hidden"] in tags and ["t", "dm"] in tags and ["private"] in tags
        assert sorted(t[1] for t in tags if t[0] == "p") == sorted([alice.pubkey, bob.pubkey, carol.pubkey])
        created = [json.loads(e.content) for e in await c.query([{"kinds": [40099], "#h": [dm]}])]
        assert created == [
            {
                "type": "dm_created",
                "actor": alice.pubkey,
                "participants": sorted([alice.pubkey, bob.pubkey, carol.pubkey]),
            }
        ]
        hello = await message(c, carol, dm, "hi both")
        assert hello.id in {e.id for e in await b.query([{"kinds": [9], "#h": [dm]}])}
        opened = await a.query([{"kinds": [41010], "authors": [alice.pubkey, bob.pubkey]}])
        assert len(opened) == 3  # every 41010 of that set is stored in the DM
        for event in opened:
            stored = await relay.relay.store.get(event.id)
            assert stored is not None and stored.channel_id == dm
        assert await a.query([{"kinds": [41010], "#h": [dm]}]) == []  # no h tag: no #h match (NIP-01)
    outsider = Identity.new()
    async with relay.client(outsider) as o:
        with pytest.raises(RelayError) as err:
            await o.query([{"kinds": [9], "#h": [dm]}])
        assert err.value.message == "restricted: not a channel member"


async def test_pair_dm_differs_from_group_dm(
    relay: RunningRelay, alice: Identity, bob: Identity, carol: Identity
) -> None:
    async with relay.client(alice) as a:
        pair = await _open(a, alice, bob.pubkey)
        group = await _open(a, alice, bob.pubkey, carol.pubkey)
        assert pair["created"] is True and group["created"] is True
        assert pair["channel_id"] != group["channel_id"]


async def test_open_refusals(relay: RunningRelay, alice: Identity) -> None:
    others = [Identity.new().pubkey for _ in range(9)]
    async with relay.client(alice) as a:
        none = Event.create(alice.secret, 41010, "", [])
        await refused(relay, a, none, "invalid: pubkeys must contain at least 1 other participant")
        nine = Event.create(alice.secret, 41010, "", [["p", pk] for pk in others])
        await refused(relay, a, nine, "invalid: pubkeys may contain at most 8 other participants (9 total)")
        bad = Event.create(alice.secret, 41010, "", [["p", "ABC"]])
        await refused(relay, a, bad, "invalid: bad pubkey hex: ABC")
        eight = await _open(a, alice, *others[:8])
        assert eight["created"] is True


async def test_add_member_opens_the_larger_dm(
    relay: RunningRelay, alice: Identity, bob: Identity, carol: Identity
) -> None:
    async with relay.client(alice) as a, relay.client(carol) as c:
        dm = str((await _open(a, alice, bob.pubkey))["channel_id"])
        add = Event.create(alice.secret, 41011, "", [["h", dm], ["p", carol.pubkey]])
        answer = _response((await accepted(a, add)).message)
        assert answer["created"] is True and answer["channel_id"] != dm
        stored = await relay.relay.store.get(add.id)
        assert stored is not None and stored.channel_id == dm  # stored in the original DM
        again = Event.create(alice.secret, 41011, "", [["h", dm], ["p", carol.pubkey], ["n", "2"]])
        assert _response((await accepted(a, again)).message) == {
            "channel_id": answer["channel_id"],
            "created": False,
        }
        members = await relay.relay.store.active_members(dm)
        assert sorted(m.pubkey for m in members) == sorted([alice.pubkey, bob.pubkey])  # sets are immutable
        intruder = Event.create(carol.secret, 41011, "", [["h", dm], ["p", carol.pubkey]])
        await refused(relay, c, intruder, "restricted: not a member of this DM")
        stream = await create_channel(a, alice, "private")
        not_dm = Event.create(alice.secret, 41011, "", [["h", stream], ["p", carol.pubkey]])
        await refused(relay, a, not_dm, "invalid: channel is not a DM")
        crowd = [Identity.new().pubkey for _ in range(8)]
        too_many = Event.create(alice.secret, 41011, "", [["h", dm], *[["p", pk] for pk in crowd]])
        await refused(relay, a, too_many, "invalid: DM supports at most 9 participants")


async def test_hide_until_reopened(relay: RunningRelay, alice: Identity, bob: Identity) -> None:
    async with relay.client(alice) as a, relay.client(bob) as b:
        dm = str((await _open(a, alice, bob.pubkey))["channel_id"])
        hide = Event.create(alice.secret, 41012, "", [["h", dm]])
        assert _response((await accepted(a, hide)).message) == {"channel_id": dm, "hidden": True}
        assert await relay.relay.store.is_dm_hidden(dm, alice.pubkey)
        assert not await relay.relay.store.is_dm_hidden(dm, bob.pubkey)
        stored = await relay.relay.store.get(hide.id)
        assert stored is not None and stored.channel_id == dm
        dup = await a.publish(hide)  # §4.8 item 5: a duplicate command executes nothing
        assert (dup.accepted, dup.message.split(":")[0]) == (True, "duplicate")
        await _open(a, alice, bob.pubkey)
        assert not await relay.relay.store.is_dm_hidden(dm, alice.pubkey)
        outsider = Identity.new()
        async with relay.client(outsider) as o:
            await refused(
                relay,
                o,
                Event.create(outsider.secret, 41012, "", [["h", dm]]),
                "restricted: not a member of this DM",
            )
        await refused(
            relay,
            b,
            Event.create(bob.secret, 41012, ""),
            "invalid: channel-scoped events must include an h tag",
        )


async def test_duplicate_open_executes_nothing(relay: RunningRelay, alice: Identity, bob: Identity) -> None:
    async with relay.client(alice) as a:
        event = Event.create(alice.secret, 41010, "", [["p", bob.pubkey]])
        first = _response((await accepted(a, event)).message)
        count = len(await relay.relay.store.active_members(str(first["channel_id"])))
        dup = await a.publish(event)
        assert (dup.accepted, dup.message.split(":")[0]) == (True, "duplicate")
        assert len(await relay.relay.store.active_members(str(first["channel_id"]))) == count
