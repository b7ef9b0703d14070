"""`buzz relay serve`: run the relay on one port (WebSocket, NIP-11, HTTP bridge)."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import click

from buzz.cli.common import CommandGroup
from buzz.relay.config import ConfigError, RelayConfig, parse_bind
from buzz.store.base import StoreError


def run_loop(main: Coroutine[Any, Any, None]) -> None:
    """Run the relay's event loop: uvloop when installed (a faster drop-in loop), else asyncio's."""
    try:
        import uvloop
    except ImportError:
        asyncio.run(main)
        return
    uvloop.run(main)


@click.group(cls=CommandGroup)
def relay() -> None:
    """Run and inspect the relay."""


@relay.command()
@click.option(
    "--bind", default=None, help="host:port to listen on [env BUZZ_BIND_ADDR; default 127.0.0.1:3000]"
)
@click.option(
    "--data-dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Directory for the SQLite file and relay key [env BUZZ_DATA_DIR; default ./buzz-data]",
)
@click.option("--db", default=None, help="postgresql://… to use PostgreSQL [env BUZZ_DATABASE_URL]")
@click.option(
    "--redis-url",
    default=None,
    help="redis://… to run as one of several replicas; needs --db postgresql://… "
    "[env BUZZ_REDIS_URL or REDIS_URL; unset: single process]",
)
@click.option("--log-level", default="INFO", show_default=True)
def serve(
    bind: str | None, data_dir: Path | None, db: str | None, redis_url: str | None, log_level: str
) -> None:
    """Start the relay and serve until SIGINT/SIGTERM.

    \b
    Example:
      buzz relay serve --bind 127.0.0.1:3000 --data-dir ./buzz-data
    \b
    Several replicas (relay.md §12.4), one PostgreSQL and one Redis:
      buzz relay serve --bind 127.0.0.1:3001 --db postgresql://localhost/buzz --redis-url redis://127.0.0.1:6379/0
    """
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    overrides: dict[str, object] = {"data_dir": data_dir, "database_url": db, "redis_url": redis_url}
    try:
        if bind:
            overrides["host"], overrides["port"] = parse_bind(bind)
        config = RelayConfig.from_env(**overrides)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None

    from buzz.relay.server import serve as run_server

    def announce(relay_obj, url: str) -> None:
        store = config.database_url or str(config.data_dir / "relay.sqlite3")
        print(f'buzz relay "{config.relay_name}" listening on {url}', flush=True)
        print(
            f"  NIP-11: curl -H 'Accept: application/nostr+json' {url.replace('ws://', 'http://')}/",
            flush=True,
        )
        print(f"  store: {store}   relay pubkey (self): {relay_obj.pubkey}", flush=True)
        if config.redis_url:  # relay.md §12.4 (the URL may hold a password: not printed)
            print(f"  fan-out: Redis pub/sub, workspace {config.workspace_id!r}", flush=True)
        print(f"  connect: buzz --relay {config.relay_url} ... (clients must AUTH, NIP-42)", flush=True)

    try:
        run_loop(run_server(config, announce))
    except KeyboardInterrupt:
        pass
    except (OSError, StoreError) as exc:  # port taken, database missing or unreachable
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
