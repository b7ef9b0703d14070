"""`GET /metrics` of a real relay process (issue 10 item 5): off by default, on its own
`--metrics-bind` listener, Prometheus text format, counting what the relay did."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp

from buzz.client import RelayClient
from buzz.core.channel_id import new_channel_id
from buzz.core.event import Event
from buzz.relay.operator.metrics_prom import sample_values
from tests.operator.support import free_port, served
from tests.support.deadline import scaled
from tests.support.relay import Identity


async def _get(url: str) -> tuple[int, str, str]:
    async with aiohttp.ClientSession() as s, s.get(url) as r:
        return r.status, r.headers.get("Content-Type", ""), await r.text()


def _value(text: str, name: str, **labels: str) -> float:
    """The sum of the samples of `name` whose labels include `labels`."""
    total, found = 0.0, False
    for label_text, value in sample_values(text, name):
        if all(f'{k}="{v}"' in label_text for k, v in labels.items()):
            total, found = total + value, True
    assert found, f"no sample {name} {labels}"
    return total


async def test_metrics_are_off_by_default(tmp_path: Path) -> None:
    async with served(tmp_path / "data") as relay:
        status, _, _ = await _get(relay.http_url + "/metrics")
        assert status in (404, 405)
        assert any("metrics:      off" in line for line in relay.banner)
        await relay.stop()


async def test_metrics_count_connections_events_reqs_deliveries_and_latencies(tmp_path: Path) -> None:
    metrics_port = free_port()
    alice, bob = Identity.new(), Identity.new()
    async with served(tmp_path / "data", "--metrics-bind", f"127.0.0.1:{metrics_port}") as relay:
        metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
        assert any(metrics_url in line for line in relay.banner)
        status, _, _ = await _get(relay.http_url + "/metrics")
        assert status in (404, 405)  # never on the public port

        _, _, before = await _get(metrics_url)
        assert _value(before, "buzz_connections") == 0
        async with RelayClient(relay.url, alice.secret) as a, RelayClient(relay.url, bob.secret) as b:
            channel = new_channel_id()
            create = Event.create(
                alice.secret, 9007, "", [["h", channel], ["name", "m"], ["visibility", "private"]]
            )
            assert (await a.publish(create)).accepted
            live = await a.subscribe([{"kinds": [9], "#h": [channel]}])
            await asyncio.wait_for(live.eose.wait(), scaled(5))
            posts = [Event.create(alice.secret, 9, f"m{n}", [["h", channel]]) for n in range(3)]
            for post in posts:
                assert (await a.publish(post)).accepted
            for _ in range(3):
                await asyncio.wait_for(live.next(), scaled(5))
            refused = await b.publish(Event.create(bob.secret, 9, "no", [["h", channel]]))
            assert not refused.accepted
            assert (await a.publish(posts[0])).message == "duplicate:"  # accepted, not stored again
            async with RelayClient(relay.url) as stranger:  # connected, never authenticated
                await stranger.challenge
                status, ctype, during = await _get(metrics_url)
        _, _, after = await _get(metrics_url)
        await relay.stop()

    assert status == 200 and ctype.startswith("text/plain")
    assert _value(during, "buzz_connections") == 3
    assert _value(during, "buzz_connections_authenticated") == 2
    assert _value(after, "buzz_connections") == 0
    assert _value(after, "buzz_events_total", kind_range="regular", result="accepted", reason="ok") == 4
    assert _value(after, "buzz_events_total", result="accepted", reason="duplicate") == 1
    assert (
        _value(after, "buzz_events_total", kind_range="regular", result="refused", reason="restricted") == 1
    )
    assert _value(after, "buzz_reqs_total", verb="REQ", result="ok") == 1
    assert _value(after, "buzz_auth_total", result="ok") == 2
    assert _value(after, "buzz_live_deliveries_total") >= 3
    assert _value(after, "buzz_fanout_seconds_count") >= 3
    assert _value(after, "buzz_store_seconds_count", op="insert") >= 5
    assert _value(after, "buzz_store_seconds_count", op="query") >= 1
    for name in (
        "buzz_huddle_rooms",
        "buzz_huddle_peers",
        "buzz_redis_bus_enabled",
        "buzz_redis_bus_connected",
    ):
        assert _value(after, name) == 0
    assert _value(after, "buzz_huddle_frames_total", what="forwarded") == 0
    assert _value(after, "buzz_redis_bus_messages_total", what="published") == 0
