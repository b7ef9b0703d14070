#!/usr/bin/env python3
"""Files benchmark (issue 26): upload and read throughput, RSS during an upload burst, and
thumbnail time. Run by `make bench`, never by the tests.

Throughput: files of 100 KB, 5 MB and 50 MB, 8 parallel clients (the relay's 8 uploads in
progress per replica), through `buzz relay serve` on SQLite (bytes in files under the data
directory) and on PostgreSQL (bytes in 1 MiB rows), each upload with a fresh key's kind 24242
(so per-key rates never bind), each read with a `get` authorization. Yardstick, same run, same
clients: a bare aiohttp server of this script (`--yardstick-serve`) that streams a PUT body to a
file while hashing it and serves GET with `FileResponse` — the floor of "HTTP plus a disk".
Ratios are buzz / yardstick (1.0 = as fast as the bare server).

Burst: 50 uploads of 50 MB at once to one SQLite relay (42 answered 429 and retried after
Retry-After, as a client does), the relay's RSS sampled every 10 ms from /proc; compared with
the naive 50 × 50 MB. Thumbnails: `buzz.media.images.inspect` per image (a 12-megapixel JPEG
and a 3-megapixel PNG), against Pillow's bare decode of the same file (`Image.open` + `load`).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
import ingest

from buzz.core.blossom import auth_event, authorization_header
from buzz.core.keys import generate_secret_key

SIZES = {"100 KB": 100_000, "5 MB": 5_000_000, "50 MB": 50_000_000}
TOTAL_BYTES = {"100 KB": 40_000_000, "5 MB": 200_000_000, "50 MB": 400_000_000}
CLIENTS = 8
BURST = 50
BURST_BYTES = 50_000_000
PIECE = 1 << 20


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


class Body:
    """`size` bytes made of a shared random base plus a unique 16-byte tail: distinct blobs
    without holding each one in memory (streamed to aiohttp piece by piece)."""

    base = os.urandom(PIECE)

    def __init__(self, size: int) -> None:
        self.size = size
        self.tail = os.urandom(16)
        digest = hashlib.sha256()
        for piece in self._pieces():
            digest.update(piece)
        self.sha256 = digest.hexdigest()
        self.secret = ""

    def _pieces(self) -> Any:
        left = self.size - len(self.tail)
        while left > 0:
            n = min(left, PIECE)
            yield self.base[:n]
            left -= n
        yield self.tail

    async def stream(self) -> AsyncIterator[bytes]:
        for piece in self._pieces():
            yield piece


def upload_headers(body: Body) -> dict[str, str]:
    """A fresh key per upload (the per-key rate of 30 a minute never binds); the key is kept
    on the body, since only an uploader may read an unreferenced blob (media.md §8)."""
    body.secret = generate_secret_key()
    event = auth_event(body.secret, "upload", expiration=int(time.time()) + 300, hashes=[body.sha256])
    return {
        "Authorization": authorization_header(event),
        "X-SHA-256": body.sha256,
        "Content-Length": str(body.size),
        "Content-Type": "application/octet-stream",
    }


async def put_buzz(session: aiohttp.ClientSession, base: str, body: Body) -> int:
    """Upload until stored (waiting out 429 as told); returns how many 429 it got."""
    refused = 0
    while True:
        headers = upload_headers(body)
        async with session.put(base + "/upload", data=body.stream(), headers=headers, expect100=True) as r:
            await r.read()
            if r.status == 429:
                refused += 1
                await asyncio.sleep(float(r.headers.get("Retry-After", "1")))
                continue
            if r.status != 200:
                raise RuntimeError(f"upload answered {r.status} {r.headers.get('X-Reason')}")
            return refused


async def get_buzz(session: aiohttp.ClientSession, base: str, body: Body) -> None:
    event = auth_event(body.secret, "get", expiration=int(time.time()) + 300, hashes=[body.sha256])
    headers = {"Authorization": authorization_header(event)}
    async with session.get(f"{base}/media/{body.sha256}", headers=headers) as r:
        got = 0
        async for piece in r.content.iter_chunked(PIECE):
            got += len(piece)
        if r.status != 200 or got != body.size:
            raise RuntimeError(f"read answered {r.status} with {got} bytes")


async def put_plain(session: aiohttp.ClientSession, base: str, body: Body) -> int:
    headers = {"Content-Length": str(body.size), "X-SHA-256": body.sha256}
    async with session.put(f"{base}/y/{body.sha256}", data=body.stream(), headers=headers) as r:
        await r.read()
        if r.status != 200:
            raise RuntimeError(f"yardstick upload answered {r.status}")
    return 0


async def get_plain(session: aiohttp.ClientSession, base: str, body: Body) -> None:
    async with session.get(f"{base}/y/{body.sha256}") as r:
        got = 0
        async for piece in r.content.iter_chunked(PIECE):
            got += len(piece)
        if got != body.size:
            raise RuntimeError("yardstick read short")


async def throughput(base: str, size: int, total: int, buzz: bool) -> tuple[float, float]:
    """(upload MB/s, read MB/s) of `total` bytes in files of `size`, CLIENTS in parallel."""
    bodies = [Body(size) for _ in range(max(CLIENTS, total // size))]
    put, get = (put_buzz, get_buzz) if buzz else (put_plain, get_plain)
    connector = aiohttp.TCPConnector(limit=CLIENTS)
    async with aiohttp.ClientSession(
        connector=connector, timeout=aiohttp.ClientTimeout(total=None)
    ) as session:
        shares = [bodies[i::CLIENTS] for i in range(CLIENTS)]

        async def uploads(items: list[Body]) -> None:
            for body in items:
                await put(session, base, body)

        async def reads(items: list[Body]) -> None:
            for body in items:
                await get(session, base, body)

        started = time.perf_counter()
        await asyncio.gather(*(uploads(s) for s in shares))
        up = time.perf_counter() - started
        started = time.perf_counter()
        await asyncio.gather(*(reads(s) for s in shares))
        down = time.perf_counter() - started
    moved = sum(b.size for b in bodies) / 1e6
    return moved / up, moved / down


async def burst(base: str, pid: int) -> dict[str, Any]:
    """BURST uploads of BURST_BYTES at once; the relay's RSS sampled every 10 ms."""
    baseline = rss(pid)
    peak = baseline
    done = asyncio.Event()

    async def watch() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, rss(pid))
            await asyncio.sleep(0.01)

    bodies = [Body(BURST_BYTES) for _ in range(BURST)]
    watcher = asyncio.create_task(watch())
    connector = aiohttp.TCPConnector(limit=0)
    started = time.perf_counter()
    async with aiohttp.ClientSession(
        connector=connector, timeout=aiohttp.ClientTimeout(total=None)
    ) as session:
        refused = await asyncio.gather(*(put_buzz(session, base, b) for b in bodies))
    elapsed = time.perf_counter() - started
    done.set()
    await watcher
    return {
        "uploads": BURST,
        "bytes_each": BURST_BYTES,
        "seconds": round(elapsed, 1),
        "answered_429": sum(refused),
        "rss_baseline_mib": baseline >> 20,
        "rss_peak_mib": peak >> 20,
        "rss_growth_mib": (peak - baseline) >> 20,
        "naive_mib": (BURST * BURST_BYTES) >> 20,
    }


