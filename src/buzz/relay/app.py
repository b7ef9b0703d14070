"""aiohttp routes on one port: NIP-11, WebSocket and the web page at `/`, `/info`, `/health`.

Thin glue: each handler turns a request into a call on the Relay's parts.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from urllib.parse import urlsplit

from aiohttp import web

from buzz.relay.connection import Connection
from buzz.relay.http import bridge as http_bridge
from buzz.relay.http import media as media_routes
from buzz.relay.http import nip11
from buzz.relay.http import web as web_ui
from buzz.relay.http import workflows as workflow_routes
from buzz.relay.operator import oplog
from buzz.relay.operator.metrics_prom import CONTENT_TYPE as METRICS_CONTENT_TYPE
from buzz.relay.operator.telemetry import forwarded_for
from buzz.relay.relay import Relay
from buzz.relay.transport.lean_ws import LeanWebSocket, upgrade_response
from buzz.relay.transport.websocket import RelayWebSocket

log = logging.getLogger(__name__)

RELAY_KEY: web.AppKey[Relay] = web.AppKey("relay", Relay)

LANDING = "This is a buzz relay. Connect a Nostr client to {url} (NIP-42 authentication required).\n"


def _nip11(request: web.Request) -> web.Response:
    relay = request.app[RELAY_KEY]
    return web.json_response(
        nip11.document(relay.config, relay.pubkey),
        content_type="application/nostr+json",
        headers=nip11.CORS_HEADERS,
    )


def _plain(request: web.Request) -> web.Response:
    """`GET /` without an upgrade: NIP-11 when asked for, else the landing text."""
    relay = request.app[RELAY_KEY]
    if "application/nostr+json" in request.headers.get("Accept", ""):
        return _nip11(request)
    return web.Response(text=LANDING.format(url=_dialled_url(relay.config.relay_url, request)))


def _dialled_url(relay_url: str, request: web.Request) -> str:
    """RELAY_URL when the request came to its host, else ws(s)://<Host> of the request: a relay
    bound to another port than RELAY_URL's default names the address the reader just used."""
    if urlsplit(relay_url).netloc == request.host:
        return relay_url
    secure = request.secure or request.headers.get("X-Forwarded-Proto", "").lower() == "https"
    return f"{'wss' if secure else 'ws'}://{request.host}"


async def info(request: web.Request) -> web.Response:
    return _nip11(request)


async def options(request: web.Request) -> web.Response:
    return web.Response(status=204, headers=nip11.CORS_HEADERS)


async def health(request: web.Request) -> web.Response:
    relay = request.app[RELAY_KEY]
    try:
        ok = await relay.store.is_healthy()
    except Exception:
        ok = False
    return web.Response(text="ok" if ok else "database unavailable", status=200 if ok else 503)


# Close codes a client (or the transport) ends a connection with, as the operator reads them.
CLIENT_CLOSE_REASONS = {
    1000: "client closed",
    1001: "client going away",
    1005: "client closed",
    1006: "connection lost",
    1009: "frame too large",
}


def close_reason(ws: RelayWebSocket | LeanWebSocket) -> str:
    """Why the connection ended, in the words of the operator log."""
    if ws.relay_close is not None:
        code, text = ws.relay_close
        return text or f"closed by the relay (code {code})"
    code = ws.close_code
    return CLIENT_CLOSE_REASONS.get(code or 1006, f"client closed (code {code})")


async def root(request: web.Request) -> web.StreamResponse:
    """`GET /`: the relay's WebSocket, else `_plain`. The WebSocket is served in this coroutine
    rather than one awaited from it: a connection's handler chain stays suspended for its whole
    life, and each frame in it is memory of every idle connection (issue 17)."""
    if request.headers.get("Upgrade", "").lower() != "websocket":
        return _plain(request)
    relay = request.app[RELAY_KEY]
    if len(relay.connections) >= relay.max_connections:
        return web.Response(status=503, text="too many connections")
    if relay.config.websocket_layer == "lean":
        return await _serve_lean(request, relay)
    ws = RelayWebSocket(relay.config.max_frame_bytes, autoping=False, compress=False)
    await ws.prepare(request)
    telemetry = relay.telemetry
    label = telemetry.connection_label()
    token = oplog.CONNECTION.set(label)  # tasks started from here on name the connection in logs
    telemetry.connection_opened(label, request.remote, forwarded_for(request.headers.get("X-Forwarded-For")))
    started = time.monotonic()
    conn = Connection(relay, ws, request.host, request.transport)
    relay.connections.add(conn)
    try:
        await conn.run()
    finally:
        relay.connections.discard(conn)
        telemetry.connection_closed(
            label, request.remote, conn.pubkey, time.monotonic() - started, close_reason(ws)
        )
        oplog.CONNECTION.reset(token)
    return ws


