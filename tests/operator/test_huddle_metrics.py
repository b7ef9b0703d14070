"""Huddle gauges and frame counters on `/metrics` (issue 10 item 5), with real audio sockets."""

from __future__ import annotations

from pathlib import Path

import aiohttp

from buzz.relay.operator.metrics_prom import sample_values
from tests.huddle.support import ChannelSpec, frame, join, make_channel
from tests.support.relay import Identity, relay_on


async def _scrape(url: str) -> dict[str, float]:
    async with aiohttp.ClientSession() as s, s.get(url) as r:
        text = await r.text()
    out: dict[str, float] = {}
    for name in ("buzz_huddle_rooms", "buzz_huddle_peers", "buzz_huddle_frames_total"):
        for labels, value in sample_values(text, name):
            out[name + labels] = value
    return out


async def test_rooms_peers_and_frames_forwarded(tmp_path: Path) -> None:
    alice, bob = Identity.new(), Identity.new()
    async with relay_on(tmp_path, metrics_bind="127.0.0.1:0") as running:
        url = running.relay.metrics_url
        assert url is not None and url.startswith("http://127.0.0.1:")
        cid = await make_channel(running, ChannelSpec(alice, members=[bob]))
        a, b = await join(running, alice, cid), await join(running, bob, cid)
        assert (await a.recv_json())["type"] == "joined"
        for seq in range(5):
            await a.ws.send_bytes(frame(seq))
        for _ in range(5):
            await b.recv_binary()
        during = await _scrape(url)
        await a.close()
        await b.close()
    assert during["buzz_huddle_rooms"] == 1 and during["buzz_huddle_peers"] == 2
    assert during['buzz_huddle_frames_total{what="in"}'] == 5
    assert during['buzz_huddle_frames_total{what="forwarded"}'] == 5  # one receiver
    assert during['buzz_huddle_frames_total{what="dropped"}'] == 0
