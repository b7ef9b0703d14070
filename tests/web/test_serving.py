"""The relay serves the browser workspace at `/` beside NIP-11 and the WebSocket (issue 12)."""

from __future__ import annotations

import re

import aiohttp

from buzz.relay.http import web as web_ui
from tests.support.relay import Identity, RunningRelay

HTML = {"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}


async def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    async with aiohttp.ClientSession() as http, http.get(url, headers=headers or {}) as resp:
        return resp.status, dict(resp.headers), await resp.read()


async def test_browser_navigation_gets_the_page_under_a_strict_csp(sqlite_relay: RunningRelay) -> None:
    status, headers, body = await _get(sqlite_relay.http_url + "/", HTML)
    assert status == 200
    assert headers["Content-Type"].startswith("text/html")
    csp = headers["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "connect-src 'self'" in csp and "default-src 'none'" in csp
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Cache-Control"] == "no-cache"
    page = body.decode()
    assert re.search(r"<script[^>]*\ssrc=\"/app/index-[\w-]+\.js\"", page)
    assert not re.search(r"<script(?![^>]*\ssrc=)[^>]*>", page), "no inline script"
    assert " style=" not in page and "<style" not in page


async def test_assets_are_hashed_and_cached_for_a_year(sqlite_relay: RunningRelay) -> None:
    _, _, body = await _get(sqlite_relay.http_url + "/", HTML)
    names = re.findall(r"/app/([\w.-]+\.(?:js|css))", body.decode())
    assert {n.rsplit(".", 1)[1] for n in names} == {"js", "css"}
    for name in names:
        status, headers, data = await _get(f"{sqlite_relay.http_url}/app/{name}")
        assert status == 200 and data
        assert headers["Cache-Control"] == "public, max-age=31536000, immutable"
        expected = "text/javascript" if name.endswith(".js") else "text/css"
        assert headers["Content-Type"].startswith(expected)


async def test_unknown_or_traversing_asset_names_are_404(sqlite_relay: RunningRelay) -> None:
    for name in ["nope.js", "index.html", "..%2Fweb.py", "%2e%2e%2F__init__.py", ".hidden"]:
        status, _, _ = await _get(f"{sqlite_relay.http_url}/app/{name}")
        assert status == 404, name


async def test_nip11_and_websocket_still_answer_on_slash(sqlite_relay: RunningRelay) -> None:
    status, headers, body = await _get(sqlite_relay.http_url + "/", {"Accept": "application/nostr+json"})
    assert status == 200 and headers["Content-Type"].startswith("application/nostr+json")
    assert b'"supported_nips"' in body
    # A client naming both gets NIP-11: the page is only for plain browser navigations.
    status, headers, _ = await _get(
        sqlite_relay.http_url + "/", {"Accept": "text/html, application/nostr+json"}
    )
    assert headers["Content-Type"].startswith("application/nostr+json")
    status, headers, body = await _get(sqlite_relay.http_url + "/")
    assert status == 200 and headers["Content-Type"].startswith("text/plain")
    async with sqlite_relay.client(Identity.new()) as client:
        assert await client.query([{"kinds": [0], "limit": 1}]) == []


def test_bundle_ships_inside_the_package() -> None:
    assert (web_ui.DIST / "index.html").is_file()
    shipped = {p.suffix for p in web_ui.DIST.iterdir()}
    assert {".html", ".js", ".css"} <= shipped
