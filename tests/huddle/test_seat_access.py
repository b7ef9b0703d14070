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
    frame,
    join,
    make_channel,
    refused,
    sees_left,
)
from tests.support.deadline import scaled
from tests.support.relay import Identity, RunningRelay


async def test_a_member_removed_while_seated_loses_the_seat(
    sqlite_relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    cid = await make_channel(sqlite_relay, ChannelSpec(alice, members=[bob]))
    async with sqlite_relay.client(alice) as owner:
        sub = await owner.subscribe([{"kinds": [48102], "#h": [cid]}])
        await asyncio.wait_for(sub.eose.wait(), scaled(5))
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


async def test_a_seat_still_sending_when_it_is_closed_still_reads_why(
    sqlite_relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    """The relay closes an ended seat's TCP connection only after the client's own close frame:
    a client still sending audio (a loaded box reads late) would otherwise get a reset that
    discards the error and the close frame unread ("no close frame" instead of `room_ended` /
    `not a member`, issue 24)."""
    cid = await make_channel(sqlite_relay, ChannelSpec(alice, members=[bob]))
    async with sqlite_relay.client(alice) as owner:
        sub = await owner.subscribe([{"kinds": [48102], "#h": [cid]}])
        await asyncio.wait_for(sub.eose.wait(), scaled(5))
        pb = await join(sqlite_relay, bob, cid)
        removal = Event.create(alice.secret, 9001, "", [["h", cid], ["p", bob.pubkey]])
        assert (await owner.publish(removal)).accepted
        gone = await sub.next(timeout=5)  # the seat's cleanup ran: the relay has closed it
        assert gone.first_tag("p") == bob.pubkey
        for seq in range(5):  # bob has not read yet and keeps talking
            await pb.ws.send_bytes(frame(seq))
        texts = await pb.expect_close(10)
        assert texts[-1] == NOT_A_MEMBER, texts
        assert pb.close_frame == (1008, "channel access revoked")
    await pb.close()


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
