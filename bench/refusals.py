#!/usr/bin/env python3
"""Relay memory under repeated refusals and slow readers (issue 9 items 1 and 3).

Starts `buzz relay serve` (SQLite) on loopback and prints its RSS growth for:

  req     N REQs of ~100 KB naming channels that do not exist, on one authenticated
          connection;
  unauth  N unauthenticated EVENTs of 100 KB (fresh connections, 100 frames each);
  auth    N failed AUTHs (one per connection, the challenge is wrong);
  slow    three subscribers of kind 1 that never read while one client publishes
          `--slow-events` 100 KB events, then the three close.

Each line gives the RSS before, after the run, and after its connections closed (MB).
Run: .venv/bin/python bench/refusals.py [-n 1500] [--only req,unauth,auth,slow]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import uuid
from pathlib import Path

import aiohttp
from hostile import MIB, RelayProc, authenticate, buzz_relay, event_frame, frame, receive_json

from buzz.core.event import Event
from buzz.core.keys import generate_secret_key

CONTENT_100K = "x" * 100_000
TAGS_100K = [f"{i:04d}" + "t" * 96 for i in range(1000)]  # a REQ of ~100 KB
SETTLE_S = 1.0
WINDOW = 100


async def _req(url: str, n: int) -> None:
    async with aiohttp.ClientSession() as s, s.ws_connect(url, max_msg_size=0) as ws:
        await authenticate(ws, url, generate_secret_key())
        for start in range(0, n, WINDOW):  # under the relay's 1024 handler slots
            batch = min(WINDOW, n - start)
            for i in range(batch):
                await ws.send_str(frame("REQ", f"s{start + i}", {"#h": [str(uuid.uuid4())], "#t": TAGS_100K}))
            for _ in range(batch):
                answer = await receive_json(ws)
                assert answer[0] == "CLOSED", answer


async def _unauth(url: str, n: int) -> None:
    secret = generate_secret_key()
    async with aiohttp.ClientSession() as s:
        sent = 0
        while sent < n:
            batch = min(WINDOW, n - sent)
            async with s.ws_connect(url, max_msg_size=0) as ws:
                await receive_json(ws)  # challenge
                for _ in range(batch):
                    await ws.send_str(event_frame(secret, CONTENT_100K)[1])
                for _ in range(batch):
                    answer = await receive_json(ws)
                    assert answer[0] == "OK" and answer[2] is False, answer
            sent += batch


async def _auth(url: str, n: int) -> None:
    secret = generate_secret_key()
    async with aiohttp.ClientSession() as s:
        for _ in range(n):
            async with s.ws_connect(url) as ws:
                await receive_json(ws)
                bad = Event.create(secret, 22242, "", [["relay", url], ["challenge", "0" * 64]])
                await ws.send_str(frame("AUTH", bad.to_dict()))
                answer = await receive_json(ws)
                assert answer[:3] == ["OK", bad.id, False], answer


async def _peak(relay: RelayProc, report: dict[str, int]) -> None:
    while True:
        report["peak"] = max(report.get("peak", 0), relay.rss_bytes())
        await asyncio.sleep(0.1)


async def _slow(url: str, n: int, relay: RelayProc, report: dict[str, int]) -> None:
    sampler = asyncio.create_task(_peak(relay, report))
    async with aiohttp.ClientSession() as s:
        readers = []
        for _ in range(3):
            ws = await s.ws_connect(url, max_msg_size=0)
            await authenticate(ws, url, generate_secret_key())
            await ws.send_str(frame("REQ", "slow", {"kinds": [1], "since": int(time.time())}))
            assert (await receive_json(ws))[0] == "EOSE"
            readers.append(ws)  # from here on nobody reads them
        async with s.ws_connect(url, max_msg_size=0) as pub:
            secret = generate_secret_key()
            await authenticate(pub, url, secret)
            window = 32
            pending = 0
            for _ in range(n):
                await pub.send_str(event_frame(secret, CONTENT_100K)[1])
                pending += 1
                if pending >= window:
                    await receive_json(pub)
                    pending -= 1
            for _ in range(pending):
                await receive_json(pub)
        await asyncio.sleep(SETTLE_S * 3)
        sampler.cancel()
        for ws in readers:
            await ws.close()


def _mb(n: int) -> str:
    return f"{n / MIB:7.1f}"


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-n", type=int, default=1500, help="refusals per scenario (default 1500)")
    p.add_argument("--slow-events", type=int, default=1000, help="100 KB events for 'slow' (default 1000)")
    p.add_argument("--only", default="req,unauth,auth,slow")
    args = p.parse_args()
    scenarios = args.only.split(",")
    with tempfile.TemporaryDirectory(prefix="buzz-refusals-") as tmp, buzz_relay(Path(tmp)) as relay:
        print(f"relay {relay.url} pid {relay.proc.pid}; RSS in MB: before  after  closed  (growth)")
        for name in scenarios:
            await asyncio.sleep(SETTLE_S)
            before = relay.rss_bytes()
            report: dict[str, int] = {}
            t0 = time.monotonic()
            if name == "req":
                await _req(relay.url, args.n)
            elif name == "unauth":
                await _unauth(relay.url, args.n)
            elif name == "auth":
                await _auth(relay.url, args.n)
            elif name == "slow":
                await _slow(relay.url, args.slow_events, relay, report)
            else:
                raise SystemExit(f"unknown scenario {name!r}")
            elapsed = time.monotonic() - t0
            after = report.get("peak", relay.rss_bytes())
            await asyncio.sleep(SETTLE_S * 2)
            closed = relay.rss_bytes()
            print(
                f"{name:7s} {_mb(before)} {_mb(after)} {_mb(closed)}  (+{(after - before) / MIB:.1f} MB,"
                f" {(closed - before) / MIB:+.1f} MB after close) in {elapsed:.1f} s"
            )


if __name__ == "__main__":
    asyncio.run(main())
