#!/usr/bin/env python3
"""Huddle fan-out benchmark (issue 6 item 6; issue 15 for `--replicas 2`). Run by `make bench`,
never by the tests.

25 seats in one huddle (the room's cap, huddle.md §5.3): one listen-only *probe* per replica
(it joins like any peer, sends nothing, and runs alone in its own process doing nothing but
reading and timestamping), the others *senders* sending one 20 ms frame each (50 frames/s) for
10 s; every frame is forwarded to the other 24 seats. Senders run in `--procs` worker processes
(6), so the relays' cores are their own. Every seat joins first, one at a time; the frames start
once all are in, so no seat misses any by joining late. Each frame carries its send time
(CLOCK_MONOTONIC, shared by all processes), its sender and the sender's replica; latency is
receive − send on loopback, an upper bound of the relay-added latency. Relay CPU comes from
/proc/<pid>/stat (utime + stime), the time a process waited for a CPU from /proc/<pid>/schedstat.

Drops are counted per (sender, receiver): frames a sender sent that the receiver never got,
split by receiver class (senders, probes) and by cause with the relays' own counters
(`/metrics`): shed at a receiver's send queue (huddle.md §7.2), a leaver's frames flushed, mesh
envelopes lost (outbox full, failed send, stale or unknown envelope; one envelope is a frame for
one receiver, owner → ingress, or for all, ingress → owner), and the rest, lost nowhere
accounted (must be 0). The senders are Python clients sharing 2 cores and may not keep up with
24 × 50 frames/s each; the probes are the receivers that keep up: their drops and latency are
the answer to "zero drops for receivers that keep up".

Row "1 replica": one `buzz relay serve` (SQLite), every path local. Targets: ≥ 30,000 forwarded
frames/s on one core (senders × 24 × 50 here), zero drops, p99 < 5 ms.

Row "2 replicas" (`--replicas 2`, what `make bench` runs, after the 1-replica row of the same
run): two `buzz relay serve` processes with BUZZ_MESH=on on one PostgreSQL database (created for
the run and dropped after) and one Redis (`--redis-url`, default redis://127.0.0.1:6379/0;
keys under a workspace id of the run, deleted after). The first sender joins replica A, so A
owns the room; the senders alternate A, B, A, B…, then one probe on each (13 seats on A, 12 on
B). Latency by path (huddle.md §9.8):
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


def runqueue_seconds(pid: int | str = "self") -> float:
    """Seconds the process's main thread (the event loop) spent runnable but waiting for a CPU
    (/proc/<pid>/schedstat, second field): how much a shared machine held it back."""
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[1]) / 1e9


@dataclass
class Peer:
    number: int  # 0…seats-1, carried in every frame a sender sends
    replica: int
    secret: str
    probe: bool = False  # listen-only: joins like any peer, sends nothing, only reads


JOIN_ATTEMPTS = 3  # a loaded machine may miss the 2 s owner answer: retry as clients do (§4.3)


@dataclass
class Sync:
    """Shared by the bench and its workers: the owner's first admission, the number of seats
    admitted, and the start instant (set once every seat is in, so no seat misses a frame by
    joining late)."""

    owner_ready: Any
    join_lock: Any  # one join at a time across the workers (see run_row)
    joined: Any  # multiprocessing Value("i")
    go: Any
    start_at: Any  # multiprocessing Value("d"): CLOCK_MONOTONIC seconds


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
        print(
            f"peer {peer.number} on replica {peer.replica}, join attempt {attempt + 1}: {answer}",
            file=sys.stderr,
        )
        await asyncio.sleep(0.2 * 2**attempt)
    raise SystemExit(f"peer {peer.number} on replica {peer.replica} not admitted: {answer}")


async def peer_main(
    urls: list[str], cid: str, peers: list[Peer], sync: Sync, seconds: float, rate: int, out: Any
) -> None:
    """Join `peers`, wait for the common start, send (senders) and read (everyone) for
    `seconds`; put (sent, got, latencies, cpu share, probe?) on `out`. A probe worker holds one
    listen-only peer and does nothing but read and timestamp."""
    loop = asyncio.get_running_loop()
    rng = random.Random(os.getpid())
    offsets = [rng.uniform(0.0, 1.0 / rate) for _ in peers]
    async with aiohttp.ClientSession() as http:
        sockets = []
        for peer in peers:
            if peer.number != 0:  # the owner is whoever admits first: peer 0, on replica A
                await loop.run_in_executor(None, sync.owner_ready.wait, 60)
            await loop.run_in_executor(None, sync.join_lock.acquire)
            try:
                ws = await join(http, urls[peer.replica], cid, peer)
            finally:
                sync.join_lock.release()
            if peer.number == 0:
                sync.owner_ready.set()
            with sync.joined.get_lock():
                sync.joined.value += 1
            sockets.append(ws)
        if not await loop.run_in_executor(None, sync.go.wait, 120):
            raise SystemExit("the bench never gave the start")
        start_at = sync.start_at.value
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
        await asyncio.sleep(max(0.0, start_at - time.monotonic()))
        cpu0, wait0, t0 = time.process_time(), runqueue_seconds(), time.monotonic()
        sends = [
            sender(ws, p, offsets[i])
            for i, (ws, p) in enumerate(zip(sockets, peers, strict=True))
            if not p.probe
        ]
        sent = dict(await asyncio.gather(*sends))
        await asyncio.sleep(max(0.0, start_at + seconds - time.monotonic()))
        wall = time.monotonic() - t0
        cpu_share = ((time.process_time() - cpu0) / wall, (runqueue_seconds() - wait0) / wall)
        await asyncio.sleep(1.5)  # let the last frames arrive
        for ws in sockets:
            await ws.close()
        for task in readers:
            task.cancel()
        out.put((sent, dict(got), latencies, cpu_share, all(p.probe for p in peers)))


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
SENDERS, PROBES = "senders", "probes"  # receiver classes: the sending peers, the listen-only seats
MESH_LOSSES = ("outbox_dropped", "send_failed", "stale", "unregistered", "ambiguous", "malformed")


@dataclass
class Row:
    replicas: int
    seats: int
    probes: int
    rate: int
    seconds: float
    sent: int = 0
    received: int = 0
    expected: int = 0
    duplicates: int = 0  # frames received more than sent (must stay 0)
    drops: dict[str, Counter[str]] = field(default_factory=dict)  # class → path → frames
    lat: dict[str, dict[str, list[int]]] = field(default_factory=dict)  # class → path → ns
    cpu: float = 0.0
    load: str = ""
    load_end: str = ""
    counters: Counter[str] = field(default_factory=Counter)  # summed over the row's relays
    clean_receivers: int = 0  # senders that got every frame of every other sender
    probe_missing: list[int] = field(default_factory=list)  # per probe, frames it never got
    probe_replicas: list[int] = field(default_factory=list)  # per probe, the replica it sits on
    probe_cpu: list[tuple[float, float]] = field(default_factory=list)  # per probe: (CPU, waiting)
    sender_cpu: list[tuple[float, float]] = field(default_factory=list)  # per sender worker
    relay_wait: float = 0.0  # share of the row the relays' event loops waited for a CPU (summed)

    @property
    def senders(self) -> int:
        return self.seats - self.probes

    def causes(self) -> dict[str, Any]:
        """Frames not received, by where they went. The relays count the queue drops per frame
        and receiver; a mesh envelope lost is one frame for one receiver (owner → ingress
        fan-out) or for every receiver (ingress → owner), hence the bounds."""
        missing = self.expected - self.received
        queue = int(self.counters["frames:dropped"])
        flushed = int(self.counters["frames:flushed"])
        # A frame over its sender's budget (a sender catching up more than 2 s) reaches nobody.
        over_budget = int(self.counters["frames:over_budget"])
        mesh = int(sum(self.counters[f"mesh:{k}"] for k in MESH_LOSSES))
        rest = missing - queue - flushed - over_budget * (self.seats - 1)
        return {
            "missing": missing,
            "receiver_queue": queue,
            "flushed": flushed,
            "over_budget": over_budget,
            "mesh_envelopes_lost": mesh,
            "unaccounted_min": max(0, rest - mesh * (self.seats - 1)),
            "unaccounted_max": max(0, rest - mesh),
            "exact": mesh == 0 and rest >= 0,
            "duplicates": self.duplicates,
        }

    def probe_seat_drops(self) -> list[int | None]:
        """The relay's queue drops at each probe's seat: 0 when the probe got every frame (a
        dropped frame is never delivered); equal to what it missed when the row's balance
        closes exactly (every missing frame is a counted queue drop, and no receiver can miss
        fewer frames than its seat dropped); None (unknown) otherwise.

        With mesh losses the balance still closes when what the queues do not explain equals
        the envelopes lost: each cost one frame for one receiver, so all were owner → ingress
        fan-out envelopes (a lost ingress → owner envelope costs a frame for every receiver).
        A probe on the owner gets no fan-out envelope, so its misses are its seat's drops."""
        c = self.causes()
        rest = c["missing"] - c["receiver_queue"] - c["flushed"] - c["over_budget"] * (self.seats - 1)
        closes = rest == c["mesh_envelopes_lost"] and not self.duplicates and not c["over_budget"]
        exact = [closes and (c["mesh_envelopes_lost"] == 0 or r == OWNER) for r in self.probe_replicas]
        return [0 if m == 0 else (m if ok else None) for m, ok in zip(self.probe_missing, exact, strict=True)]

    def paths(self, cls: str) -> dict[str, dict[str, Any]]:
        lat, drops = self.lat.get(cls, {}), self.drops.get(cls, Counter())
        return {
            name: {"frames": len(v), "p50_ms": pct(v, 0.50), "p99_ms": pct(v, 0.99),
                   "max_ms": max(v) / 1e6 if v else float("nan"), "drops": drops[name]}
            for name, v in lat.items()
            if v or drops[name]
        }  # fmt: skip

    def remote_ratio(self, cls: str) -> tuple[float, float, float]:
        lat = self.lat.get(cls, {})
        local = pct(lat.get(LOCAL, []), 0.99)
        remote_v = lat.get(ONE_HOP, []) + lat.get(TWO_HOPS, [])
        remote = pct(remote_v, 0.99) if remote_v else float("nan")
        return local, remote, remote / local if local else float("nan")

    def cpu_per_frame_us(self) -> float:
        """The relays' CPU (all replicas) per frame a receiver got, in µs: less load-sensitive
        than latency, since waiting for a CPU costs none."""
        per_s = self.received / self.seconds
        return self.cpu / per_s * 1e6 if per_s else float("nan")

    def summary(self) -> dict[str, Any]:
        return {
            "replicas": self.replicas,
            "seats": self.seats,
            "senders": self.senders,
            "probes": self.probes,
            "sent": self.sent,
            "forwarded": self.received,
            "expected": self.expected,
            "forwarded_per_s": self.received / self.seconds,
            "drops": self.expected - self.received,
            "drop_causes": self.causes(),
            "senders_without_drops": self.clean_receivers,
            "relay_counters": dict(self.counters),
            "paths": {cls: self.paths(cls) for cls in (SENDERS, PROBES)},
            "remote_over_local_p99": {cls: self.remote_ratio(cls) for cls in (SENDERS, PROBES)},
            "probe_missing": self.probe_missing,
            "probe_seat_drops": self.probe_seat_drops(),
            "probe_cpu_cores": self.probe_cpu,
            "sender_worker_cpu_cores": self.sender_cpu,
            "relay_cpu_cores": self.cpu,
            "relay_cpu_us_per_forwarded_frame": self.cpu_per_frame_us(),
            "relay_runqueue_wait_share": self.relay_wait,
            "load_avg": self.load,
            "load_avg_end": self.load_end,
        }


