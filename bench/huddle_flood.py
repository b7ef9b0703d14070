#!/usr/bin/env python3
"""One huddle seat flooding audio, and what the rest of the relay feels (issue 24 item 15).

Two rows on a fresh `buzz relay serve` (SQLite) each, same seats, same length:
- **calm** (the yardstick): every speaker sends one 20 ms frame at a time (50 frames/s);
- **flood**: one seat of the *flood huddle* sends frames as fast as its process can.

Seats and clients, each group in its own process so that the relay's cores are its own:
- the flood huddle: the flooder and 3 listeners (the room fans every forwarded frame out to them);
- another huddle: one speaker at 50 frames/s, each frame stamped with its send time
  (CLOCK_MONOTONIC, shared by all processes), and one listener (the *probe*): its latency is
  receive − send on loopback;
- a bystander member publishing kind 1 notes, 20 a second, each awaited: its EVENT→OK latency.

Printed per row: what the flooder's process sent (most of a flood waits in socket buffers),
what the relay read from every seat and dropped over a seat's budget (its `/metrics`, at the end
of the window), what each flood listener heard, the other huddle's latency and frames heard, the
bystander's publish latency, relay CPU; then flood over calm ratios. The seats' budgets
(docs/limits.md) are what keep the flood row near the calm one: run it against an older relay
(PYTHONPATH) to see the difference. Loopback only; run by hand, never by the tests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import struct
import sys
import tempfile
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from hostile import buzz_relay

from buzz.client import RelayClient
from buzz.core.event import Event
from buzz.core.huddle_wire import FrameHeader, client_frame
from buzz.core.keys import generate_secret_key
from buzz.relay.operator.metrics_prom import sample_values
from huddle import cpu_seconds, create_channel, free_port, join, load_avg, pct

STAMP = struct.Struct(">d")  # send time (time.monotonic) at the start of a probe frame's payload
PREFIX = 1 + 8  # relay → client: [author index][8-byte v2 header] before the payload
PAYLOAD = 80  # bytes of "Opus" per frame, like a 32 kbit/s voice packet
LISTENERS = 3
PUBLISH_RATE = 20  # bystander notes per second


def _frame(seq: int, payload: bytes) -> bytes:
    header = FrameHeader(seq & 0xFFFF, (seq * 960) & 0xFFFFFFFF, -20, 0)
    return client_frame(header, payload + bytes(max(0, PAYLOAD - len(payload))))


def _run(main: Any) -> None:
    try:  # the relay runs on uvloop; so do the clients, so that they keep up on a shared machine
        import uvloop
    except ImportError:
        asyncio.run(main)
        return
    uvloop.run(main)


class _Seat:
    """What `huddle.join` needs of a peer."""

    def __init__(self, number: int) -> None:
        self.number, self.replica, self.secret = number, 0, generate_secret_key()


async def _start(ready: Any, go: Any, start_at: Any) -> float:
    ready.put(os.getpid())
    loop = asyncio.get_running_loop()
    if not await loop.run_in_executor(None, go.wait, 120):
        raise SystemExit("the bench never gave the start")
    await asyncio.sleep(max(0.0, start_at.value - time.monotonic()))
    return float(start_at.value)


async def _paced(ws: aiohttp.ClientWebSocketResponse, seconds: float, stamped: bool) -> int:
    """One frame every 20 ms for `seconds` (a live microphone); returns frames sent."""
    begin, n = time.monotonic(), int(seconds * 50)
    for seq in range(n):
        await ws.send_bytes(_frame(seq, STAMP.pack(time.monotonic()) if stamped else b"\x78"))
        await asyncio.sleep(max(0.0, begin + (seq + 1) / 50 - time.monotonic()))
    return n


def flooder(
    url: str, cid: str, flood: bool, seconds: float, ready: Any, go: Any, start_at: Any, out: Any
) -> None:
    async def main() -> None:
        async with aiohttp.ClientSession() as http:
            ws = await join(http, url, cid, _Seat(0))  # type: ignore[arg-type]
            await _start(ready, go, start_at)
            if not flood:
                sent = await _paced(ws, seconds, stamped=False)
            else:
                end, sent = time.monotonic() + seconds, 0
                while time.monotonic() < end:
                    for _ in range(100):
                        await ws.send_bytes(_frame(sent, b"\x78"))
                        sent += 1
            out.put(("flooder", {"sent": sent}))  # no close handshake: it waits behind the backlog

    _run(main())


def listeners(url: str, cid: str, seconds: float, ready: Any, go: Any, start_at: Any, out: Any) -> None:
    async def main() -> None:
        async with aiohttp.ClientSession() as http:
            sockets = [await join(http, url, cid, _Seat(i + 1)) for i in range(LISTENERS)]  # type: ignore[arg-type]
            got = [0] * LISTENERS

            async def read(i: int, ws: aiohttp.ClientWebSocketResponse) -> None:
                async for msg in ws:
                    if msg.type == aiohttp.WSMsgType.BINARY:
                        got[i] += 1

            readers = [asyncio.create_task(read(i, ws)) for i, ws in enumerate(sockets)]
            start = await _start(ready, go, start_at)
            await asyncio.sleep(max(0.0, start + seconds + 1.5 - time.monotonic()))
            for task in readers:
                task.cancel()
            out.put(("listeners", {"heard": got}))

    _run(main())


def other_huddle(url: str, cid: str, seconds: float, ready: Any, go: Any, start_at: Any, out: Any) -> None:
    async def main() -> None:
        async with aiohttp.ClientSession() as http:
            speaker = await join(http, url, cid, _Seat(10))  # type: ignore[arg-type]
            probe = await join(http, url, cid, _Seat(11))  # type: ignore[arg-type]
            latencies: list[int] = []

            async def read() -> None:
                async for msg in probe:
                    if msg.type == aiohttp.WSMsgType.BINARY:
                        sent_at = STAMP.unpack_from(msg.data, PREFIX)[0]
                        latencies.append(int((time.monotonic() - sent_at) * 1e9))

            reader = asyncio.create_task(read())
            start = await _start(ready, go, start_at)
            sent = await _paced(speaker, seconds, stamped=True)
            await asyncio.sleep(max(0.0, start + seconds + 1.5 - time.monotonic()))
            reader.cancel()
            out.put(("other", {"sent": sent, "latencies": latencies}))

    _run(main())


def bystander(url: str, secret: str, seconds: float, ready: Any, go: Any, start_at: Any, out: Any) -> None:
    async def main() -> None:
        async with RelayClient(url, secret) as client:
            latencies: list[int] = []
            refused = 0
            start = await _start(ready, go, start_at)
            n = int(seconds * PUBLISH_RATE)
            for i in range(n):
                event = Event.create(secret, 1, f"bystander note {i}", [])
                t0 = time.monotonic_ns()
                result = await client.publish(event)
                latencies.append(time.monotonic_ns() - t0)
                refused += not result.accepted
                await asyncio.sleep(max(0.0, start + (i + 1) / PUBLISH_RATE - time.monotonic()))
            out.put(("bystander", {"latencies": latencies, "refused": refused}))

    _run(main())


@dataclass
class Row:
    name: str
    seconds: float
    results: dict[str, Any] = field(default_factory=dict)
    counters: dict[str, float] = field(default_factory=dict)
    cpu: float = 0.0
    load: str = ""

    def summary(self) -> dict[str, Any]:
        other, pub = self.results["other"], self.results["bystander"]
        frames_in = self.counters.get("in", 0.0)
        over = self.counters.get("over_budget", 0.0)
        return {
            "row": self.name,
            "flooder_sent_per_s": self.results["flooder"]["sent"] / self.seconds,
            "relay_frames_in_per_s": frames_in / self.seconds,
            "over_budget": over,
            "relay_frames_in": frames_in,
            "listeners_heard": self.results["listeners"]["heard"],
            "other_sent": other["sent"],
            "other_heard": len(other["latencies"]),
            "other_p50_ms": pct(other["latencies"], 0.5),
            "other_p99_ms": pct(other["latencies"], 0.99),
            "other_max_ms": max(other["latencies"], default=0) / 1e6,
            "publish_p50_ms": pct(pub["latencies"], 0.5),
            "publish_p99_ms": pct(pub["latencies"], 0.99),
            "publish_refused": pub["refused"],
            "relay_cpu_cores": self.cpu,
            "load_avg": self.load,
        }


def scrape(metrics_url: str) -> dict[str, float]:
    with urllib.request.urlopen(metrics_url, timeout=5) as answer:
        text = answer.read().decode()
    return {labels.split('"')[1]: value for labels, value in sample_values(text, "buzz_huddle_frames_total")}


def run_row(name: str, flood: bool, seconds: float, tmp: Path) -> Row:
    metrics_port = free_port()
    (tmp / name).mkdir()
    with buzz_relay(tmp / name, {"BUZZ_METRICS_BIND": f"127.0.0.1:{metrics_port}"}) as relay:
        owner = generate_secret_key()
        flood_room, other_room = str(uuid.uuid4()), str(uuid.uuid4())
        asyncio.run(create_channel(relay.url, flood_room, owner))
        asyncio.run(create_channel(relay.url, other_room, owner))
        ctx = mp.get_context("spawn")
        ready, out = ctx.Queue(), ctx.Queue()
        go, start_at = ctx.Event(), ctx.Value("d", 0.0)
        sync = (ready, go, start_at, out)
        workers = [
            ctx.Process(target=flooder, args=(relay.url, flood_room, flood, seconds, *sync)),
            ctx.Process(target=listeners, args=(relay.url, flood_room, seconds, *sync)),
            ctx.Process(target=other_huddle, args=(relay.url, other_room, seconds, *sync)),
            ctx.Process(target=bystander, args=(relay.url, owner, seconds, *sync)),
        ]
        for p in workers:
            p.start()
        for _ in workers:
            ready.get(timeout=90)
        start_at.value = time.monotonic() + 1.0
        go.set()
        row = Row(name, seconds, load=load_avg())
        time.sleep(max(0.0, start_at.value - time.monotonic()))
        cpu0, t0 = cpu_seconds(relay.proc.pid), time.monotonic()
        time.sleep(seconds)
        row.cpu = (cpu_seconds(relay.proc.pid) - cpu0) / (time.monotonic() - t0)
        # At the end of the window: the relay goes on reading a flooder's backlog after it.
        row.counters = scrape(f"http://127.0.0.1:{metrics_port}/metrics")
        for _ in workers:
            role, result = out.get(timeout=120)
            row.results[role] = result
        for p in workers:
            p.join(10)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--json", metavar="OUT.json", help="also write the results as JSON")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = [
            run_row("calm", False, args.seconds, Path(tmp)),
            run_row("flood", True, args.seconds, Path(tmp)),
        ]
    print(f"\nhuddle flood bench — {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}")
    print(f"CPU: {os.cpu_count()} cores; {args.seconds:g} s per row; python {sys.version.split()[0]}")
    print(f"{'row':<6} {'flooder sent/s':>14} {'relay read':>10} {'over budget':>11} {'listeners heard':>16} "
          f"{'other huddle p50/p99/max ms':>28} {'heard':>9} {'publish p50/p99 ms':>18} {'relay CPU':>9}  load")  # fmt: skip
    summaries = [row.summary() for row in rows]
    for s in summaries:
        heard = "/".join(str(n) for n in s["listeners_heard"])
        other = f"{s['other_p50_ms']:.2f} / {s['other_p99_ms']:.2f} / {s['other_max_ms']:.1f}"
        print(f"{s['row']:<6} {s['flooder_sent_per_s']:>14,.0f} {s['relay_frames_in']:>10,.0f} "
              f"{s['over_budget']:>11,.0f} {heard:>16} {other:>28} "
              f"{s['other_heard']:>4}/{s['other_sent']:<4} "
              f"{s['publish_p50_ms']:>8.2f} / {s['publish_p99_ms']:<7.2f} {s['relay_cpu_cores']:>9.2f}  "
              f"{s['load_avg']}")  # fmt: skip
    calm, flood = summaries
    for what in ("other_p50_ms", "other_p99_ms", "publish_p50_ms", "publish_p99_ms"):
        print(f"flood over calm, {what[:-3]}: {flood[what] / calm[what]:.2f}×")
    if args.json:
        Path(args.json).write_text(json.dumps(summaries, indent=2) + "\n")
        print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main()
