"""The browser workspace: `/` for `Accept: text/html`, hashed assets under `/app/…`.

The bundle is built from `web/` by `make web` into `buzz/web_dist/` and ships as package data,
so serving it needs no Node.js. `/` stays NIP-11 for `application/nostr+json` and the WebSocket
upgrade: only a request that asks for HTML and for neither of those gets the page. The page is
a client like any other (it speaks NIP-01/42 on the same port), so the CSP lets it load only
its own files and connect only back to this origin.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from importlib import resources
from pathlib import Path

from aiohttp import web

DIST = Path(str(resources.files("buzz"))) / "web_dist"
INDEX = "index.html"
ASSET = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")  # flat names, no traversal
IMMUTABLE = "public, max-age=31536000, immutable"  # names carry a content hash
TYPES = {
    ".js": "text/javascript",
    ".css": "text/css",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".woff2": "font/woff2",
    ".json": "application/json",
}

# 'self' covers ws:/wss: to this origin in CSP Level 3; blob: is for the audio worklet's
# decoded buffers only (media-src), never scripts. https: images are profile pictures (kind 0
# `picture`, which every Nostr client shows); images inside messages from other hosts are never
# fetched, the page shows them as links (decision 162).
CSP = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data: https:",
        "font-src 'self'",
        "connect-src 'self'",
        "media-src 'self' blob:",
        "worker-src 'self'",
        "manifest-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    ]
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Permissions-Policy": "microphone=(self), camera=(), geolocation=()",
}

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def wants_page(request: web.Request) -> bool:
    """True for a browser navigation to `/`: GET, Accept names text/html, no WebSocket upgrade,
    and not a NIP-11 request (which wins when both are named)."""
    if request.method != "GET" or request.path != "/":
        return False
    if request.headers.get("Upgrade", "").lower() == "websocket":
        return False
    accept = request.headers.get("Accept", "")
    return "text/html" in accept and "application/nostr+json" not in accept


def _index_response() -> web.StreamResponse:
    path = DIST / INDEX
    if not path.is_file():
        return web.Response(
            status=503,
            text="The web workspace is not built: run `make web`.\n",
            headers=SECURITY_HEADERS,
        )
    # The page itself is small and names the current hashed assets: always revalidate it.
    headers = SECURITY_HEADERS | {"Cache-Control": "no-cache"}
    return web.FileResponse(path, headers=headers | {"Content-Type": "text/html; charset=utf-8"})


@web.middleware
async def page_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Serve the page for browser navigations to `/`; everything else goes to the relay's routes."""
    if wants_page(request):
        return _index_response()
    return await handler(request)


async def asset(request: web.Request) -> web.StreamResponse:
    """`GET /app/{name}`: one file of the bundle with a year-long immutable cache, or 404."""
    name = request.match_info["name"]
    path = DIST / name
    if not ASSET.fullmatch(name) or name == INDEX or not path.is_file():
        raise web.HTTPNotFound(text="not found\n")
    content_type = TYPES.get(path.suffix, "application/octet-stream")
    return web.FileResponse(
        path, headers=SECURITY_HEADERS | {"Cache-Control": IMMUTABLE, "Content-Type": content_type}
    )


def add_routes(app: web.Application) -> None:
    """Install the page middleware and the `/app/{name}` asset route on the relay's app."""
    app.middlewares.append(page_middleware)
    app.router.add_get("/app/{name}", asset)
