"""Interop: the nostr-tools JavaScript client (npm) authenticates, publishes and subscribes."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

from tests.support.deadline import scaled
from tests.support.relay import RunningRelay

HERE = Path(__file__).resolve().parent


@pytest.fixture
def node() -> str:
    path = shutil.which("node")
    if path is None or not (HERE / "node_modules" / "nostr-tools").exists():
        import os

        if os.environ.get("CI") == "true":
            pytest.fail("node and tests/interop/node_modules are required in CI (make test installs them)")
        pytest.skip("needs Node.js and `npm ci` in tests/interop (make test does it)")
    return path


async def test_nostr_tools_auth_publish_subscribe(node: str, sqlite_relay: RunningRelay) -> None:
    proc = await asyncio.create_subprocess_exec(
        node,
        str(HERE / "nostr_tools_client.mjs"),
        sqlite_relay.url,
        cwd=HERE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(proc.communicate(), scaled(60))
    assert proc.returncode == 0, stderr.decode()
    out = json.loads(stdout.decode().strip().splitlines()[-1])
    assert out["errors"] == [], (out, stderr.decode())
    assert out["beforeEose"] == [out["storedId"]]
    assert [e["id"] for e in out["seen"]] == [out["storedId"], out["liveId"]]
    # And the events really are in our store, readable by id through our own client.
    from tests.support.relay import Identity

    async with sqlite_relay.client(Identity.new()) as c:
        got = await c.query([{"ids": [out["storedId"], out["liveId"]]}])
    assert {e.id for e in got} == {out["storedId"], out["liveId"]}
