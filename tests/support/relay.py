"""Start a real relay on a free loopback port for integration tests."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from buzz.client import RelayClient
from buzz.core.keys import generate_secret_key, public_key
from buzz.relay.config import RelayConfig
from buzz.relay.relay import Relay
from buzz.relay.server import running_relay


@dataclass(frozen=True)
class Identity:
    secret: str
    pubkey: str

    @classmethod
    def new(cls) -> Identity:
        secret = generate_secret_key()
        return cls(secret, public_key(secret))


@dataclass
class RunningRelay:
    relay: Relay
    url: str

    @property
    def http_url(self) -> str:
        return self.url.replace("ws://", "http://", 1)

    def client(self, who: Identity | None = None, **kw: object) -> RelayClient:
        """An unopened client; `async with` it. With an identity it authenticates."""
        return RelayClient(self.url, who.secret if who else None, **kw)  # type: ignore[arg-type]


@contextlib.asynccontextmanager
async def relay_on(
    data_dir: Path, database_url: str | None = None, **config: object
) -> AsyncIterator[RunningRelay]:
    """A relay on 127.0.0.1:<free port> with its data in `data_dir` (and PostgreSQL if given)."""
    cfg = RelayConfig.from_env(
        {},
        host="127.0.0.1",
        port=0,
        data_dir=data_dir,
        database_url=database_url,
        verify_workers=2,
        **config,
    )
    async with running_relay(cfg) as (relay, url):
        # NIP-42 relay tags name the URL the client dialled; RELAY_URL's default names
        # localhost:3000, so accept the Host-derived URL (relay.md §7.3 item 2) as clients do.
        yield RunningRelay(relay, url)