async def _serve_lean(request: web.Request, relay: Relay) -> web.StreamResponse:
    """The 101 from aiohttp, then the socket goes to a `LeanWebSocket` and this handler returns:
    aiohttp keeps nothing of the connection (issue 30 item 2)."""
    response = upgrade_response(request)
    await response.prepare(request)
    await response.write_eof()  # the 101 is on the wire before the socket changes hands
    if request.transport is None or request.transport.is_closing():
        return response
    telemetry = relay.telemetry
    label = telemetry.connection_label()
    token = oplog.CONNECTION.set(label)  # the socket's callbacks run in this context (`adopt`)
    try:
        remote = request.remote
        telemetry.connection_opened(label, remote, forwarded_for(request.headers.get("X-Forwarded-For")))
        ws = LeanWebSocket(relay.config.max_frame_bytes)
        conn = Connection(relay, ws, request.host, request.transport)
        # A partial, not a closure: its seven cells would be memory of every idle connection.
        ended = functools.partial(_lean_ended, relay, conn, label, remote, time.monotonic())
        relay.connections.add(conn)
        conn.serve(ended)
        ws.adopt(request, conn)
    finally:
        oplog.CONNECTION.reset(token)
    return response


def _lean_ended(relay: Relay, conn: Connection, label: str, remote: str | None, started: float) -> None:
    relay.connections.discard(conn)
    reason = close_reason(conn.ws)
    relay.telemetry.connection_closed(label, remote, conn.pubkey, time.monotonic() - started, reason)


async def metrics(request: web.Request) -> web.Response:
    relay = request.app[RELAY_KEY]
    return web.Response(body=relay.telemetry.metrics.render(), headers={"Content-Type": METRICS_CONTENT_TYPE})


def build_metrics_app(relay: Relay) -> web.Application:
    """`GET /metrics` alone, for its own listener (`--metrics-bind`): never on the public port."""
    app = web.Application()
    app[RELAY_KEY] = relay
    app.router.add_get("/metrics", metrics)
    return app


def build_app(relay: Relay) -> web.Application:
    # The guard comes first: it counts every plain HTTP request, the page's included.
    app = web.Application(client_max_size=1 << 20, middlewares=[relay.http_guard.middleware])
    app[RELAY_KEY] = relay
    app.router.add_get("/", root)
    app.router.add_route("OPTIONS", "/", options)
    app.router.add_get("/info", info)
    app.router.add_route("OPTIONS", "/info", options)
    app.router.add_get("/health", health)
    web_ui.add_routes(app)  # the browser workspace at / (text/html) and /app/…
    relay.huddles.install(app)  # huddle.md §2.1: GET /huddle/{channel_id}/audio
    if relay.config.http_bridge:
        http_bridge.add_routes(app, relay)  # relay.md §15
    media_routes.add_routes(app, relay)  # media.md §2: Blossom upload and read
    workflow_routes.add_routes(app, relay)  # workflows.md §14, §15

    async def _startup(app: web.Application) -> None:
        await relay.start()

    async def _shutdown(app: web.Application) -> None:
        # on_shutdown runs before aiohttp waits for open handlers: closing the sockets here is
        # what lets SIGTERM stop the relay at once with clients connected.
        closing = [
            conn.ws.close(code=1001, message=b"relay shutting down")  # type: ignore[attr-defined]
            for conn in list(relay.connections)
        ]
        await asyncio.gather(*closing, return_exceptions=True)

    async def _cleanup(app: web.Application) -> None:
        await relay.stop()

    app.on_startup.append(_startup)
    app.on_shutdown.append(_shutdown)
    app.on_cleanup.append(_cleanup)
    return app
