"""Start a real relay on a free loopback port for integration tests."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path

from buzz.client import RelayClient
from buzz.core.huddle_wire import AUTH_TIMEOUT as HUDDLE_AUTH_TIMEOUT_S
from buzz.core.keys import generate_secret_key, public_key
from buzz.core.limits import AUTH_TIMEOUT_S
from buzz.relay.config import RelayConfig
from buzz.relay.relay import Relay
from buzz.relay.server import running_relay
from tests.support.deadline import scaled


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
    """A relay on 127.0.0.1:<free port> with its data in `data_dir` (and PostgreSQL if given).

    Its AUTH deadlines (the relay's and the huddle socket's, 5 s each) are scaled by the load
    (decision 270): they bound how fast this test's clients (browser pages, CLI processes)
    answer a challenge, a wall-clock assumption on a loaded box; a test of a deadline itself
    sets its own (`auth_timeout_s=…`, the huddle settings)."""
    config.setdefault("auth_timeout_s", scaled(AUTH_TIMEOUT_S))
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
        huddles = relay.huddles
        huddles.settings = replace(huddles.settings, auth_timeout_s=scaled(HUDDLE_AUTH_TIMEOUT_S))
        # NIP-42 relay tags name the URL the client dialled; RELAY_URL's default names
        # localhost:3000, so accept the Host-derived URL (relay.md §7.3 item 2) as clients do.
        yield RunningRelay(relay, url)
