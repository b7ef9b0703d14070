"""The relay's ping wheel (relay.md §7.1 item 4): one timer pings every connection once per
interval, a removed connection is never pinged again, and the timer stops with no connection."""

from __future__ import annotations

import asyncio

from buzz.relay.transport.pings import PingWheel
from tests.support.deadline import scaled


class _Peer:
    def __init__(self) -> None:
        self.pings = 0
        self.pinged = asyncio.Event()

    def ping_due(self) -> None:
        self.pings += 1
        self.pinged.set()


async def test_every_connection_is_pinged_and_a_removed_one_no_more() -> None:
    wheel = PingWheel(interval_s=0.05, slots=5)
    first, second, gone = _Peer(), _Peer(), _Peer()
    slots = {p: wheel.add(p) for p in (first, second, gone)}
    wheel.remove(gone, slots[gone])
    assert len(wheel) == 2
    await asyncio.wait_for(asyncio.gather(first.pinged.wait(), second.pinged.wait()), scaled(10))
    first.pinged.clear()
    await asyncio.wait_for(first.pinged.wait(), scaled(10))  # again, one interval later
    assert first.pings >= 2 and gone.pings == 0
    wheel.remove(first, slots[first])
    wheel.remove(second, slots[second])
    assert len(wheel) == 0 and wheel._timer is None  # no connection: no timer left running
    wheel.stop()


async def test_a_failing_connection_does_not_stop_the_others() -> None:
    class _Broken:
        def ping_due(self) -> None:
            raise RuntimeError("socket gone")

    wheel = PingWheel(interval_s=0.05, slots=1)
    wheel.add(_Broken())
    peer = _Peer()
    wheel.add(peer)
    await asyncio.wait_for(peer.pinged.wait(), scaled(10))
    wheel.stop()
