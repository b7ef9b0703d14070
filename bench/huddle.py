#!/usr/bin/env python3
"""Huddle fan-out benchmark (issue 6 item 6; issue 15 for `--replicas 2`). Run by `make bench`,
never by the tests.

25 simulated peers send one 20 ms frame each (50 frames/s) for 10 s into one huddle; every frame
is forwarded to the other 24, so the target load is 25 × 24 × 50 = 30,000 forwarded frames/s
(huddle.md §5.3). Peers run in worker processes so the relays' cores are their own. Each frame
carries its send time (CLOCK_MONOTONIC, shared by all processes), its sender and the sender's
replica; latency is receive − send on loopback, an upper bound of the relay-added latency.
Relay CPU comes from /proc/<pid>/stat (utime + stime). Drops are counted per (sender, receiver):
frames a sender sent that the receiver never got.

Row "1 replica": one `buzz relay serve` (SQLite), every path local. Targets: ≥ 30,000 forwarded
frames/s on one core, zero drops, p99 < 5 ms.

Row "2 replicas" (`--replicas 2`, what `make bench` runs, after the 1-replica row of the same
run): two `buzz relay serve` processes with BUZZ_MESH=on on one PostgreSQL database (created for
the run and dropped after) and one Redis (`--redis-url`, default redis://127.0.0.1:6379/0;
keys under a workspace id of the run, deleted after). The first peer joins replica A, so A owns
the room; the peers alternate A, B, A, B… (13 on A, 12 on B). Latency by path (huddle.md §9.8):
- local: sender and receiver on the owner A (A → client);
- remote, 1 hop: sender on A and receiver on B, or sender on B and receiver on A (one envelope
  through Redis);
- remote, 2 hops: sender and receiver both on B (B → A → B: all fan-out goes through the owner).
Target: remote p99 ≤ 2 × local p99 (of the same row), zero drops for receivers that keep up.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
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
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from buzz.core.event import Event  # noqa: E402
from buzz.core.huddle_wire import FrameHeader, client_frame  # noqa: E402
from buzz.core.keys import generate_secret_key  # noqa: E402
from buzz.core.nip42 import build_auth_event  # noqa: E402

PAYLOAD = 80  # bytes of "Opus" per frame, like a 32 kbit/s voice packet
STAMP = struct.Struct(">qBB")  # send time (ns), sender number, sender's replica
PREFIX = 1 + 8  # relay → client: [author index][8-byte v2 header] before the payload
TICKS = os.sysconf("SC_CLK_TCK")
DEFAULT_REDIS = "redis://127.0.0.1:6379/0"
DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/postgres"
LOCAL, ONE_HOP, TWO_HOPS = "local", "remote 1 hop", "remote 2 hops"
OWNER = 0  # replica index of the owner: the first peer joins it


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def path_of(sender_replica: int, receiver_replica: int) -> str:
    if sender_replica != receiver_replica:
        return ONE_HOP
    return LOCAL if sender_replica == OWNER else TWO_HOPS


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


@dataclass
class Peer:
    number: int  # 0…peers-1, carried in every frame
    replica: int
    secret: str


JOIN_ATTEMPTS = 3  # a loaded machine may miss the 2 s owner answer: retry as clients do (§4.3)


async def join(
    http: aiohttp.ClientSession, url: str, cid: str, peer: Peer
) -> aiohttp.ClientWebSocketResponse:
    """Connect and authenticate; retried on a refusal or close, SystemExit after JOIN_ATTEMPTS."""
    answer: object = None
    for attempt in range(JOIN_ATTEMPTS):
        ws = await http.ws_connect(f"{url}/huddle/{cid}/audio", autoping=True, max_msg_size=1 << 16)
        challenge = orjson.loads((await ws.receive()).data)["challenge"]
        auth = build_auth_event(peer.secret, challenge, url)
        await ws.send_str(
            orjson.dumps({"type": "auth", "protocol_version": 2, "event": auth.to_dict()}).decode()
        )
        msg = await ws.receive()
        answer = (
            orjson.loads(msg.data) if msg.type == aiohttp.WSMsgType.TEXT else (msg.type, msg.data, msg.extra)
        )
        if isinstance(answer, dict) and answer.get("type") == "joined":
            return ws
        await ws.close()
        await asyncio.sleep(0.2 * 2**attempt)
    raise SystemExit(f"peer {peer.number} on replica {peer.replica} not admitted: {answer}")


async def peer_main(
    urls: list[str], cid: str, peers: list[Peer], start_at: float, seconds: float, rate: int,
    owner_ready: Any, out: Any,
) -> None:  # fmt: skip
    rng = random.Random(os.getpid())
    offsets = [rng.uniform(0.0, 1.0 / rate) for _ in peers]
    async with aiohttp.ClientSession() as http:
        sockets = []
        for peer in peers:
            if peer.number != 0:  # the owner is whoever admits first: peer 0, on replica A
                await asyncio.get_running_loop().run_in_executor(None, owner_ready.wait, 60)
            url = urls[peer.replica]
            ws = await join(http, url, cid, peer)
            if peer.number == 0:
                owner_ready.set()
            sockets.append(ws)
        latencies: dict[str, list[int]] = {LOCAL: [], ONE_HOP: [], TWO_HOPS: []}
        got: Counter[tuple[int, int]] = Counter()  # (receiver, sender) → frames

        async def reader(ws: aiohttp.ClientWebSocketResponse, me: Peer) -> None:
            async for msg in ws:
                if msg.type == aiohttp.WSMsgType.BINARY:
                    now = time.monotonic_ns()
                    sent_ns, sender, replica = STAMP.unpack_from(msg.data, PREFIX)
                    got[(me.number, sender)] += 1
                    latencies[path_of(replica, me.replica)].append(now - sent_ns)

        async def sender(ws: aiohttp.ClientWebSocketResponse, me: Peer, phase: float) -> tuple[int, int]:
            # Real microphones are not phase-locked: each peer starts at its own offset inside
            # the 20 ms frame period (a lock-step start would put 24 frames into every
            # receiver's 8-frame queue at the same instant, which no real room does).
            await asyncio.sleep(max(0.0, start_at + phase - time.monotonic()))
            begin = time.monotonic()
            n = int(seconds * rate)
            for seq in range(n):
                header = FrameHeader(seq & 0xFFFF, (seq * 960) & 0xFFFFFFFF, -20, 0)
                stamp = STAMP.pack(time.monotonic_ns(), me.number, me.replica)
                await ws.send_bytes(client_frame(header, stamp + bytes(PAYLOAD - STAMP.size)))
                await asyncio.sleep(max(0.0, begin + (seq + 1) / rate - time.monotonic()))
            return me.number, n

        readers = [asyncio.create_task(reader(ws, p)) for ws, p in zip(sockets, peers, strict=True)]
        sends = [sender(ws, p, offsets[i]) for i, (ws, p) in enumerate(zip(sockets, peers, strict=True))]
        sent = dict(await asyncio.gather(*sends))
        await asyncio.sleep(1.5)  # let the last frames arrive
        for ws in sockets:
            await ws.close()
        for task in readers:
            task.cancel()
        out.put((sent, dict(got), latencies))


def worker(*args: Any) -> None:
    try:  # the relays run on uvloop; so do the peers, so that they keep up on a shared machine
        import uvloop
    except ImportError:
        asyncio.run(peer_main(*args))
        return
    uvloop.run(peer_main(*args))


def pct(values: list[int], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] / 1e6 if values else float("nan")


def load_avg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


# -- relays ---------------------------------------------------------------------------------
@dataclass
class Relay:
    proc: subprocess.Popen[str]
    url: str
    metrics_url: str


def scrape(relay: Relay) -> dict[str, float]:
    """`/metrics` samples of the huddle frame and mesh counters: `frames:<what>`, `mesh:<what>`."""
    import urllib.request

    with urllib.request.urlopen(relay.metrics_url, timeout=5) as answer:
        text = answer.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        for family, short in (("buzz_huddle_frames_total", "frames"), ("buzz_huddle_mesh_total", "mesh")):
            if line.startswith(family + "{"):
                what = line.split('what="', 1)[1].split('"', 1)[0]
                out[f"{short}:{what}"] = float(line.rsplit(" ", 1)[1])
    return out


def start_relay(data: Path, extra: list[str], env: dict[str, str]) -> Relay:
    port, metrics = free_port(), free_port()
    base = {k: v for k, v in os.environ.items() if not k.startswith(("BUZZ_", "RELAY_"))}
    proc = subprocess.Popen(
        [str(ROOT / ".venv/bin/buzz"), "relay", "serve", "--bind", f"127.0.0.1:{port}",
         "--data-dir", str(data), "--log-level", "WARNING", "--metrics-bind", f"127.0.0.1:{metrics}",
         *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**base, **env},
    )  # fmt: skip
    assert proc.stdout is not None
    first = proc.stdout.readline()  # the banner's first line, once it listens
    if not first or proc.poll() is not None:
        raise SystemExit(f"relay did not start: {first}{proc.stdout.read()}")
    return Relay(proc, f"ws://127.0.0.1:{port}", f"http://127.0.0.1:{metrics}/metrics")


def stop_relay(relay: Relay) -> None:
    proc = relay.proc
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def single_relay(tmp: Path) -> Iterator[list[Relay]]:
    relay = start_relay(tmp / "single", [], {})
    try:
        yield [relay]
    finally:
        stop_relay(relay)


async def _pg(admin: str, sql: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(admin, timeout=5)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


async def _drop_keys(redis_url: str, workspace: str) -> None:
    from redis.asyncio import Redis

    client = Redis.from_url(redis_url)
    try:
        for pattern in (f"buzz:{workspace}:*", f"buzz:{{*}}:{workspace}:*"):
            keys = [k async for k in client.scan_iter(match=pattern)]
            if keys:
                await client.delete(*keys)
    finally:
        await client.aclose()


@contextlib.contextmanager
def replica_relays(tmp: Path, n: int, pg_admin: str, redis_url: str) -> Iterator[list[Relay]]:
    """n replicas, BUZZ_MESH=on, one fresh PostgreSQL database, one Redis, one relay key."""
    from urllib.parse import urlsplit, urlunsplit

    db = f"buzz_bench_{uuid.uuid4().hex[:12]}"
    workspace = f"bench-{uuid.uuid4().hex[:12]}"
    try:
        asyncio.run(_pg(pg_admin, f'CREATE DATABASE "{db}"'))
    except Exception as exc:
        raise SystemExit(f"PostgreSQL unreachable at {pg_admin} ({exc}); --replicas 2 needs it") from None
    dsn = urlunsplit(urlsplit(pg_admin)._replace(path="/" + db))
    env = {"BUZZ_MESH": "on", "BUZZ_WORKSPACE_ID": workspace, "BUZZ_RELAY_PRIVATE_KEY": generate_secret_key()}
    relays: list[Relay] = []
    try:
        for i in range(n):
            relays.append(start_relay(tmp / f"replica-{i}", ["--db", dsn, "--redis-url", redis_url], env))
        yield relays
    finally:
        for relay in relays:
            stop_relay(relay)
        with contextlib.suppress(Exception):
            asyncio.run(_drop_keys(redis_url, workspace))
        with contextlib.suppress(Exception):
            asyncio.run(_pg(pg_admin, f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)'))


# -- one row --------------------------------------------------------------------------------
@dataclass
class Row:
    replicas: int
    peers: int
    rate: int
    seconds: float
    sent: int = 0
    received: int = 0
    expected: int = 0
    drops: Counter[str] = field(default_factory=Counter)
    lat: dict[str, list[int]] = field(default_factory=dict)
    cpu: float = 0.0
    load: str = ""
    counters: Counter[str] = field(default_factory=Counter)  # summed over the row's relays
    clean_receivers: int = 0  # receivers that got every frame of every other peer

    def summary(self) -> dict[str, Any]:
        paths = {
            name: {
                "frames": len(v),
                "p50_ms": pct(v, 0.50),
                "p99_ms": pct(v, 0.99),
                "drops": self.drops[name],
            }
            for name, v in self.lat.items()
            if v or self.drops[name]
        }
        remote = self.lat.get(ONE_HOP, []) + self.lat.get(TWO_HOPS, [])
        return {
            "replicas": self.replicas,
            "sent": self.sent,
            "forwarded": self.received,
            "expected": self.expected,
            "forwarded_per_s": self.received / self.seconds,
            "drops": self.expected - self.received,
            # the relay shed them at a receiver's full queue (§7.2: that receiver did not keep up)
            "receiver_queue_drops": int(self.counters["frames:dropped"]),
            "receivers_without_drops": self.clean_receivers,
            "relay_counters": dict(self.counters),
            "paths": paths,
            "remote_p99_ms": pct(remote, 0.99) if remote else None,
            "relay_cpu_cores": self.cpu,
            "load_avg": self.load,
        }


def run_row(relays: list[Relay], args: argparse.Namespace) -> Row:
    procs, urls = [r.proc for r in relays], [r.url for r in relays]
    owner = generate_secret_key()
    cid = str(uuid.uuid4())
    asyncio.run(create_channel(urls[0], cid, owner))
    peers = [Peer(i, i % len(urls), generate_secret_key()) for i in range(args.peers)]
    groups = [peers[i :: args.procs] for i in range(args.procs)]
    ctx = mp.get_context("spawn")
    out: Any = ctx.Queue()
    owner_ready = ctx.Event()
    start_at = time.monotonic() + 4.0
    workers = [
        ctx.Process(target=worker, args=(urls, cid, g, start_at, args.seconds, args.rate, owner_ready, out))
        for g in groups
        if g
    ]
    for p in workers:
        p.start()
    time.sleep(max(0.0, start_at - time.monotonic()))
    row = Row(len(urls), args.peers, args.rate, args.seconds, load=load_avg())
    cpu0, t0 = sum(cpu_seconds(p.pid) for p in procs), time.monotonic()
    time.sleep(args.seconds)
    cpu1, t1 = sum(cpu_seconds(p.pid) for p in procs), time.monotonic()
    results: list[Any] = []
    deadline = time.monotonic() + 90
    while len(results) < len(workers):
        try:
            results.append(out.get(timeout=1))
        except Exception:  # queue.Empty: a worker that died (a peer not admitted) fails the run
            dead = [p for p in workers if p.exitcode not in (None, 0)]
            if dead or time.monotonic() > deadline:
                for p in workers:
                    p.kill()
                raise SystemExit("a peer worker failed (see its message above); no row") from None
    for p in workers:
        p.join(10)
    row.cpu = (cpu1 - cpu0) / (t1 - t0)
    sent: dict[int, int] = {}
    got: Counter[tuple[int, int]] = Counter()
    row.lat = {LOCAL: [], ONE_HOP: [], TWO_HOPS: []}
    for s, g, lat in results:
        sent.update(s)
        got.update(g)
        for name, values in lat.items():
            row.lat[name] += values
    by_number = {p.number: p for p in peers}
    for receiver in peers:
        missing = 0
        for sender, n in sent.items():
            if sender == receiver.number:
                continue
            have = got[(receiver.number, sender)]
            row.drops[path_of(by_number[sender].replica, receiver.replica)] += max(0, n - have)
            missing += max(0, n - have)
            row.expected += n
            row.received += have
        row.clean_receivers += missing == 0
    row.sent = sum(sent.values())
    for relay in relays:
        row.counters.update(scrape(relay))
    return row


def print_table(rows: list[Row]) -> None:
    print(f"\nhuddle fan-out bench — {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}")
    print(f"CPU: {os.cpu_count()} cores — load avg at each row's start in the last column")
    r0 = rows[0]
    print(
        f"{r0.peers} peers × {r0.rate} frames/s × {r0.seconds:g} s per row; latency = receive − send on loopback\n"
    )
    head = f"{'row':<12} {'path':<14} {'frames':>9} {'p50 ms':>8} {'p99 ms':>8} {'drops':>7}"
    print(f"{head} {'fwd frames/s':>13} {'relay CPU':>10}  load")
    print("-" * 100)
    for row in rows:
        s = row.summary()
        first = True
        for name, p in s["paths"].items():
            lead = f"{row.replicas} replica{'s' if row.replicas > 1 else ''}" if first else ""
            tail = f"{s['forwarded_per_s']:>13,.0f} {row.cpu:>10.2f}  {row.load}" if first else ""
            print(
                f"{lead:<12} {name:<14} {p['frames']:>9,} {p['p50_ms']:>8.2f} {p['p99_ms']:>8.2f} "
                f"{p['drops']:>7,} {tail}"
            )
            first = False
    print("-" * 100)
    for row in rows:
        s = row.summary()
        c = row.counters
        lost = s["drops"] - s["receiver_queue_drops"]
        mesh = ", ".join(f"{k[5:]} {int(v):,}" for k, v in sorted(c.items()) if k.startswith("mesh:") and v)
        print(f"{row.replicas} replica(s): {s['drops']:,} not received = {s['receiver_queue_drops']:,} shed "
              f"at a receiver's full queue (it did not keep up) + {lost:,} lost elsewhere; "
              f"{row.clean_receivers} of {row.peers} receivers got every frame"
              + (f"; mesh counters: {mesh or 'all 0'}" if row.replicas > 1 else ""))  # fmt: skip
    single = rows[0].summary()
    print(f"1 replica: forwarded {single['forwarded_per_s']:,.0f}/s (target ≥ 30,000), "
          f"drops {single['drops']} (target 0), p99 {single['paths'][LOCAL]['p99_ms']:.2f} ms (target < 5)")  # fmt: skip
    for row in rows[1:]:
        s = row.summary()
        local = s["paths"].get(LOCAL, {}).get("p99_ms", float("nan"))
        remote = s["remote_p99_ms"]
        ratio = remote / local if remote and local else float("nan")
        verdict = "met" if ratio <= 2.0 else "NOT MET"
        print(f"{row.replicas} replicas: remote p99 {remote:.2f} ms over local p99 {local:.2f} ms = "
              f"{ratio:.2f}× (target ≤ 2×: {verdict}); drops {s['drops']} of {s['expected']:,} "
              f"(target 0: {'met' if s['drops'] == 0 else 'NOT MET'})")  # fmt: skip
        for name in (ONE_HOP, TWO_HOPS):
            p = s["paths"].get(name)
            if p and local:
                print(f"  {name}: p99 {p['p99_ms']:.2f} ms = {p['p99_ms'] / local:.2f}× local")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--peers", type=int, default=25)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rate", type=int, default=50, help="frames per second per peer")
    ap.add_argument("--procs", type=int, default=min(5, os.cpu_count() or 1), help="peer worker processes")
    ap.add_argument("--replicas", type=int, choices=(1, 2), default=1,
                    help="2: also the two-replica mesh row (PostgreSQL + Redis), after the 1-replica row")  # fmt: skip
    ap.add_argument("--redis-url", default=os.environ.get("BUZZ_BENCH_REDIS_URL", DEFAULT_REDIS))
    ap.add_argument("--pg-admin", default=os.environ.get("BUZZ_BENCH_POSTGRES_URL", DEFAULT_PG),
                    help="admin DSN; a database is created for the run and dropped after")  # fmt: skip
    ap.add_argument("--json", metavar="OUT.json", help="also write the results as JSON")
    args = ap.parse_args()

    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        with single_relay(Path(tmp)) as relays:
            rows.append(run_row(relays, args))
        if args.replicas == 2:
            with replica_relays(Path(tmp), 2, args.pg_admin, args.redis_url) as relays:
                rows.append(run_row(relays, args))
    print_table(rows)
    if args.json:
        Path(args.json).write_text(json.dumps([r.summary() for r in rows], indent=2) + "\n")
        print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main()
