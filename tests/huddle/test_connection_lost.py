"""A `buzz huddle join` whose relay goes away mid-join is never silent (agents.md §2.1 item 2):
one `network_error` line on stderr ("connection lost: …", retryable, as `messages watch` reports
it), nothing on stdout, exit 2; not the normal report with exit 0. Real `buzz relay serve` and
`buzz huddle join` processes; the relay is killed (SIGKILL) or stopped (SIGTERM) while the
join is seated."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import orjson
import pytest

from buzz.voice.client import lost_reason
from buzz.voice.seat import read_seat
from tests.cli.helpers import BUZZ, _env
from tests.huddle.support import ChannelSpec, make_channel
from tests.operator.support import served
from tests.support.deadline import scaled
from tests.support.relay import Identity, RunningRelay


async def _seated(url: str, channel: str, who: Identity, join: asyncio.subprocess.Process) -> None:
    """Until the join's seat file exists (written once the relay's `joined` arrived)."""
    async with asyncio.timeout(scaled(120)):  # a bound for a stuck join, not a measured duration
        while read_seat(url, channel, who.pubkey) is None:
            assert join.returncode is None, "the join exited before it was seated"
            await asyncio.sleep(0.05)


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM], ids=["killed", "stopped"])
async def test_join_reports_a_lost_relay_as_network_error(
    tmp_path: Path, alice: Identity, how: signal.Signals
) -> None:
    async with served(tmp_path / "data") as relay:
        channel = await make_channel(RunningRelay(None, relay.url), ChannelSpec(alice))  # type: ignore[arg-type]
        join = await asyncio.create_subprocess_exec(
            BUZZ,
            *("huddle", "join", "--channel", channel, "--duration", "600", "--quiet"),
            *("--stt-engine", "whisper-tiny", "--no-transcribe", "--no-speak"),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=_env(relay.url, alice, None),
        )
        try:
            await _seated(relay.url, channel, alice, join)
            relay.proc.send_signal(how)
            await relay.proc.wait()
            out, err = await asyncio.wait_for(join.communicate(), scaled(60))
        finally:
            if join.returncode is None:
                join.kill()
                await join.wait()
    assert join.returncode == 2, (join.returncode, out, err)
    assert out == b""  # a failure prints no report (agents.md §2.1 items 1-2)
    # the error line ends stderr and is its only JSON line (log lines of the relay's background
    # reads racing the loss may precede it: stderr carries logs, agents.md §2.1 item 1)
    lines = [line for line in err.decode().splitlines() if line.strip()]
    assert [line for line in lines if line.startswith("{")] == lines[-1:], err
    error = orjson.loads(lines[-1])
    assert error["error"] == "network_error" and error["retryable"] is True, error
    assert error["message"].startswith("connection lost: "), error


def test_a_drain_close_says_the_relay_restarted_or_drained() -> None:
    """A 1012 close (the relay's drain on SIGTERM with the mesh on, huddle.md §9.5, or a lost
    owner lease) names the restart or drain and keeps the relay's reason."""
    said = lost_reason(1012, "relay draining; reconnect", audio=True)
    assert said == "the relay restarted or is draining (close 1012: relay draining; reconnect)"
    assert lost_reason(None, "", audio=False) == "relay connection closed"
