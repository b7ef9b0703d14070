"""BUZZ_MESH parsing and the huddle split guard (huddle.md §9.1; issue 15 step 1), on real
`buzz relay serve` processes: two replicas on one PostgreSQL and one Redis without the mesh refuse
huddle joins with `huddle_audio_unavailable` and say why in their log, instead of admitting
participants who would never hear each other."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import orjson
import pytest
from redis.asyncio import Redis

from buzz.relay.config import ConfigError, RelayConfig, parse_mesh
from buzz.relay.huddle.settings import SPLIT_REASON, HuddleSettings
from tests.huddle.support import ChannelSpec, make_channel, refused
from tests.operator.support import BUZZ
from tests.replicas.conftest import served_pair
from tests.support.relay import Identity


def test_parse_mesh_accepts_the_six_spellings_in_any_case() -> None:
    for on in ("on", "ON", "true", "True", "1", " on "):
        assert parse_mesh(on) is True
    for off in ("off", "OFF", "false", "0", ""):
        assert parse_mesh(off) is False
    for bad in ("yes", "enabled", "2", "onn"):
        with pytest.raises(ConfigError, match="BUZZ_MESH must be"):
            parse_mesh(bad)


def test_mesh_needs_redis() -> None:
    with pytest.raises(ConfigError, match="BUZZ_MESH=on needs BUZZ_REDIS_URL"):
        RelayConfig.from_env({"BUZZ_MESH": "on"})
    assert RelayConfig.from_env({"BUZZ_MESH": "off"}).mesh is False


def test_replicas_without_mesh_default_audio_off() -> None:
    single = HuddleSettings.from_env("w", {})
    assert (single.audio_available, single.off_reason) == (True, None)
    split = HuddleSettings.from_env("w", {}, replicated=True)
    assert (split.audio_available, split.off_reason) == (False, SPLIT_REASON)
    vouched = HuddleSettings.from_env("w", {"BUZZ_HUDDLE_AUDIO_AVAILABLE": "true"}, replicated=True)
    assert (vouched.audio_available, vouched.off_reason) == (True, None)
    meshed = HuddleSettings.from_env("w", {}, replicated=True, mesh=True)
    assert (meshed.mesh, meshed.audio_available) == (True, True)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"BUZZ_MESH": "maybe"}, "BUZZ_MESH must be on|true|1 or off|false|0, got 'maybe'"),
        ({"BUZZ_MESH": "on"}, "BUZZ_MESH=on needs BUZZ_REDIS_URL (--redis-url): the mesh runs through Redis"),
    ],
)
def test_bad_mesh_value_is_one_json_line(tmp_path: Path, env: dict[str, str], message: str) -> None:
    base = {
        k: v for k, v in os.environ.items() if not k.startswith(("BUZZ_", "RELAY_", "REDIS_", "DATABASE_"))
    }
    result = subprocess.run(
        [BUZZ, "relay", "serve", "--data-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        env={**base, **env},
        timeout=30,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert orjson.loads(lines[0]) == {"error": "usage_error", "message": message, "retryable": False}


@pytest.mark.redis
@pytest.mark.postgres
async def test_two_replicas_without_mesh_refuse_joins_and_log_why(
    tmp_path: Path, redis: Redis, workspace_id: str, alice: Identity, bob: Identity
) -> None:
    async with served_pair(tmp_path, workspace_id, mesh=False) as (a, b, ra, rb):
        cid = await make_channel(ra, ChannelSpec(alice, members=[bob]))
        unavailable = {
            "type": "error",
            "code": "huddle_audio_unavailable",
            "message": "huddle audio unavailable in this deployment",
        }
        assert await refused(ra, alice, cid) == unavailable
        assert await refused(rb, bob, cid) == unavailable
        for served_relay in (a, b):
            assert any("huddles:      off: replicas without BUZZ_MESH=on" in x for x in served_relay.banner)
            await served_relay.stop()
            assert SPLIT_REASON in served_relay.log_path.read_text()
