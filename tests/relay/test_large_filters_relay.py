"""REQ and COUNT whose filter fills a frame, over a real socket on both backends (issue 9 item 4).

Before the fix SQLite answered 985+ short `ids` prefixes with a NOTICE and no events (REQ) or
`error: database error` (COUNT).
"""

from __future__ import annotations

import itertools

import orjson

from buzz.core.event import Event
from buzz.core.limits import MAX_FRAME_BYTES
from tests.support.relay import Identity, RunningRelay
from tests.workspace.helpers import accepted, drain, live

EVERY_4_PREFIX = ["".join(p) for p in itertools.product("0123456789abcdef", repeat=4)]


async def test_every_four_character_prefix_in_one_req_and_count(relay: RunningRelay, alice: Identity) -> None:
    flt = {"ids": EVERY_4_PREFIX, "kinds": [1], "authors": [alice.pubkey]}
    assert len(orjson.dumps(["REQ", "big", flt])) < MAX_FRAME_BYTES
    async with relay.client(alice) as client:
        stored = [Event.create(alice.secret, 1, f"n{i}") for i in range(3)]
        for event in stored:
            await accepted(client, event)
        sub = await live(client, flt)
        assert {e.id for e in drain(sub)} == {e.id for e in stored}
        assert await client.count([flt]) == 3
        later = Event.create(alice.secret, 1, "live")
        await accepted(client, later)
        assert (await sub.next()).id == later.id  # the live path matches the same prefixes
        assert client.notices == []
