"""`GET /` without an upgrade or NIP-11 Accept: the landing text names the address dialled."""

from __future__ import annotations

import aiohttp

from tests.support.relay import RunningRelay


async def test_landing_text_names_the_address_the_reader_used(sqlite_relay: RunningRelay) -> None:
    async with aiohttp.ClientSession() as http:
        async with http.get(sqlite_relay.http_url + "/") as resp:
            text = await resp.text()
        async with http.get(sqlite_relay.http_url + "/", headers={"X-Forwarded-Proto": "https"}) as resp:
            proxied = await resp.text()
    host = sqlite_relay.http_url.removeprefix("http://").rstrip("/")
    assert resp.status == 200
    assert f"Connect a Nostr client to ws://{host} " in text  # not RELAY_URL's default localhost:3000
    assert f"Connect a Nostr client to wss://{host} " in proxied