def seats_of(n_replicas: int, args: argparse.Namespace) -> list[Peer]:
    """`args.peers` seats: `args.probes` listen-only probes per replica of the run's largest row
    (so that every row has the same seats and load; on one relay they all sit there), the rest
    senders alternating A, B, … (peer 0, on A, joins first and so makes A the owner)."""
    n_probes = args.probes * args.replicas
    senders = args.peers - n_probes
    if senders < 2:
        raise SystemExit(f"--peers {args.peers} leaves {senders} senders beside {n_probes} probes")
    peers = [Peer(i, i % n_replicas, generate_secret_key()) for i in range(senders)]
    for j in range(n_probes):
        peers.append(Peer(senders + j, j % n_replicas, generate_secret_key(), probe=True))
    return peers


def run_row(relays: list[Relay], args: argparse.Namespace) -> Row:
    procs, urls = [r.proc for r in relays], [r.url for r in relays]
    owner = generate_secret_key()
    cid = str(uuid.uuid4())
    asyncio.run(create_channel(urls[0], cid, owner))
    peers = seats_of(len(urls), args)
    senders = [p for p in peers if not p.probe]
    groups = [senders[i :: args.procs] for i in range(args.procs)] + [[p] for p in peers if p.probe]
    groups = [g for g in groups if g]
    ctx = mp.get_context("spawn")
    out: Any = ctx.Queue()
    # Joins one at a time, then all frames start together: every seat hears every frame, so a
    # missing frame is a drop, never a late join.
    sync = Sync(ctx.Event(), ctx.Lock(), ctx.Value("i", 0), ctx.Event(), ctx.Value("d", 0.0))
    workers = [
        ctx.Process(target=worker, args=(urls, cid, g, sync, args.seconds, args.rate, out)) for g in groups
    ]
    for p in workers:
        p.start()
    deadline = time.monotonic() + 90
    while sync.joined.value < len(peers):
        if time.monotonic() > deadline or any(p.exitcode not in (None, 0) for p in workers):
            for p in workers:
                p.kill()
            raise SystemExit(f"only {sync.joined.value} of {len(peers)} seats admitted; no row")
        time.sleep(0.05)
    sync.start_at.value = time.monotonic() + 1.0  # every seat is in: nobody misses a frame joining
    sync.go.set()
    time.sleep(max(0.0, sync.start_at.value - time.monotonic()))
    row = Row(len(urls), len(peers), len(peers) - len(senders), args.rate, args.seconds, load=load_avg())
    cpu0, t0 = sum(cpu_seconds(p.pid) for p in procs), time.monotonic()
    wait0 = sum(runqueue_seconds(p.pid) for p in procs)
    time.sleep(args.seconds)
    cpu1, t1 = sum(cpu_seconds(p.pid) for p in procs), time.monotonic()
    row.relay_wait = (sum(runqueue_seconds(p.pid) for p in procs) - wait0) / (t1 - t0)
    row.load_end = load_avg()
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
    row.lat = {cls: {LOCAL: [], ONE_HOP: [], TWO_HOPS: []} for cls in (SENDERS, PROBES)}
    row.drops = {SENDERS: Counter(), PROBES: Counter()}
    for s, g, lat, cpu_share, is_probe in results:
        sent.update(s)
        got.update(g)
        (row.probe_cpu if is_probe else row.sender_cpu).append(cpu_share)
        for name, values in lat.items():
            row.lat[PROBES if is_probe else SENDERS][name] += values
    by_number = {p.number: p for p in peers}
    for receiver in peers:
        cls = PROBES if receiver.probe else SENDERS
        missing = 0
        for sender, n in sent.items():
            if sender == receiver.number:
                continue
            have = got[(receiver.number, sender)]
            row.drops[cls][path_of(by_number[sender].replica, receiver.replica)] += max(0, n - have)
            missing += max(0, n - have)
            row.duplicates += max(0, have - n)
            row.expected += n
            row.received += min(n, have)
        if receiver.probe:
            row.probe_missing.append(missing)
            row.probe_replicas.append(receiver.replica)
        else:
            row.clean_receivers += missing == 0
    row.sent = sum(sent.values())
    for relay in relays:
        row.counters.update(scrape(relay))
    return row


