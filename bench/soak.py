#!/usr/bin/env python3
"""Soak: mixed hostile traffic beside a well-behaved client (issue 9, "Done when").

Starts `buzz relay serve` (SQLite) on loopback and, for `--seconds` (default 300), runs at once:

  well-behaved  one authenticated client: EVENT→OK and REQ→EOSE round trips, 10 per second;
  unauth        EVENTs of 100 KB without AUTH (the relay closes them after its auth timeout);
  bad-auth      fresh connections whose one AUTH names the wrong challenge;
  unknown-req   REQs naming channels that do not exist (authenticated);
  oversized     frames over BUZZ_MAX_FRAME_BYTES (NOTICE, then close 1009);
  malformed     not JSON, deep nesting, wrong shapes, ids with lone surrogates;
  non-reader    subscribers of kind 20002 that never read while a publisher sends 100 KB
                typing indicators (ephemeral: nothing is stored), so their queues fill.

Prints the relay's RSS at start, peak and end (after the hostile connections are gone), the
well-behaved client's p50/p99 round trips, and how many connections ended, by reason.
Targets: RSS growth < 50 MB, p99 < 50 ms; exit status 1 when one is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import os
import random
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp
from hostile import MIB, RelayProc, authenticate, buzz_relay, event_frame, frame, receive_json

from buzz.core.event import Event
from buzz.core.keys import generate_secret_key
from buzz.core.limits import MAX_FRAME_BYTES

TARGET_GROWTH_MB = 50.0
TARGET_P99_MS = 50.0
WELL_BEHAVED_PERIOD_S = 0.1
CONTENT_100K = "x" * 100_000
SETTLE_S = 3.0

MALFORMED = [
    "not json",
    "[" * 3000 + "]" * 3000,
    '{"EVENT": 1}',
    '["EVENT"]',
    '["REQ"]',
    '["REQ",42,{}]',
    '["EVENT",{"id":"\\ud800","kind":1}]',
    '["REQ","\\udfff",{"kinds":[1]}]',
    '["WHAT",1]',
    '["EVENT",{"id":"' + "a" * 64 + '","kind":"one"}]',
    "[NaN]",
]


class Soak:
    def __init__(self, relay: RelayProc, seconds: float) -> None:
        self.relay = relay
        self.url = relay.url
        self.deadline = time.monotonic() + seconds
        self.closed: Counter[str] = Counter()
        self.sent: Counter[str] = Counter()
        self.event_ok_ms: list[float] = []
        self.req_eose_ms: list[float] = []
        self.peak = relay.rss_bytes()
        self.timeline: list[tuple[float, int]] = []  # (seconds since start, RSS) every 30 s
        self.t0 = time.monotonic()

    def running(self) -> bool:
        return time.monotonic() < self.deadline

    def ended(self, ws: aiohttp.ClientWebSocketResponse, actor: str) -> None:
        """Tally how the relay ended `ws`. "dropped" means the socket went without a close frame
        the client could read (a reset, or a non-reader whose close frame never got through)."""
        code = ws.close_code
        if not ws.closed:
            reason = "STILL OPEN"
        elif code in (None, 1006):
            reason = "dropped (no close frame read)"
        else:
            reason = {1008: "1008 policy", 1009: "1009 frame too large", 1000: "1000 normal"}.get(
                code, str(code)
            )
        self.closed[f"{actor}: {reason}"] += 1

    async def drain(self, ws: aiohttp.ClientWebSocketResponse, timeout: float = 10.0) -> list[str]:
        """Read until the relay closes (or `timeout`), so its close code is known; the texts read."""
        texts: list[str] = []
        with contextlib.suppress(TimeoutError, aiohttp.ClientError):
            async with asyncio.timeout(timeout):
                while (msg := await ws.receive()).type == aiohttp.WSMsgType.TEXT:
                    texts.append(msg.data)
        return texts

    # -- actors ---------------------------------------------------------------------------------
    async def well_behaved(self, s: aiohttp.ClientSession) -> None:
        secret = generate_secret_key()
        async with s.ws_connect(self.url, max_msg_size=0) as ws:
            await authenticate(ws, self.url, secret)
            author = Event.create(secret, 1, "").pubkey
            i = 0
            while self.running():
                t0 = time.perf_counter()
                if i % 2 == 0:
                    eid, text = event_frame(secret, f"hello {i}")
                    await ws.send_str(text)
                    answer = await receive_json(ws)
                    assert answer[:3] == ["OK", eid, True], answer
                    self.event_ok_ms.append((time.perf_counter() - t0) * 1000)
                else:
                    await ws.send_str(frame("REQ", "w", {"authors": [author], "kinds": [1], "limit": 5}))
                    while (answer := await receive_json(ws))[0] == "EVENT":
                        pass
                    assert answer == ["EOSE", "w"], answer
                    self.req_eose_ms.append((time.perf_counter() - t0) * 1000)
                    await ws.send_str(frame("CLOSE", "w"))
                    assert (await receive_json(ws))[0] == "CLOSED"
                i += 1
                await asyncio.sleep(WELL_BEHAVED_PERIOD_S / 2)

    async def unauth(self, s: aiohttp.ClientSession) -> None:
        secret = generate_secret_key()
        while self.running():
            async with s.ws_connect(self.url, max_msg_size=0) as ws:
                await receive_json(ws)
                with contextlib.suppress(aiohttp.ClientError, ConnectionResetError):
                    while self.running() and not ws.closed:
                        await ws.send_str(event_frame(secret, CONTENT_100K)[1])
                        self.sent["unauth EVENT"] += 1
                        msg = await ws.receive(10)
                        if msg.type != aiohttp.WSMsgType.TEXT:
                            break
                        await asyncio.sleep(0.02)
                if self.running():
                    await self.drain(ws, timeout=1.0)
                    self.ended(ws, "unauth (auth timeout)")

    async def bad_auth(self, s: aiohttp.ClientSession) -> None:
        secret = generate_secret_key()
        while self.running():
            async with s.ws_connect(self.url) as ws:
                await receive_json(ws)
                bad = Event.create(secret, 22242, "", [["relay", self.url], ["challenge", "0" * 64]])
                await ws.send_str(frame("AUTH", bad.to_dict()))
                answer = await receive_json(ws)
                assert answer[:3] == ["OK", bad.id, False], answer
                self.sent["failed AUTH"] += 1
            self.closed["bad-auth: closed by client"] += 1
            await asyncio.sleep(0.01)

    async def unknown_req(self, s: aiohttp.ClientSession) -> None:
        async with s.ws_connect(self.url, max_msg_size=0) as ws:
            await authenticate(ws, self.url, generate_secret_key())
            tags = [f"{i:03d}" + "t" * 97 for i in range(200)]
            while self.running():
                await ws.send_str(frame("REQ", "u", {"#h": [str(uuid.uuid4())], "#t": tags}))
                answer = await receive_json(ws)
                assert answer[0] == "CLOSED" and answer[2].startswith("restricted:"), answer
                self.sent["unknown-channel REQ"] += 1
                await asyncio.sleep(0.01)

    async def oversized(self, s: aiohttp.ClientSession) -> None:
        while self.running():
            async with s.ws_connect(self.url) as ws:
                await receive_json(ws)
                await ws.send_str("[" + " " * (MAX_FRAME_BYTES + random.randint(1, 100_000)) + "]")
                self.sent["oversized frame"] += 1
                texts = await self.drain(ws)
                said = any('"error: frame too large' in t for t in texts)
                self.ended(ws, "oversized, after its NOTICE" if said else "oversized, no NOTICE")
            await asyncio.sleep(0.1)

    async def malformed(self, s: aiohttp.ClientSession) -> None:
        async with s.ws_connect(self.url) as ws:
            await authenticate(ws, self.url, generate_secret_key())
            i = 0
            while self.running() and not ws.closed:
                await ws.send_str(MALFORMED[i % len(MALFORMED)])
                i += 1
                self.sent["malformed frame"] += 1
                msg = await ws.receive(10)
                if msg.type != aiohttp.WSMsgType.TEXT:
                    break
                assert msg.data.startswith(('["NOTICE","invalid', '["CLOSED"', '["OK"')), msg.data
                await asyncio.sleep(0.01)
            if self.running():
                self.ended(ws, "malformed")

    async def non_readers(self, s: aiohttp.ClientSession) -> None:
        """Every few seconds a new subscriber that never reads; a publisher keeps them fed."""
        readers: list[aiohttp.ClientWebSocketResponse] = []

        async def publisher() -> None:
            secret = generate_secret_key()
            async with s.ws_connect(self.url, max_msg_size=0) as pub:
                await authenticate(pub, self.url, secret)
                while self.running():
                    await pub.send_str(event_frame(secret, CONTENT_100K, kind=20002)[1])
                    answer = await receive_json(pub)
                    assert answer[2] is True, answer
                    self.sent["100 KB typing indicator"] += 1
                    await asyncio.sleep(0.01)

        pub_task = asyncio.create_task(publisher())
        try:
            while self.running():
                ws = await s.ws_connect(self.url, max_msg_size=0)
                await authenticate(ws, self.url, generate_secret_key())
                await ws.send_str(frame("REQ", "nr", {"kinds": [20002]}))
                readers.append(ws)
                self.sent["non-reading subscriber"] += 1
                await asyncio.sleep(5)
                for old in [r for r in readers if r is not ws]:  # see how the relay ended them
                    await self.drain(old, timeout=1.0)
                    self.ended(old, "non-reader")
                    await old.close()
                    readers.remove(old)
        finally:
            pub_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pub_task
            for ws in readers:
                await self.drain(ws, timeout=5.0)
                self.ended(ws, "non-reader")
                await ws.close()

    async def sample_rss(self) -> None:
        next_mark = 0.0
        while self.running():
            rss = self.relay.rss_bytes()
            self.peak = max(self.peak, rss)
            if (t := time.monotonic() - self.t0) >= next_mark:
                self.timeline.append((t, rss))
                next_mark += 30.0
            await asyncio.sleep(0.5)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))] if ordered else float("nan")


async def _guarded(name: str, actor: Callable[[], Awaitable[None]], soak: Soak, errors: list[str]) -> None:
    while soak.running():
        try:
            await actor()
        except (aiohttp.ClientError, ConnectionError, TimeoutError, AssertionError) as exc:
            errors.append(f"{name}: {type(exc).__name__}: {exc}"[:200])
            await asyncio.sleep(0.2)


async def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=300.0, help="length of the run (default 300)")
    args = p.parse_args()
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    print(
        f"soak {dt.datetime.now():%Y-%m-%d %H:%M}, {args.seconds:.0f} s, {os.cpu_count()} cores, load {load}"
    )
    with tempfile.TemporaryDirectory(prefix="buzz-soak-") as tmp, buzz_relay(Path(tmp)) as relay:
        await asyncio.sleep(1.0)
        start = relay.rss_bytes()
        soak = Soak(relay, args.seconds)
        errors: list[str] = []
        async with aiohttp.ClientSession() as s:
            hostile = {
                "unauth": lambda: soak.unauth(s),
                "bad-auth": lambda: soak.bad_auth(s),
                "unknown-req": lambda: soak.unknown_req(s),
                "oversized": lambda: soak.oversized(s),
                "malformed": lambda: soak.malformed(s),
                "non-reader": lambda: soak.non_readers(s),
            }
            tasks = [asyncio.create_task(_guarded(n, a, soak, errors)) for n, a in hostile.items()]
            tasks.append(asyncio.create_task(soak.sample_rss()))
            well = asyncio.create_task(soak.well_behaved(s))
            well_error = None
            try:
                await well
            except Exception as exc:  # the one client that must never fail
                well_error = f"{type(exc).__name__}: {exc}"
            await asyncio.gather(*tasks)
        await asyncio.sleep(SETTLE_S)
        end = relay.rss_bytes()
        log_lines = relay.log_path.read_text(errors="replace").count("\n")
    growth = (end - start) / MIB
    trips = soak.event_ok_ms + soak.req_eose_ms
    p99 = _pct(trips, 0.99)
    print(f"RSS: start {start / MIB:.1f} MB, peak {soak.peak / MIB:.1f} MB, end {end / MIB:.1f} MB")
    print("RSS every 30 s (MB): " + " ".join(f"{rss / MIB:.0f}" for _, rss in soak.timeline))
    print(
        f"RSS growth: {growth:+.1f} MB  target < {TARGET_GROWTH_MB:g} MB  {'MET' if growth < TARGET_GROWTH_MB else 'NOT MET'}"
    )
    print(f"well-behaved round trips: {len(trips)}  p50 {_pct(trips, 0.5):.1f} ms  p99 {p99:.1f} ms  "
          f"target p99 < {TARGET_P99_MS:g} ms  {'MET' if p99 < TARGET_P99_MS else 'NOT MET'}")  # fmt: skip
    for label, values in (("EVENT→OK", soak.event_ok_ms), ("REQ→EOSE", soak.req_eose_ms)):
        print(f"  {label}: {len(values)}  p50 {_pct(values, 0.5):.1f} ms  p99 {_pct(values, 0.99):.1f} ms")
    print("hostile traffic sent:")
    for what, n in sorted(soak.sent.items()):
        print(f"  {what:28s} {n:8d}")
    print("connections ended, by reason:")
    for what, n in sorted(soak.closed.items()):
        print(f"  {what:40s} {n:8d}")
    print(f"relay log lines: {log_lines}")
    if errors:
        print(f"hostile actors restarted {len(errors)} times; first: {errors[0]}")
    if well_error:
        print(f"WELL-BEHAVED CLIENT FAILED: {well_error}")
    met = growth < TARGET_GROWTH_MB and p99 < TARGET_P99_MS and well_error is None
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
