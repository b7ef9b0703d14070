"""A relay that answers `/query` with a malformed event gets one BridgeError, never a stray
exception (fail closed: a bad answer is an error the caller can report, not a crash)."""

from __future__ import annotations

import pytest
from aiohttp import web

from buzz.client.http_bridge import BridgeClient, BridgeError
from tests.support.http_app import serve_app
from tests.support.relay import Identity


async def test_a_malformed_event_from_query_is_a_bridge_error() -> None:
    async def query(_request: web.Request) -> web.Response:
        # the shape of an event, but no valid id or signature: what a broken or hostile relay sends
        return web.json_response([{"id": "x", "kind": 1}])

    app = web.Application()
    app.router.add_post("/query", query)
    async with serve_app(app) as base, BridgeClient(base, Identity.new().secret) as bridge:
        with pytest.raises(BridgeError) as caught:
            await bridge.query([{"kinds": [1]}])
    assert caught.value.malformed is True
    assert "malformed event" in str(caught.value)