def thumbnails(rounds: int) -> list[dict[str, Any]]:
    from PIL import Image

    from buzz.media.images import inspect

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, size, fmt in (
            ("JPEG 4000x3000", (4000, 3000), "JPEG"),
            ("PNG 2000x1500", (2000, 1500), "PNG"),
        ):
            im = Image.effect_noise(size, 64).convert("RGB")
            path = Path(tmp) / f"img.{fmt.lower()}"
            im.save(path, fmt, quality=85) if fmt == "JPEG" else im.save(path, fmt)
            ours, bare = [], []
            for _ in range(rounds):
                started = time.perf_counter()
                inspect(path)
                ours.append(time.perf_counter() - started)
                started = time.perf_counter()
                with Image.open(path) as raw:
                    raw.load()
                bare.append(time.perf_counter() - started)
            ms, yard = statistics.median(ours) * 1000, statistics.median(bare) * 1000
            rows.append(
                {"image": name, "bytes": path.stat().st_size, "ms": round(ms, 1), "decode_ms": round(yard, 1)}
            )
    return rows


# -- the yardstick server (a child process of this script) --------------------------------------
def yardstick_serve(port: int, folder: Path) -> None:
    from aiohttp import web

    async def put(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        digest = hashlib.sha256()
        with open(folder / name, "wb") as fh:
            async for piece in request.content.iter_chunked(PIECE):
                digest.update(piece)
                fh.write(piece)
        ok = digest.hexdigest() == request.headers.get("X-SHA-256")
        return web.Response(status=200 if ok else 400)

    async def get(request: web.Request) -> web.StreamResponse:
        return web.FileResponse(folder / request.match_info["name"])

    app = web.Application()
    app.router.add_put("/y/{name}", put)
    app.router.add_get("/y/{name}", get)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)


