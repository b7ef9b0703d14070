"""Raw HTTP calls to the bridge with hand-made NIP-98 headers (the tests' own client)."""

from __future__ import annotations

from typing import Any

import aiohttp
import orjson

from buzz.core.event import Event
from buzz.core.nip98 import build_auth_header
from tests.support.relay import Identity, RunningRelay


def signed_headers(who: Identity, url: str, body: bytes, method: str = "POST", **kw: Any) -> dict[str, str]:
    return {"Authorization": build_auth_header(who.secret, url, method, body, **kw)}


async def post(
    relay: RunningRelay,
    path: str,
    payload: Any,
    who: Identity | None,
    *,
    headers: dict[str, str] | None = None,
    raw: bytes | None = None,
) -> tuple[int, Any]:
    """POST JSON (or `raw` bytes) to `path`; sign with `who` unless `headers` are given."""
    url = relay.http_url + path
    body = raw if raw is not None else orjson.dumps(payload)
    if headers is None:
        headers = signed_headers(who, url, body) if who is not None else {}
    async with aiohttp.ClientSession() as session:
        async with session.post(url, data=body, headers=headers) as resp:
            text = await resp.read()
            try:
                return resp.status, orjson.loads(text)
            except orjson.JSONDecodeError:
                return resp.status, text.decode()


async def publish(relay: RunningRelay, who: Identity, event: Event) -> tuple[int, Any]:
    return await post(relay, "/events", event.to_dict(), who)
