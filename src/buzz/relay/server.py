"""Run the relay: lock its SQLite data dir, bind, serve `/metrics` on its own address when asked,
print how to connect, stop cleanly on SIGINT/SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from aiohttp import web
from aiohttp.log import server_logger

from buzz.core.nip98 import http_base
from buzz.relay.app import build_app, build_metrics_app
from buzz.relay.config import DEFAULT_RELAY_URL, RelayConfig, parse_bind
from buzz.relay.operator import datalock
from buzz.relay.operator.httplog import HttpErrorLog
from buzz.relay.relay import Relay
from buzz.relay.transport.http_guard import raise_open_file_limit
from buzz.store import sqlite_path

# The collector's first generation is collected every GC_YOUNG_THRESHOLD net allocations of
# tracked objects (CPython's default 700). A relay under ingest load keeps thousands of young
# objects alive for a few milliseconds (events in flight, their futures and tasks) that
# reference counting frees anyway; at 700 each collection walks them again and again
# (~10 % of the event loop's samples, issue 17). Cycles are still collected, just less often.
GC_YOUNG_THRESHOLD = 10_000


def tune_gc() -> None:
    """Once started: what exists now (modules, the app, the store) lives as long as the process,
    so later full collections need not walk it (`gc.freeze`), and young collections are rarer."""
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, older, oldest)


def _bound_url(site: web.TCPSite, host: str, port: int, scheme: str) -> str:
    sockets = site._server.sockets if site._server else []  # type: ignore[union-attr]
    port = sockets[0].getsockname()[1] if sockets else port
    shown = f"[{host}]" if ":" in host else host
    return f"{scheme}://{shown}:{port}"


def _lock_folder(config: RelayConfig) -> Path | None:
    """The folder whose lock this relay must hold: SQLite's (single process), none for PostgreSQL."""
    path = sqlite_path(config.database_url, config.data_dir)
    return path.parent if path is not None else None


@contextlib.asynccontextmanager
async def running_relay(config: RelayConfig) -> AsyncIterator[tuple[Relay, str]]:
    """Start a relay on `config.host:config.port` (port 0 = a free one); yield (relay, ws URL).

    With `config.metrics_bind`, `/metrics` listens there too (`relay.metrics_url`). Raises
    DataDirLocked when another relay holds the SQLite data dir, OSError when a port is taken.
    """
    async with contextlib.AsyncExitStack() as stack:
        folder = _lock_folder(config)
        if folder is not None:
            stack.enter_context(datalock.exclusive(folder))
        relay = Relay(config)
        # aiohttp's keep-alive timer is its header timeout too: it closes a connection that has
        # not sent a whole request that long after opening or after its previous answer.
        # A malformed request is one counted WARNING, not an ERROR traceback each (relay/operator/httplog.py).
        http_log = HttpErrorLog(server_logger, relay.telemetry.repeats)
        runner = web.AppRunner(
            build_app(relay),
            handle_signals=False,
            access_log=None,
            keepalive_timeout=config.http_header_timeout_s,
            logger=http_log,
        )
        await runner.setup()
        stack.push_async_callback(runner.cleanup)
        assert runner.server is not None
        relay.http_guard.attach(runner.server)
        site = web.TCPSite(runner, config.host, config.port, reuse_address=True)
        await site.start()
        url = _bound_url(site, config.host, config.port, "ws")
        if config.relay_url == DEFAULT_RELAY_URL and config.media.base_url is None:
            # Nothing names the relay's public URL: file links name the address it is bound to
            # (a relay on 127.0.0.1:3999 handed out http://localhost:3000/media/… links).
            bound = url if config.host not in ("0.0.0.0", "::") else url.replace(config.host, "localhost", 1)
            relay.media.base = http_base(bound.replace("[::]", "localhost", 1)) + "/media"
        if config.metrics_bind is not None:
            host, port = parse_bind(config.metrics_bind, "BUZZ_METRICS_BIND")
            metrics_runner = web.AppRunner(
                build_metrics_app(relay), handle_signals=False, access_log=None, logger=http_log
            )
            await metrics_runner.setup()
            stack.push_async_callback(metrics_runner.cleanup)
            metrics_site = web.TCPSite(metrics_runner, host, port, reuse_address=True)
            await metrics_site.start()
            relay.metrics_url = _bound_url(metrics_site, host, port, "http") + "/metrics"
        yield relay, url


async def serve(config: RelayConfig, announce: Callable[[Relay, str], None]) -> None:
    """Serve until SIGINT or SIGTERM; `announce(relay, url)` runs once the port is bound.

    The operator log says `relay stopping` when the signal arrives (what is still open), then
    each socket's close (`relay shutting down`, or the huddle drain's lines with the mesh), and
    `relay stopped` with the seconds the shutdown took once the store is closed."""
    stop = asyncio.Event()
    received: list[str] = []
    loop = asyncio.get_running_loop()

    def on_signal(sig: signal.Signals) -> None:
        received.append(sig.name)
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal, sig)
    raise_open_file_limit()  # before the relay shares the limit out (docs/limits.md)
    async with running_relay(config) as (relay, url):
        announce(relay, url)
        tune_gc()
        await stop.wait()
        relay.report_stopping(received[0])
        started = loop.time()
    relay.telemetry.relay_stopped(loop.time() - started)
