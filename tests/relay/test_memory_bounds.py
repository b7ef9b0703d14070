"""Buffers a client fills are bounded in bytes (issue 9 items 2, 3 and 9).

A subscriber that stops reading is closed as a slow consumer, whether its live matches pile
up in the send queue or in the hold buffer of a REQ still sending stored results; an
oversized frame is answered with a NOTICE before the 1009 close.
"""

from __future__ import annotations

import asyncio
import gc
import tracemalloc
from collections.abc import Iterator
from types import FrameType

import aiohttp
import orjson
import pytest

from buzz.core.errors import BuzzError
from buzz.core.event import Event
from buzz.core.limits import MAX_FRAME_BYTES
from buzz.core.nip42 import build_auth_event
from tests.support.deadline import scaled
from tests.support.relay import Identity, RunningRelay, relay_on

CONTENT = "c" * 60_000
BOUND = 1 << 20  # send_buffer_bytes for these tests
MAX_GROWTH = 4 << 20  # traced bytes a non-reader may cost with a 1 MiB bound (queue, held, socket)
SLOW_REQS = 5


@pytest.fixture
def traced() -> Iterator[None]:
    tracemalloc.start()
    try:
        yield
    finally:
        tracemalloc.stop()


def _traced_now() -> int:
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


async def _non_reader(s: aiohttp.ClientSession, running: RunningRelay, who: Identity, req: list) -> object:
    """An authenticated connection that sends `req` and then never reads again."""
    ws = await s.ws_connect(running.url, max_msg_size=0)
    challenge = orjson.loads((await ws.receive(5)).data)[1]
    auth = build_auth_event(who.secret, challenge, running.url)
    await ws.send_str(orjson.dumps(["AUTH", auth.to_dict()]).decode())
    assert orjson.loads((await ws.receive(5)).data)[2] is True
    await ws.send_str(orjson.dumps(req).decode())
    return ws


def _conn_of(running: RunningRelay, pubkey: str):
    return next(c for c in running.relay.connections if c.pubkey == pubkey)


async def _publish(running: RunningRelay, who: Identity, n: int, tag: str) -> None:
    async with running.client(who) as c:
        for i in range(n):
            result = await c.publish(Event.create(who.secret, 1, CONTENT, [["t", tag], ["n", str(i)]]))
            assert result.accepted, result.message


async def _closed_by_relay(running: RunningRelay, pubkey: str) -> bool:
    for _ in range(100):
        if not any(c.pubkey == pubkey for c in running.relay.connections):
            return True
        await asyncio.sleep(0.1)
    return False


async def test_a_live_subscriber_that_stops_reading_is_bounded_in_bytes_and_closed(
    tmp_path, alice: Identity, bob: Identity, traced: None
) -> None:
    async with relay_on(tmp_path, send_buffer_bytes=BOUND) as running, aiohttp.ClientSession() as s:
        ws = await _non_reader(s, running, bob, ["REQ", "live", {"kinds": [1], "#t": ["live"]}])
        await asyncio.sleep(0.2)  # EOSE went out; from now on every match is live
        before = _traced_now()
        tracemalloc.reset_peak()
        await _publish(running, alice, 300, "live")  # 18 MB for a reader that takes none of it
        peak = tracemalloc.get_traced_memory()[1] - before
        assert await _closed_by_relay(running, bob.pubkey)
        assert peak < MAX_GROWTH + 2 * len(CONTENT) * 8, peak  # the publisher's own events in flight
        await ws.close()


async def test_a_subscriber_that_stops_reading_in_its_stored_phase_is_closed(
    tmp_path, alice: Identity, bob: Identity, traced: None
) -> None:
    async with relay_on(tmp_path, send_buffer=5, send_buffer_bytes=BOUND) as running:
        await _publish(running, alice, 300, "stored")
        async with aiohttp.ClientSession() as s:
            # One REQ's stored results stop at READ_MAX_BYTES (4 MiB, issue 24 item 11), which
            # the sockets' buffers may take whole: five of them (21 MB) cannot be.
            flt = {"kinds": [1], "#t": ["stored", "live"]}
            ws = await _non_reader(s, running, bob, ["REQ", "slow0", flt])
            for i in range(1, SLOW_REQS):
                await ws.send_str(orjson.dumps(["REQ", f"slow{i}", flt]).decode())
            await asyncio.sleep(0.5)
            conn = _conn_of(running, bob.pubkey)
            # stuck sending stored results to a non-reader
            assert not all(conn.subs[f"slow{i}"].live for i in range(SLOW_REQS))
            before = _traced_now()
            await _publish(running, alice, 100, "live")  # 6 MB of live matches to hold
            growth = _traced_now() - before
            assert await _closed_by_relay(running, bob.pubkey)
            # Each stuck subscription holds at most its bound of live matches.
            assert growth < MAX_GROWTH + (SLOW_REQS - 1) * BOUND, growth
            await ws.close()


async def test_an_oversized_frame_gets_a_notice_then_the_1009_close(tmp_path) -> None:
    async with relay_on(tmp_path) as running, aiohttp.ClientSession() as s:
        async with s.ws_connect(running.url) as ws:
            await ws.receive(5)  # challenge
            await ws.send_str("[" + " " * (MAX_FRAME_BYTES - 2) + "]")  # exactly the limit: parsed
            notice = orjson.loads((await ws.receive(5)).data)
            assert notice[0] == "NOTICE" and notice[1].startswith("invalid message:")
            n = MAX_FRAME_BYTES + 1000
            await ws.send_str("[" + " " * (n - 2) + "]")
            msg = await ws.receive(5)
            assert msg.type == aiohttp.WSMsgType.TEXT, msg
            assert orjson.loads(msg.data) == [
                "NOTICE",
                f"error: frame too large ({n} > {MAX_FRAME_BYTES} bytes)",
            ]
            msg = await ws.receive(5)
            assert msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
            assert ws.close_code == 1009