def _verdict(ok: bool) -> str:
    return "met" if ok else "NOT MET"


def print_table(rows: list[Row]) -> None:
    print(f"\nhuddle fan-out bench — {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}")
    print(f"CPU: {os.cpu_count()} cores — load avg at each row's start and end in the last column")
    r0 = rows[0]
    print(
        f"{r0.seats} seats ({r0.senders} senders × {r0.rate} frames/s × {r0.seconds:g} s, "
        f"{r0.probes} listen-only probe(s), each in its own process) per row; latency = receive − send on loopback\n"
    )
    head = f"{'row':<11} {'receivers':<9} {'path':<14} {'frames':>9} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>7} {'drops':>7}"
    print(f"{head} {'fwd frames/s':>12} {'relay CPU':>9}  load")
    print("-" * 124)
    for row in rows:
        s = row.summary()
        first = True
        for cls in (SENDERS, PROBES):
            lead_cls = cls
            for name, p in row.paths(cls).items():
                lead = f"{row.replicas} replica{'s' if row.replicas > 1 else ''}" if first else ""
                tail = (f"{s['forwarded_per_s']:>12,.0f} {row.cpu:>9.2f}  {row.load} → {row.load_end}"
                        if first else "")  # fmt: skip
                print(f"{lead:<11} {lead_cls:<9} {name:<14} {p['frames']:>9,} {p['p50_ms']:>7.2f} "
                      f"{p['p99_ms']:>7.2f} {p['max_ms']:>7.1f} {p['drops']:>7,} {tail}")  # fmt: skip
                first, lead_cls = False, ""
    print("-" * 124)
    for row in rows:
        c = row.causes()
        name = f"{row.replicas} replica{'s' if row.replicas > 1 else ''}"
        if c["unaccounted_min"] == c["unaccounted_max"]:
            unacc = f"{c['unaccounted_max']:,}"
        else:
            unacc = f"{c['unaccounted_min']:,}–{c['unaccounted_max']:,}"
        mesh = f" + mesh envelopes lost {c['mesh_envelopes_lost']:,}" if row.replicas > 1 else ""
        if c["over_budget"]:
            mesh += f" + {c['over_budget']:,} frames over a sender's budget (× {row.seats - 1} receivers)"
        if (
            c["mesh_envelopes_lost"]
            and c["missing"] - c["receiver_queue"] - c["flushed"] - c["over_budget"] * (row.seats - 1)
            == c["mesh_envelopes_lost"]
        ):
            mesh += " (one frame for one receiver each: owner → ingress fan-out)"
        print(f"{name}: {c['missing']:,} not received = {c['receiver_queue']:,} shed at a receiver's "
              f"send queue + {c['flushed']:,} flushed (a leaver's){mesh} + {unacc} lost nowhere "
              f"accounted (target 0); duplicates {c['duplicates']}; {row.clean_receivers} of "
              f"{row.senders} senders got every frame")  # fmt: skip
        if row.replicas > 1:
            mc = ", ".join(
                f"{k[5:]} {int(v):,}" for k, v in sorted(row.counters.items()) if k.startswith("mesh:") and v
            )
            print(f"  mesh counters: {mc or 'all 0'}")
        seat = row.probe_seat_drops()
        for i, (m, cpu, d) in enumerate(zip(row.probe_missing, row.probe_cpu, seat, strict=False)):
            where = "ABCDEFGH"[i % row.replicas] if row.replicas > 1 else f"the relay ({i + 1})"
            print(f"  probe on {where}: missed {m:,}; relay queue drops at its seat "
                  f"{'unknown (mesh losses too)' if d is None else f'{d:,}'}; its process used "
                  f"{cpu[0]:.2f} core and waited for a CPU {cpu[1]:.0%} of the time")  # fmt: skip
        print(f"  sender workers: {len(row.sender_cpu)} processes, {sum(c for c, _ in row.sender_cpu):.2f} "
              f"cores in all; relays: {row.cpu:.2f} cores, event loops waited for a CPU "
              f"{row.relay_wait:.0%} of the time (summed over relays)")  # fmt: skip
        print(f"  relay CPU per forwarded frame: {row.cpu_per_frame_us():.1f} µs (all relays' CPU over "
              f"frames received)")  # fmt: skip
    single = rows[0]
    target = single.senders * (single.seats - 1) * single.rate
    s1 = single.summary()
    print(f"1 replica: forwarded {s1['forwarded_per_s']:,.0f}/s (target ≥ {target:,}), "
          f"drops {s1['drops']:,} (target 0), senders' p99 {s1['paths'][SENDERS][LOCAL]['p99_ms']:.2f} ms, "
          f"probe p99 {s1['paths'][PROBES].get(LOCAL, {}).get('p99_ms', float('nan')):.2f} ms (target < 5); "
          f"zero drops at the probe: {_verdict(sum(single.probe_missing) == 0)}")  # fmt: skip
    for row in rows[1:]:
        for cls, what in ((PROBES, "probes (keep up)"), (SENDERS, "senders")):
            local, remote, ratio = row.remote_ratio(cls)
            print(f"{row.replicas} replicas, {what}: remote p99 {remote:.2f} ms over local p99 {local:.2f} ms "
                  f"= {ratio:.2f}× (target ≤ 2×: {_verdict(ratio <= 2.0)})")  # fmt: skip
            for name in (ONE_HOP, TWO_HOPS):
                p = row.paths(cls).get(name)
                if p and local:
                    print(f"  {name}: p99 {p['p99_ms']:.2f} ms = {p['p99_ms'] / local:.2f}× local")
        c = row.causes()
        print(f"{row.replicas} replicas: zero drops for receivers that keep up (the probes): "
              f"{_verdict(sum(row.probe_missing) == 0)} ({sum(row.probe_missing):,} missed); "
              f"lost nowhere accounted 0: {_verdict(c['unaccounted_max'] == 0)}; "
              f"all receivers: {c['missing']:,} of {row.expected:,} not received")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--peers", type=int, default=25, help="seats in the room, probes included (cap 25)")
    ap.add_argument("--probes", type=int, default=1, help="listen-only probe seats per replica")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rate", type=int, default=50, help="frames per second per peer")
    ap.add_argument("--procs", type=int, default=6, help="worker processes for the senders")
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
