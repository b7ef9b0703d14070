"""`make run-cluster` (examples/run_cluster.py): two BUZZ_MESH replicas on this machine's
PostgreSQL and Redis. The script creates its database, prints both URLs, a huddle across the
two works, and SIGINT (Ctrl-C) stops both replicas cleanly (exit 0)."""

from __future__ import annotations

import asyncio
import signal
import sys
import uuid
from pathlib import Path

import pytest
from redis.asyncio import Redis

from tests.huddle.support import ChannelSpec, frame, join, make_channel
from tests.operator.support import clean_env, free_port
from tests.replicas.conftest import redis_url
from tests.support.deadline import scaled
from tests.support.pg import _connect_admin, admin_dsn
from tests.support.relay import Identity, RunningRelay

pytestmark = [pytest.mark.redis, pytest.mark.postgres]

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "run_cluster.py"


async def test_run_cluster_starts_two_meshed_replicas_and_ctrl_c_stops_both(
    tmp_path: Path, redis: Redis, alice: Identity, bob: Identity
) -> None:
    database = f"buzz_test_cluster_{uuid.uuid4().hex[:12]}"
    workspace = f"test-cluster-{uuid.uuid4().hex[:8]}"
    ports = [free_port(), free_port()]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(SCRIPT), "--ports", f"{ports[0]},{ports[1]}", "--data-dir", str(tmp_path),
        "--database", database, "--pg-admin", admin_dsn(), "--redis-url", redis_url(),
        "--workspace", workspace,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, env=clean_env(),
    )  # fmt: skip
    out: list[str] = []
    try:
        assert proc.stdout is not None
        async with asyncio.timeout(scaled(60)):
            while not any("Ctrl-C stops both" in line for line in out):
                line = (await proc.stdout.readline()).decode()
                assert line, "".join(out)
                out.append(line)
        text = "".join(out)
        assert f"created database {database}" in text
        for port in ports:
            assert f"ws://127.0.0.1:{port}" in text
        a, b = (RunningRelay(None, f"ws://127.0.0.1:{p}") for p in ports)  # type: ignore[arg-type]
        cid = await make_channel(a, ChannelSpec(alice, members=[bob]))
        pa, pb = await join(a, alice, cid), await join(b, bob, cid)  # owner A, bob through the mesh
        assert [p.joined["type"] for p in (pa, pb)] == ["joined", "joined"]  # type: ignore[index]
        await pb.ws.send_bytes(frame(1, b"\x78hi"))
        assert await pa.recv_binary(10) == bytes((pb.joined["peer_index"],)) + frame(1, b"\x78hi")  # type: ignore[index]

        proc.send_signal(signal.SIGINT)  # Ctrl-C
        rest = (await asyncio.wait_for(proc.stdout.read(), scaled(40))).decode()
        assert await proc.wait() == 0, rest
        assert "both replicas stopped (exit codes 0, 0)" in rest
        for peer in (pa, pb):
            await peer.expect_close()
            await peer.close()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        admin = await _connect_admin()
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        finally:
            await admin.close()
        keys = [k async for k in redis.scan_iter(match=f"buzz:*{workspace}:*")]
        if keys:
            await redis.delete(*keys)
