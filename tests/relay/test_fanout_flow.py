"""Live fan-out writes straight to a subscriber's socket only while that socket takes frames
at once (issue 30 item 3, decision 300): a subscriber that stops reading pauses its
transport, its matches then take the bounded send queue, and once it reads again every
event arrives exactly once and in order, and direct writes resume."""

from __future__ import annotations

import asyncio

import aiohttp
import orjson

from buzz.core.event import Event
from buzz.core.nip42 import build_auth_event
from tests.support.relay import Identity, relay_on

CONTENT = "c" * 60_000
EVENTS = 300  # 18 MB: more than the loopback socket buffers of both ends hold


async def test_a_paused_subscriber_gets_every_event_once_in_order_and_direct_writes_resume(
    tmp_path, alice: Identity, bob: Identity
) -> None:
    # Queue bounds wide enough for everything: this test is about order, not the slow-consumer close.
    async with (
        relay_on(tmp_path, send_buffer=2 * EVENTS, send_buffer_bytes=64 << 20) as running,
        aiohttp.ClientSession() as s,
        s.ws_connect(running.url, max_msg_size=0) as ws,
    ):
        challenge = orjson.loads((await ws.receive(5)).data)[1]
        auth = build_auth_event(bob.secret, challenge, running.url)
        await ws.send_str(orjson.dumps(["AUTH", auth.to_dict()]).decode())
        assert orjson.loads((await ws.receive(5)).data)[2] is True
        await ws.send_str(orjson.dumps(["REQ", "live", {"kinds": [1], "#t": ["flow"]}]).decode())
        assert orjson.loads((await ws.receive(5)).data) == ["EOSE", "live"]
        conn = next(c for c in running.relay.connections if c.pubkey == bob.pubkey)
        assert conn.direct is not None  # an idle reader's socket takes frames at once

        ids = []
        async with running.client(alice) as c:  # bob reads nothing meanwhile
            for i in range(EVENTS):
                event = Event.create(alice.secret, 1, CONTENT, [["t", "flow"], ["n", str(i)]])
                assert (await c.publish(event)).accepted
                ids.append(event.id)
        assert conn.direct is None  # paused, or frames queued behind the pause: no direct write

        got = []
        while len(got) < EVENTS:
            msg = orjson.loads((await ws.receive(30)).data)
            assert msg[:2] == ["EVENT", "live"], msg[:2]
            got.append(msg[2]["id"])
        assert got == ids
        for _ in range(100):  # the queue drains and the transport resumes
            if conn.direct is not None:
                break
            await asyncio.sleep(0.05)
        assert conn.direct is not None

        async with running.client(alice) as c:
            last = Event.create(alice.secret, 1, "after", [["t", "flow"]])
            assert (await c.publish(last)).accepted
        msg = orjson.loads((await ws.receive(10)).data)
        assert msg[:2] == ["EVENT", "live"] and msg[2]["id"] == last.id
        assert conn.direct is not None