async def test_the_send_queue_is_bounded_in_bytes_and_in_messages() -> None:
    from buzz.relay.transport.outbound import Outbound

    big = "b" * 4000
    q = Outbound(max_messages=100, max_bytes=10_000)
    assert q.offer(big) and q.offer(big) and not q.offer(big)  # the third would pass 10,000 bytes
    assert len(q) == 2 and q.bytes <= 10_000
    waiting = asyncio.create_task(q.put(big))  # stored results wait for room instead
    await asyncio.sleep(0.05)
    assert not waiting.done()
    assert await q.get() == big
    await asyncio.wait_for(waiting, scaled(1))
    q.clear()
    assert q.offer("h" * 50_000)  # larger than the bound, but alone: it still goes out
    few = Outbound(max_messages=2, max_bytes=1 << 20)
    assert few.offer("a") and few.offer("b") and not few.offer("c")


async def test_frames_read_ahead_of_their_handling_are_bounded_in_bytes(
    tmp_path, alice: Identity, traced: None
) -> None:
    """A client pipelining big EVENTs faster than they commit is paused (TCP backpressure)
    instead of having all its frames held: every event still gets its OK."""
    async with relay_on(tmp_path) as running, aiohttp.ClientSession() as s:
        ws = await _non_reader(s, running, alice, ["COUNT", "none", {"ids": ["00" * 32]}])
        assert orjson.loads((await ws.receive(5)).data) == ["COUNT", "none", {"count": 0}]
        events = [Event.create(alice.secret, 1, "e" * 250_000, [["n", str(i)]]) for i in range(300)]
        frames = [orjson.dumps(["EVENT", e.to_dict()]).decode() for e in events]  # 75 MB in all
        before = _traced_now()
        tracemalloc.reset_peak()
        sender = asyncio.create_task(_send_all(ws, frames))
        oks = []
        while len(oks) < len(frames):
            answer = orjson.loads((await ws.receive(60)).data)
            oks.append(answer[2] is True and answer[0] == "OK")
        await sender
        peak = tracemalloc.get_traced_memory()[1] - before
        assert all(oks)
        assert peak < 30 << 20, peak
        await ws.close()


async def _send_all(ws: aiohttp.ClientWebSocketResponse, frames: list[str]) -> None:
    for text in frames:
        await ws.send_str(text)


async def test_refused_events_are_freed_when_answered_not_by_a_later_collection(tmp_path) -> None:
    """Refused work leaves no reference cycle behind: an EVENT refused by the prechecks (not
    authenticated), by its shape (a malformed sig) or by verification (a forged sig), and a REQ
    with a bad filter. Each refusal used to keep its traceback, whose frames held the frame
    text and the refusal itself, so every refused 100 KB frame stayed in memory until a full
    garbage collection (the soak's +70 MB RSS step). With the collector off, nothing of the
    refused work may be found unreachable afterwards."""
    who = Identity.new()
    async with relay_on(tmp_path) as running, aiohttp.ClientSession() as s:
        async with (
            s.ws_connect(running.url, max_msg_size=0) as ws,
            s.ws_connect(running.url, max_msg_size=0) as authed,
        ):
            await ws.receive(5)  # challenge, left unanswered
            challenge = orjson.loads((await authed.receive(5)).data)[1]
            auth = build_auth_event(who.secret, challenge, running.url)
            await authed.send_str(orjson.dumps(["AUTH", auth.to_dict()]).decode())
            assert orjson.loads((await authed.receive(5)).data)[2] is True
            gc.collect()
            gc.disable()
            gc.set_debug(gc.DEBUG_SAVEALL)  # what a collection finds unreachable stays in gc.garbage
            try:
                for i in range(20):
                    event = Event.create(who.secret, 1, "x" * 100_000, [["n", str(i)]])
                    await ws.send_str(orjson.dumps(["EVENT", event.to_dict()]).decode())
                    ok = orjson.loads((await ws.receive(5)).data)
                    assert ok[:3] == ["OK", event.id, False] and ok[3].startswith("auth-required:")
                    malformed = event.to_dict() | {"sig": "not a signature"}  # refused while parsed
                    await ws.send_str(orjson.dumps(["EVENT", malformed]).decode())
                    ok = orjson.loads((await ws.receive(5)).data)
                    assert ok[:3] == ["OK", event.id, False] and ok[3].startswith("invalid:")
                    await ws.send_str(orjson.dumps(["REQ", f"s{i}", {"kinds": "not a list"}]).decode())
                    closed = orjson.loads((await ws.receive(5)).data)
                    assert closed[:2] == ["CLOSED", f"s{i}"] and closed[2].startswith("invalid:")
                    forged = event.to_dict() | {"sig": "ab" * 64}  # refused by verification
                    await authed.send_str(orjson.dumps(["EVENT", forged]).decode())
                    ok = orjson.loads((await authed.receive(5)).data)
                    assert ok[:3] == ["OK", event.id, False] and ok[3].startswith("invalid:")
                gc.collect()
                refusals = [o for o in gc.garbage if isinstance(o, BuzzError)]
                frames = [
                    o for o in gc.garbage if isinstance(o, FrameType) and "buzz" in o.f_code.co_filename
                ]
            finally:
                gc.set_debug(0)
                gc.garbage.clear()
                gc.enable()
    assert (refusals, frames) == ([], [])
