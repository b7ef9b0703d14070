"""Interop: the nostr-sdk Python client (rust-nostr) authenticates with SignerAuthenticator,
publishes, fetches and receives a live event from our relay."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from tests.support.deadline import scaled
from tests.support.relay import RunningRelay

HERE = Path(__file__).resolve().parent


async def test_nostr_sdk_client(relay: RunningRelay) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(HERE / "nostr_sdk_client.py"),
        relay.url,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(proc.communicate(), scaled(90))
    out = json.loads(stdout.decode().strip().splitlines()[-1])
    assert out["errors"] == [], (out, stderr.decode()[-2000:])
    assert out["publish_failed"] == {}
    assert len(out["publish_success"]) == 1
    assert out["stored_id"] in out["fetched"]
    assert out["live_id"] in out["live_seen"]