def start_yardstick(tmp: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = ingest.free_port()
    folder = tmp / "yardstick"
    folder.mkdir()
    proc = subprocess.Popen([sys.executable, __file__, "--yardstick-serve", str(port), str(folder)])
    base = f"http://127.0.0.1:{port}"

    async def wait() -> None:
        for _ in range(200):
            try:
                async with aiohttp.ClientSession() as s, s.get(base + "/y/none") as r:
                    await r.read()
                    return
            except aiohttp.ClientError:
                await asyncio.sleep(0.05)
        raise RuntimeError("yardstick server did not start")

    asyncio.run(wait())
    return proc, base


def http_of(relay: ingest.RelayProc) -> str:
    return relay.url.replace("ws://", "http://", 1)


def run(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"machine": ingest.machine_facts(), "clients": CLIENTS, "throughput": []}
    scale = args.scale
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        yard, yard_base = start_yardstick(tmp)
        try:
            targets: list[tuple[str, Any]] = [("yardstick", None), ("sqlite", None), ("postgres", None)]
            for label, size in SIZES.items():
                total = int(TOTAL_BYTES[label] * scale)
                row: dict[str, Any] = {"size": label}
                row["yardstick"] = asyncio.run(throughput(yard_base, size, total, buzz=False))
                relay = ingest.start_buzz(tmp, tag=f"-sqlite-{size}")
                try:
                    row["sqlite"] = asyncio.run(throughput(http_of(relay), size, total, buzz=True))
                finally:
                    relay.stop()
                with ingest.pg_database() as dsn:
                    if dsn is not None:
                        relay = ingest.start_buzz(tmp, dsn, tag=f"-pg-{size}")
                        try:
                            row["postgres"] = asyncio.run(throughput(http_of(relay), size, total, buzz=True))
                        finally:
                            relay.stop()
                out["throughput"].append(row)
                print(f"  {label}: {row}", file=sys.stderr)
            del targets
        finally:
            yard.terminate()
            yard.wait(10)
        relay = ingest.start_buzz(tmp, tag="-burst")
        try:
            out["burst"] = asyncio.run(burst(http_of(relay), relay.proc.pid))
        finally:
            relay.stop()
    out["thumbnails"] = thumbnails(args.rounds)
    return out


def render(out: dict[str, Any]) -> str:
    lines = [
        f"Files (issue 26) — {out['machine']['cpu']}, {out['clients']} parallel clients",
        "",
        "| size | store | upload MB/s | ×yardstick | read MB/s | ×yardstick |",
        "|---|---|---|---|---|---|",
    ]
    for row in out["throughput"]:
        yu, yd = row["yardstick"]
        lines.append(
            f"| {row['size']} | yardstick (bare aiohttp + disk) | {yu:.0f} | 1.00 | {yd:.0f} | 1.00 |"
        )
        for store in ("sqlite", "postgres"):
            if store in row:
                u, d = row[store]
                lines.append(f"| {row['size']} | {store} | {u:.0f} | {u / yu:.2f} | {d:.0f} | {d / yd:.2f} |")
    b = out["burst"]
    lines += [
        "",
        f"Burst: {b['uploads']} × {b['bytes_each'] // 10**6} MB at once in {b['seconds']} s "
        f"({b['answered_429']} answers 429, retried): relay RSS {b['rss_baseline_mib']} → "
        f"{b['rss_peak_mib']} MiB (+{b['rss_growth_mib']} MiB; holding every body would be "
        f"{b['naive_mib']} MiB)",
        "",
        "| image | bytes | inspect + thumbnail + blurhash ms | bare Pillow decode ms | ratio |",
        "|---|---|---|---|---|",
    ]
    for t in out["thumbnails"]:
        lines.append(
            f"| {t['image']} | {t['bytes']} | {t['ms']} | {t['decode_ms']} | {t['ms'] / t['decode_ms']:.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--yardstick-serve":
        yardstick_serve(int(sys.argv[2]), Path(sys.argv[3]))
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--scale", type=float, default=1.0, help="fraction of the bytes moved per size (default 1)"
    )
    parser.add_argument("--rounds", type=int, default=5, help="thumbnail rounds per image")
    args = parser.parse_args()
    print(render(run(args)))


if __name__ == "__main__":
    main()
