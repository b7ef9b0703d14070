#!/usr/bin/env python3
"""Reads one member makes expensive (issue 24 items 9–12), against `buzz relay serve` (SQLite).

Loads `--notes` kind 1 notes with the word "word" and `--hidden` author-only rows (30024) of
another member, then times, each beside a yardstick of the same run:

  search   REQ search "word " × 680 (4 KB of one word)       yardstick: search "word"
  auth     connect + AUTH while 4 searches of 32 terms run     yardstick: connect + AUTH, idle
  count    COUNT {"kinds":[1,30024]} by a member              yardstick: COUNT {"kinds":[1]}
  hidden   REQ {"kinds":[1,30024],"limit":20} by a reader who sees none of the 30024 rows
                                                               yardstick: the author's same REQ

Run the same script against another tree (PYTHONPATH=<tree>/src) for a before/after.
Run: .venv/bin/python bench/read_bounds.py [--notes 3000] [--hidden 6000] [--json OUT]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import aiohttp
from hostile import authenticate, buzz_relay, frame, receive_json

from buzz.core.event import Event
from buzz.core.keys import generate_secret_key

BATCH = 200


async def _publish(url: str, secret: str, events: list[Event]) -> None:
    async with aiohttp.ClientSession() as s, s.ws_connect(url, max_msg_size=0) as ws:
        await authenticate(ws, url, secret)
        for i in range(0, len(events), BATCH):
            chunk = events[i : i + BATCH]
            for e in chunk:
                await ws.send_str(frame("EVENT", e.to_dict()))
            for _ in chunk:
                answer = await receive_json(ws, 60)
                if answer[0] != "OK" or answer[2] is not True:
                    raise RuntimeError(f"not stored: {answer}")


async def _ask(url: str, secret: str, verb: str, flt: dict) -> tuple[float, object]:
    """One REQ (to EOSE / CLOSED) or COUNT on a fresh authenticated connection: (seconds, answer)."""
    async with aiohttp.ClientSession() as s, s.ws_connect(url, max_msg_size=0) as ws:
        await authenticate(ws, url, secret)
        started = time.perf_counter()
        await ws.send_str(frame(verb, "q", flt))
        n = 0
        while True:
            msg = await receive_json(ws, 600)
            if msg[0] == "EVENT":
                n += 1
                continue
            took = time.perf_counter() - started
            if msg[0] == "EOSE":
                return took, n
            if msg[0] == "COUNT":
                return took, msg[2]["count"]
            return took, msg  # CLOSED


async def _login(url: str) -> float:
    started = time.perf_counter()
    async with aiohttp.ClientSession() as s, s.ws_connect(url, max_msg_size=0) as ws:
        await authenticate(ws, url, generate_secret_key())
    return time.perf_counter() - started


def _median(xs: list[float]) -> float:
    return statistics.median(xs)


async def run(args: argparse.Namespace) -> dict[str, object]:
    alice, bob = generate_secret_key(), generate_secret_key()
    now = int(time.time())
    notes = [Event.create(alice, 1, f"word note {i}", [], now - 500 - i % 300) for i in range(args.notes)]
    hidden = [Event.create(alice, 30024, "x", [["d", f"h{i}"]], now - i % 300) for i in range(args.hidden)]
    out: dict[str, object] = {"load": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory() as tmp, buzz_relay(Path(tmp)) as relay:
        url = relay.url
        await _publish(url, alice, notes + hidden)
        one = _median([(await _ask(url, bob, "REQ", {"search": "word"}))[0] for _ in range(3)])
        took, answer = await _ask(url, bob, "REQ", {"search": "word " * 680})
        out["search"] = {
            "yardstick_s": one,
            "repeated_s": took,
            "ratio": took / one,
            "answer": str(answer)[:80],
        }
        idle = _median([await _login(url) for _ in range(5)])
        hostile = [
            asyncio.ensure_future(
                _ask(url, bob, "REQ", {"search": " ".join(f"w{i} word" for i in range(100))})
            )
            for _ in range(4)
        ]
        await asyncio.sleep(0.3)
        busy = _median([await _login(url) for _ in range(5)])
        await asyncio.gather(*hostile)
        out["auth"] = {"idle_s": idle, "during_4_searches_s": busy, "ratio": busy / idle}
        yard, n1 = await _ask(url, bob, "COUNT", {"kinds": [1]})
        took, n2 = await _ask(url, alice, "COUNT", {"kinds": [1, 30024]})
        out["count"] = {
            "yardstick_s": yard,
            "gated_s": took,
            "ratio": took / yard,
            "answers": [n1, str(n2)[:80]],
        }
        yard, n1 = await _ask(url, alice, "REQ", {"kinds": [1, 30024], "limit": 20})
        took, n2 = await _ask(url, bob, "REQ", {"kinds": [1, 30024], "limit": 20})
        out["hidden"] = {"yardstick_s": yard, "hidden_s": took, "ratio": took / yard, "answers": [n1, n2]}
        out["rss_mb"] = relay.rss_bytes() / (1 << 20)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--notes", type=int, default=3000)
    parser.add_argument("--hidden", type=int, default=6000)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    result = asyncio.run(run(args))
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
