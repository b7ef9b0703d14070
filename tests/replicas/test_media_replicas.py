"""Blobs across replicas (media.md §10.2; checklist 39, 41, 42): two real `buzz relay serve`
processes on one PostgreSQL database and one Redis. A blob uploaded through replica A is served
by replica B — whole, by Range, and under the same per-channel access — with no shared disk."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from redis.asyncio import Redis

from buzz.client.relay_client import RelayClient
from buzz.core.event import Event
from tests.media.support import get, imeta_of, unique_png, upload
from tests.operator.support import BUZZ, clean_env
from tests.replicas.conftest import redis_url, served_pair
from tests.support.pg import temp_database
from tests.support.relay import Identity
from tests.workspace.helpers import accepted, create_channel, put_user

pytestmark = [pytest.mark.redis, pytest.mark.postgres]


async def test_blob_uploaded_on_a_is_served_by_b(
    tmp_path: Path, redis: Redis, workspace_id: str, alice: Identity, bob: Identity, carol: Identity
) -> None:
    async with served_pair(tmp_path, workspace_id, mesh=False) as (a, b, _, _):
        data = os.urandom(3 << 20) + unique_png()
        d = await upload(a.http_url, alice, data)
        assert d["type"] == "application/octet-stream"
        whole = await get(b.http_url, alice, d["sha256"])
        assert (whole.status, whole.body) == (200, data)
        part = await get(b.http_url, alice, d["sha256"], extra={"Range": "bytes=1048000-2098000"})
        assert (part.status, part.body) == (206, data[1048000:2098001])
        assert not (tmp_path / "b" / "data" / "media" / d["sha256"][:2]).exists()  # bytes in PostgreSQL
        # per-channel access holds on B for a message posted through A
        async with RelayClient(a.url, alice.secret) as ca:
            ch = await create_channel(ca, alice, "private")
            await put_user(ca, alice, ch, bob.pubkey)
            await accepted(ca, Event.create(alice.secret, 9, d["url"], [["h", ch], imeta_of(d)]))
        assert (await get(b.http_url, bob, d["sha256"])).status == 200
        outsider = await get(b.http_url, carol, d["sha256"])
        assert (outsider.status, outsider.reason) == (404, "blob not found")
        thumbless = await get(b.http_url, bob, d["sha256"] + ".thumb.jpg")
        assert thumbless.status == 404


def _serve(tmp_path: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [BUZZ, "relay", "serve", "--bind", "127.0.0.1:0", "--data-dir", str(tmp_path), *args],
        capture_output=True,
        text=True,
        env=clean_env(env),
        timeout=30,
    )


async def test_files_store_with_replicas_needs_a_shared_dir(tmp_path: Path, redis: Redis) -> None:
    """Checklist 41 and 42: startup stops with a clear message."""
    async with temp_database() as dsn:
        args = ("--db", dsn, "--redis-url", redis_url())
        refused = _serve(tmp_path, *args, env={"BUZZ_MEDIA_STORE": "files"})
        assert refused.returncode != 0 and "BUZZ_MEDIA_SHARED_DIR=true" in refused.stderr
    for base in ("http://h/media/", "http://h/files"):
        bad = _serve(tmp_path, env={"BUZZ_MEDIA_BASE_URL": base})
        assert bad.returncode != 0 and "BUZZ_MEDIA_BASE_URL must end with /media" in bad.stderr
    db_on_sqlite = _serve(tmp_path, env={"BUZZ_MEDIA_STORE": "db"})
    assert db_on_sqlite.returncode != 0 and "BUZZ_MEDIA_STORE=db needs PostgreSQL" in db_on_sqlite.stderr
