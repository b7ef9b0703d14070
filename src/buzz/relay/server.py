"""Run the relay: bind, print how to connect, stop cleanly on SIGINT/SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator, Callable

from aiohttp import web

from buzz.relay.app import build_app
from buzz.relay.config import RelayConfig
from buzz.relay.relay import Relay


@contextlib.asynccontextmanager
async def running_relay(config: RelayConfig) -> AsyncIterator[tuple[Relay, str]]:
    """Start a relay on `config.host:config.port` (port 0 = a free one); yield (relay, ws URL)."""
    relay = Relay(config)
    app = build_app(relay)
    runner = web.AppRunner(app, handle_signals=False, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, config.host, config.port, reuse_address=True)
    await site.start()
    sockets = site._server.sockets if site._server else []  # type: ignore[union-attr]
    port = sockets[0].getsockname()[1] if sockets else config.port
    host = f"[{config.host}]" if ":" in config.host else config.host
    try:
        yield relay, f"ws://{host}:{port}"
    finally:
        await runner.cleanup()


async def serve(config: RelayConfig, announce: Callable[[Relay, str], None]) -> None:
    """Serve until SIGINT or SIGTERM; `announce(relay, url)` runs once the port is bound."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with running_relay(config) as (relay, url):
        announce(relay, url)
        await stop.wait()
