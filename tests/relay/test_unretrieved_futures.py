"""No future's exception goes unretrieved (issue 24 item 17: one "Future exception was never
retrieved" during fuzzing).

A connection starts each EVENT's signature check in the pool as soon as the frame is read and
awaits it when the frame's turn comes. A client that sends events with bad signatures and
closes at once leaves frames in the lane that never get their turn: their checks still fail
in the pool, and nobody read that failure. The loop runs in debug mode here, and its exception
handler records what asyncio reports; the pool is drained and the collector run before looking.
"""

from __future__ import annotations

import asyncio
import gc
import threading
from typing import Any

import aiohttp
import orjson

from buzz.core.event import Event
from buzz.core.nip42 import build_auth_event
from tests.replicas.helpers import wait_until
from tests.support.relay import Identity, RunningRelay

BAD_EVENTS = 300


async def _drain_pool(running: RunningRelay) -> None:
    """Return once every verification queued so far has finished and its outcome was set: one
    task per worker that waits for all the others, so each worker has finished what was before
    it; their futures settle after the verifications' (both go through the loop in order)."""
    workers = running.relay.config.verify_workers
    barrier = threading.Barrier(workers)
    loop = asyncio.get_running_loop()
    await asyncio.gather(
        *(loop.run_in_executor(running.relay.executor, barrier.wait, 10) for _ in range(workers))
    )
    await asyncio.sleep(0)


async def _bad_signatures_then_close(running: RunningRelay, who: Identity) -> None:
    async with aiohttp.ClientSession() as http:
        ws = await http.ws_connect(running.url)
        challenge = orjson.loads((await ws.receive(5)).data)[1]
        auth = build_auth_event(who.secret, challenge, running.url)
        await ws.send_str(orjson.dumps(["AUTH", auth.to_dict()]).decode())
        assert orjson.loads((await ws.receive(5)).data)[2] is True
        for n in range(BAD_EVENTS):
            event = Event.create(who.secret, 1, f"fuzz {n}", []).to_dict()
            event["sig"] = "00" * 64  # the id is right, the signature is not
            await ws.send_str(orjson.dumps(["EVENT", event]).decode())
        await ws.close()


async def test_events_left_unhandled_at_close_leave_no_unretrieved_exception(
    sqlite_relay: RunningRelay, alice: Identity
) -> None:
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_debug(True)
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    try:
        for _ in range(3):
            await _bad_signatures_then_close(sqlite_relay, alice)
        await wait_until(lambda: not sqlite_relay.relay.connections, 10, "the connections to close")
        await _drain_pool(sqlite_relay)
        gc.collect()
        await asyncio.sleep(0)  # __del__ reports through the loop
    finally:
        loop.set_exception_handler(previous)
        loop.set_debug(False)
    unretrieved = [c for c in reported if "never retrieved" in str(c.get("message"))]
    assert unretrieved == [], f"{len(unretrieved)} unretrieved, first: {unretrieved[:1]}"
