"""`buzz messages watch` outlives a relay restart (issue 24 item 8): a real `buzz relay serve`
process stopped with SIGTERM and started again on the same port and data directory; the watch
reconnects, as the agent harness does, and streams what is sent after the restart."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import orjson

from tests.cli.helpers import BUZZ, _env, buzz
from tests.operator.support import free_port, served
from tests.support.deadline import scaled
from tests.support.relay import Identity


async def _line(stream: asyncio.StreamReader) -> dict[str, object]:
    return orjson.loads(await asyncio.wait_for(stream.readline(), scaled(60)))


async def test_watch_reconnects_after_the_relay_restarts(tmp_path: Path) -> None:
    alice, bob = Identity.new(), Identity.new()
    data, port = tmp_path / "data", free_port()
    async with served(data, port=port) as relay:
        url = relay.url
        channel = (await buzz(url, alice, "channels", "create", "--name", "ops")).json["channel_id"]
        # --since: a message sent while the watch is still starting is stored, then served
        since = str(int(time.time()))
        watch = await asyncio.create_subprocess_exec(
            BUZZ,
            "messages",
            "watch",
            "--channel",
            channel,
            "--since",
            since,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=_env(url, bob, None),
        )
        assert watch.stdout is not None and watch.stderr is not None
        try:
            # the first message shows the watch is subscribed
            sent = (await buzz(url, alice, "messages", "send", "--channel", channel, "--content", "one")).json
            assert (await _line(watch.stdout))["id"] == sent["event_id"]
            assert await relay.stop() == 0
        except BaseException:
            watch.kill()
            raise
    try:
        async with served(data, port=port, log_name="relay-again.log") as again:
            after = (
                await buzz(again.url, alice, "messages", "send", "--channel", channel, "--content", "two")
            ).json
            streamed = await _line(watch.stdout)
            assert (streamed["id"], streamed["content"]) == (after["event_id"], "two")
            await again.stop()
    finally:
        if watch.returncode is None:
            watch.send_signal(signal.SIGINT)
        code = await asyncio.wait_for(watch.wait(), scaled(30))
    notes = (await watch.stderr.read()).decode()
    assert code == 0, notes
    assert (
        "buzz messages watch: connection lost" in notes and "buzz messages watch: reconnected after" in notes
    )
