"""A seated participant who loses access is closed out of the huddle (relay.md §4.7, §7.3 item
2.3; huddle.md §4.2, §5.8): removed from the private channel (kind 9001), or banned by the
operator while seated. The seat gets the error a rejoin would get (`not a member`,
`restricted: not a relay member`) and a 1008 close; the others get `left`, and 48102 is
emitted. Real relay, real sockets; the ban is written through the store as `buzz admin ban`
writes it, and the relay's ban watch (a 5 s poll) finds it."""

from __future__ import annotations

import asyncio

from buzz.core.event import Event
from tests.huddle.support import (
    BAN_POLL_WAIT_S,
    NOT_A_MEMBER,
    NOT_RELAY_MEMBER,
    ChannelSpec,
    join,
    make_channel,
    refused,
    sees_left,
)
from tests.support.relay import Identity, RunningRelay


async def test_a_member_removed_while_seated_loses_the_seat(
    sqlite_relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    cid = await make_channel(sqlite_relay, ChannelSpec(alice, members=[bob]))
    async with sqlite_relay.client(alice) as owner:
        sub = await owner.subscribe([{"kinds": [48102], "#h": [cid]}])
        await asyncio.wait_for(sub.eose.wait(), 5)
        pa = await join(sqlite_relay, alice, cid)
        pb = await join(sqlite_relay, bob, cid)
        bob_index = pb.joined["peer_index"]  # type: ignore[index]

        removal = Event.create(alice.secret, 9001, "", [["h", cid], ["p", bob.pubkey]])
        result = await owner.publish(removal)
        assert result.accepted, result.message

        texts = await pb.expect_close(10)
        assert texts[-1] == NOT_A_MEMBER, texts
        assert pb.close_frame == (1008, "channel access revoked")
        await sees_left([pa], bob.pubkey, bob_index)
        gone = await sub.next(timeout=5)
        assert (gone.kind, gone.first_tag("p"), gone.pubkey) == (48102, bob.pubkey, sqlite_relay.relay.pubkey)
        assert await refused(sqlite_relay, bob, cid) == NOT_A_MEMBER
    for peer in (pa, pb):
        await peer.close()


async def test_a_key_banned_while_seated_loses_the_seat(
    sqlite_relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    cid = await make_channel(sqlite_relay, ChannelSpec(alice, members=[bob]))
    pa = await join(sqlite_relay, alice, cid)
    pb = await join(sqlite_relay, bob, cid)
    bob_index = pb.joined["peer_index"]  # type: ignore[index]

    await sqlite_relay.relay.store.ban(bob.pubkey, "spam")  # type: ignore[attr-defined]

    texts = await pb.expect_close(BAN_POLL_WAIT_S)
    assert texts[-1] == NOT_RELAY_MEMBER, texts
    assert pb.close_frame == (1008, "blocked")
    await sees_left([pa], bob.pubkey, bob_index)
    slot = sqlite_relay.relay.huddles.rooms.get(sqlite_relay.relay.huddles.settings.community_id, cid)
    assert slot is not None and [p.pubkey for p in slot.room.peers.values()] == [alice.pubkey]
    assert await refused(sqlite_relay, bob, cid) == NOT_RELAY_MEMBER
    for peer in (pa, pb):
        await peer.close()
