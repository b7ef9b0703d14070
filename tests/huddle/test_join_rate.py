"""Huddle join/leave churn is bounded per member (issue 24 item 17: each cycle stores a 48101
and a 48102, and one member ran 251 cycles/s).

A member joins and leaves in a loop on a real relay: after `join_limit` joins in the window the
next one is refused with `{"type":"error","code":"rate_limited",…}` and a close, so at most two
stored lifecycle events per allowed join reach the channel; another member joins meanwhile.
"""

from __future__ import annotations

import asyncio

from buzz.relay.huddle.settings import HuddleSettings
from tests.huddle.support import ChannelSpec, join, make_channel
from tests.support.deadline import scaled
from tests.support.relay import Identity, RunningRelay

LIMIT = HuddleSettings().join_limit


async def test_a_member_s_join_churn_is_refused_beyond_its_join_rate(
    sqlite_relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    cid = await make_channel(sqlite_relay, ChannelSpec(alice, members=[bob]))
    admitted, refusal = 0, None
    for _ in range(LIMIT + 5):  # without a bound every one of these would be a join and a leave
        peer = await join(sqlite_relay, alice, cid)
        assert peer.joined is not None
        if peer.joined["type"] != "joined":
            refusal = peer.joined
            assert await peer.expect_close() == []
            await peer.close()
            break
        admitted += 1
        await peer.ws.send_str('{"type":"leave"}')
        await peer.expect_close()
        await peer.close()
    window = HuddleSettings().join_window_s
    assert refusal == {
        "type": "error",
        "code": "rate_limited",
        "message": f"rate-limited: too many huddle joins ({LIMIT} per {window:g} s per member); "
        "wait before joining again",
    }
    assert admitted == LIMIT

    other = await join(sqlite_relay, bob, cid)  # the limit is per member
    assert other.joined is not None and other.joined["type"] == "joined", other.joined
    await other.close()
    async with sqlite_relay.client(alice) as reader:
        async with asyncio.timeout(scaled(10)):  # the last leaves' 48102 are stored after their close
            while (n := await reader.count([{"kinds": [48101, 48102], "#h": [cid]}])) < 2 * LIMIT + 1:
                await asyncio.sleep(0.05)
    assert n <= 2 * (LIMIT + 1)  # alice's joins and leaves, and bob's join (his leave may follow)
