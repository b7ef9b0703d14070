"""The lines `buzz relay serve` prints once it listens: what is actually running.

Every value comes from the started relay (the bound port, the opened store, the setting read
from it), never from defaults (an unset RELAY_URL is shown as unset, with the bound address
clients name instead), and nothing secret is printed: PostgreSQL and Redis URLs lose
their passwords, the relay key shows only its public half.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from buzz.core import nip19
from buzz.relay.config import DEFAULT_RELAY_URL
from buzz.store import sqlite_path
from buzz.store.backup import describe_postgres

if TYPE_CHECKING:
    from buzz.relay.relay import Relay


def workspace_state(relay: Relay) -> str:
    """`open`, or `closed` with the switch that closed it (relay.md §4.4; docs/decisions.md)."""
    if relay.config.require_relay_membership:
        return "closed: members only (BUZZ_REQUIRE_RELAY_MEMBERSHIP=true)"
    if relay.workspace_setting == "closed":
        return "closed: members only (buzz admin workspace close)"
    return "open: any key that authenticates (buzz admin workspace close to restrict)"


def connect_url(relay_url: str, url: str) -> str:
    """The URL the banner tells clients to use, one that authenticates: the bound `url`
    (always ws://, the relay speaks no TLS), unless RELAY_URL is wss://. NIP-42 and NIP-98
    take the scheme from RELAY_URL (relay.md §7.3 item 2, §15 item 1), so a client dialling the
    bound address signs ws:// / http:// URLs the relay refuses; RELAY_URL (the TLS proxy in
    front of it) is then the one that works (issue 24 item 6)."""
    return relay_url if urlsplit(relay_url).scheme.lower() == "wss" else url


def lines(relay: Relay, url: str) -> list[str]:
    config = relay.config
    http = url.replace("ws://", "http://", 1)
    db = sqlite_path(config.database_url, config.data_dir)
    store = (
        f"SQLite {db.resolve()}"
        if db is not None
        else f"PostgreSQL {describe_postgres(config.database_url or '')}"
    )
    if config.redis_url:  # relay.md §12.4 (the URL may hold a password: not printed)
        fanout = f"Redis pub/sub, workspace {config.workspace_id!r} (replica mode)"
    else:
        fanout = "in-process (single relay)"
    huddle = relay.huddles.settings
    if huddle.mesh:
        huddles = "mesh (BUZZ_MESH=on): one owner per room through a Redis lease"
    elif huddle.audio_available:
        huddles = "in-process" + (
            " (BUZZ_HUDDLE_AUDIO_AVAILABLE=true across replicas)" if config.redis_url else ""
        )
    else:
        huddles = "off: " + (
            "replicas without BUZZ_MESH=on" if config.redis_url else "BUZZ_HUDDLE_AUDIO_AVAILABLE=false"
        )
    metrics = relay.metrics_url or "off (--metrics-bind host:port to serve /metrics)"
    connect = connect_url(config.relay_url, url)
    out = [
        f'buzz relay "{config.relay_name}" listening on {url}',
        f"  NIP-11:       curl -H 'Accept: application/nostr+json' {http}/",
        f"  data dir:     {config.data_dir.resolve()}",
        f"  store:        {store}",
        f"  fan-out:      {fanout}",
        f"  huddles:      {huddles}",
        f"  workspace:    {workspace_state(relay)}",
        f"  relay pubkey: {relay.pubkey} ({nip19.npub(relay.pubkey)})",
        f"  metrics:      {metrics}",
        f"  connect:      buzz --relay {connect} ... (clients must AUTH, NIP-42)",
    ]
    if connect != url:
        out.append(
            f"  RELAY_URL:    {config.relay_url}: AUTH and NIP-98 name its scheme (wss://, https://), so "
            f"clients connect through your TLS proxy; one that dials {url} directly fails AUTH"
        )
    elif config.relay_url != DEFAULT_RELAY_URL:
        out.append(
            f"  RELAY_URL:    {config.relay_url} (AUTH and NIP-98 may name it or the host the client dialled)"
        )
    else:  # the built-in default names no real address: say what clients actually name
        out.append(
            f"  RELAY_URL:    unset; AUTH and NIP-98 name the host the client dialled, here {url}"
            " (set RELAY_URL to the public wss:// URL behind a proxy)"
        )
    out.append(f"  browser:      {http}/ (the web workspace: open it and sign in with your key)")
    return out
