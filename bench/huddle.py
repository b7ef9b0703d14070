#!/usr/bin/env python3
"""Huddle fan-out benchmark (issue 6 item 6). Run by `make bench`, never by the tests.

25 simulated peers send one 20 ms frame each (50 frames/s) for 10 s into one huddle of a relay
subprocess (`buzz relay serve`) on loopback; every frame is forwarded to the other 24, so the
relay's target load is 25 × 24 × 50 = 30,000 forwarded frames/s (huddle.md §5.3). Peers run in
worker processes so the relay's core is its own. Each frame carries its send time
(CLOCK_MONOTONIC, shared by all processes); latency is receive − send on loopback, an upper
bound of the relay-added latency. Relay CPU comes from /proc/<pid>/stat (utime + stime).

Reported against the targets: ≥ 30,000 forwarded frames/s on one core, zero drops, p99 < 5 ms.

Setup: once the relay is up, the owner creates an open channel with a real kind 9007.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import random
import socket
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import aiohttp
import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from buzz.core.event import Event  # noqa: E402
from buzz.core.huddle_wire import FrameHeader, client_frame  # noqa: E402
from buzz.core.keys import generate_secret_key  # noqa: E402
from buzz.core.nip42 import build_auth_event  # noqa: E402

PAYLOAD = 80  # bytes of "Opus" per frame, like a 32 kbit/s voice packet
CLK = struct.Struct(">q")
TICKS = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def create_channel(url: str, channel_id: str, owner: str) -> None:
    """The open channel the peers join, created through the relay's own kind 9007."""
    from buzz.client import RelayClient

    tags = [["h", channel_id], ["name", "bench"], ["visibility", "open"]]
    async with RelayClient(url, owner) as client:
        result = await client.publish(Event.create(owner, 9007, "", tags))
    if not result.accepted:
        raise SystemExit(f"cannot create the bench channel: {result.message}")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


async def peer_main(
    url: str, cid: str, secrets: list[str], start_at: float, seconds: float, rate: int, out
) -> None:  # type: ignore[no-untyped-def]
    rng = random.Random(os.getpid())
    offsets = [rng.uniform(0.0, 1.0 / rate) for _ in secrets]
    async with aiohttp.ClientSession() as http:
        sockets = []
        for secret in secrets:
            ws = await http.ws_connect(f"{url}/huddle/{cid}/audio", autoping=True, max_msg_size=1 << 16)
            challenge = orjson.loads((await ws.receive()).data)["challenge"]
            auth = build_auth_event(secret, challenge, url)
            await ws.send_str(
                orjson.dumps({"type": "auth", "protocol_version": 2, "event": auth.to_dict()}).decode()
            )
            joined = orjson.loads((await ws.receive()).data)
            assert joined["type"] == "joined", joined
            sockets.append(ws)
        latencies: list[int] = []
        received = 0

        async def reader(ws: aiohttp.ClientWebSocketResponse) -> None:
            nonlocal received
            async for msg in ws:
                if msg.type == aiohttp.WSMsgType.BINARY:
                    now = time.monotonic_ns()
                    received += 1
                    latencies.append(now - CLK.unpack_from(msg.data, 9)[0])

        async def sender(ws: aiohttp.ClientWebSocketResponse, phase: float) -> int:
            # Real microphones are not phase-locked: each peer starts at its own offset inside
            # the 20 ms frame period (a lock-step start would put 24 frames into every
            # receiver's 8-frame queue at the same instant, which no real room does).
            await asyncio.sleep(max(0.0, start_at + phase - time.monotonic()))
            begin = time.monotonic()
            n = int(seconds * rate)
            for seq in range(n):
                header = FrameHeader(seq & 0xFFFF, (seq * 960) & 0xFFFFFFFF, -20, 0)
                body = CLK.pack(time.monotonic_ns()) + bytes(PAYLOAD - CLK.size)
                await ws.send_bytes(client_frame(header, body))
                await asyncio.sleep(max(0.0, begin + (seq + 1) / rate - time.monotonic()))
            return n

        readers = [asyncio.create_task(reader(ws)) for ws in sockets]
        sent = sum(await asyncio.gather(*(sender(ws, offsets[i]) for i, ws in enumerate(sockets))))
        await asyncio.sleep(1.0)  # let the last frames arrive
        for ws in sockets:
            await ws.close()
        for task in readers:
            task.cancel()
        out.put((sent, received, latencies))


def worker(url: str, cid: str, secrets: list[str], start_at: float, seconds: float, rate: int, out) -> None:  # type: ignore[no-untyped-def]
    asyncio.run(peer_main(url, cid, secrets, start_at, seconds, rate, out))


def pct(values: list[int], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] / 1e6 if values else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--peers", type=int, default=25)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rate", type=int, default=50, help="frames per second per peer")
    ap.add_argument("--procs", type=int, default=min(5, os.cpu_count() or 1), help="peer worker processes")
    args = ap.parse_args()

    owner = generate_secret_key()
    cid = str(uuid.uuid4())
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        port = free_port()
        relay = subprocess.Popen(
            [
                str(ROOT / ".venv/bin/buzz"),
                "relay",
                "serve",
                "--bind",
                f"127.0.0.1:{port}",
                "--data-dir",
                str(data),
                "--log-level",
                "WARNING",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            relay.stdout.readline()  # "listening on"
            url = f"ws://127.0.0.1:{port}"
            asyncio.run(create_channel(url, cid, owner))
            secrets = [generate_secret_key() for _ in range(args.peers)]
            groups = [secrets[i :: args.procs] for i in range(args.procs)]
            out: mp.Queue = mp.get_context("spawn").Queue()
            start_at = time.monotonic() + 3.0
            ctx = mp.get_context("spawn")
            procs = [
                ctx.Process(target=worker, args=(url, cid, g, start_at, args.seconds, args.rate, out))
                for g in groups
                if g
            ]
            for p in procs:
                p.start()
            time.sleep(max(0.0, start_at - time.monotonic()))
            cpu0, t0 = cpu_seconds(relay.pid), time.monotonic()
            time.sleep(args.seconds)
            cpu1, t1 = cpu_seconds(relay.pid), time.monotonic()
            results = [out.get(timeout=60) for _ in procs]
            for p in procs:
                p.join(10)
        finally:
            relay.terminate()
            relay.wait(10)
    sent = sum(r[0] for r in results)
    received = sum(r[1] for r in results)
    latencies = [x for r in results for x in r[2]]
    expected = sent * (args.peers - 1)
    rate = received / args.seconds
    cpu = (cpu1 - cpu0) / (t1 - t0)
    rows = [
        ("peers × frames/s × s", f"{args.peers} × {args.rate} × {args.seconds:g}", ""),
        ("frames sent (in)", f"{sent}", ""),
        ("frames forwarded (out)", f"{received} of {expected}", ""),
        ("forwarded frames/s", f"{rate:,.0f}", "target ≥ 30,000"),
        ("drops (expected − received)", f"{expected - received}", "target 0"),
        ("latency p50 (loopback, ms)", f"{pct(latencies, 0.50):.2f}", ""),
        ("latency p99 (loopback, ms)", f"{pct(latencies, 0.99):.2f}", "target < 5"),
        ("relay CPU (cores)", f"{cpu:.2f}", "target ≤ 1.0 at the rate above"),
    ]
    width = max(len(r[0]) for r in rows)
    print("\nhuddle fan-out bench (relay subprocess, loopback)")
    for name, value, target in rows:
        print(f"  {name:<{width}}  {value:>22}  {target}")


if __name__ == "__main__":
    main()
