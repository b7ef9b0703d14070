#!/usr/bin/env python3
"""Ingest benchmark: BIP-340 verify rate vs buzz vs nostr-relay, side by side (issue 2 item 7).

Run by `make bench` (never by the tests). In one run it measures, on loopback only:

  (a) raw coincurve BIP-340 verify rate on one core, over the bench's own pre-signed events;
  (b) buzz EVENT→OK throughput (SQLite store) for N pre-signed events sent by C authenticated,
      pipelined connections;
  (c) the same for nostr-relay 1.14 from PyPI (its own venv, `.bench-venv`), in its fast
      configuration (LMDB storage + `--use-purple` server), falling back to its default one
      (SQLite + gunicorn/uvicorn) when the fast one cannot be started;

then REQ→EOSE latency p50/p95 for `{"authors":[a],"kinds":[1],"limit":10}` against each relay,
and prints a table with the ratios ours/verify-rate (target ≥ 0.5×) and ours/nostr-relay
(target ≥ 3×). With `--baseline REV` it also runs buzz as it was at git revision REV (built
into `.bench-baseline/<sha>/`, gitignored) with the same client and events, for issue 17's
"≥ 2× / ≥ 3× today" targets measured in the same run. See bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import io
import json
import math
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson
from coincurve import PublicKeyXOnly

from buzz.core.event import Event
from buzz.core.keys import generate_secret_key
from buzz.core.nip42 import build_auth_event

ROOT = Path(__file__).resolve().parent.parent
PEER_VERSION = "1.14"
PEER_FAST_DEPS = ["lmdb", "msgpack", "whoosh", "websockets<14"]
PEER_VALIDATORS = [
    "nostr_relay.validators.is_not_too_large",
    "nostr_relay.validators.is_signed",
    "nostr_relay.validators.is_recent",
    "nostr_relay.validators.is_not_hellthread",
]
PEER_SUBSCRIPTION_LIMIT = 32  # per connection; bench/fanout.py raises it for its idle-subscription row
BUZZ_MAX_AGE_S = 800  # buzz refuses created_at more than 900 s from its clock (relay.md §8 item 7)

STARTUP_TIMEOUT_S = 30.0
AUTH_TIMEOUT_S = 10.0
MSG_TIMEOUT_S = 10.0
VISIBLE_TIMEOUT_S = 60.0
VENV_TIMEOUT_S = 600.0


class BenchError(RuntimeError):
    pass


# -- machine facts -------------------------------------------------------------------------------
def cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def load_avg() -> str:
    with contextlib.suppress(OSError):
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    return "unknown"


def machine_facts() -> dict[str, Any]:
    return {
        "load_avg_start": load_avg(),
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "cpu": cpu_model(),
        "cores": os.cpu_count() or 1,
        "python": platform.python_version(),
    }


# -- workload --------------------------------------------------------------------------------------
@dataclass
class Conn:
    secret: str
    pubkey: str
    frames: list[str] = field(default_factory=list)  # pre-serialized ["EVENT", …]
    ids: list[str] = field(default_factory=list)


@dataclass
class Workload:
    conns: list[Conn]
    triples: list[tuple[bytes, bytes, bytes]]  # (x-only pubkey, sig, id) for the verify loop
    oldest: int
    n: int
    name: str = "kind 1"
    # Untimed phases run before the measured one on the same sockets, each phase's connections
    # in parallel, one phase after the other (channel creation, membership, seed messages).
    setup: list[list[Conn]] = field(default_factory=list)
    setup_window: list[int] = field(default_factory=list)
    mix: dict[str, int] = field(default_factory=dict)  # measured events per sort


def make_workload(n: int, c: int) -> Workload:
    """N kind 1 events, round-robin over C keys, created_at spread over the last 60 s."""
    conns = []
    for _ in range(c):
        sk = generate_secret_key()
        conns.append(Conn(sk, Event.create(sk, 1, "probe").pubkey))
    now = int(time.time())
    oldest = now - 60
    nonce = os.urandom(4).hex()
    triples = []
    for i in range(n):
        conn = conns[i % c]
        ev = Event.create(conn.secret, 1, f"bench {nonce} #{i}", [], oldest + (i * 60) // n)
        conn.frames.append(f'["EVENT",{ev.to_json()}]')
        conn.ids.append(ev.id)
        triples.append((bytes.fromhex(ev.pubkey), bytes.fromhex(ev.sig), bytes.fromhex(ev.id)))
    return Workload(conns, triples, oldest, n)


MIX_SHARES = (("message", 60), ("reply", 20), ("reaction", 15), ("edit", 5))  # percent
MIX_CHANNELS = 10
MIX_SEEDS_PER_MEMBER = 10  # seed messages per member and channel, stored before the timing


def _add(conn: Conn, ev: Event) -> Event:
    conn.frames.append(f'["EVENT",{ev.to_json()}]')
    conn.ids.append(ev.id)
    return ev


def make_mix_workload(n: int, c: int) -> Workload:
    """What a team sends: over MIX_CHANNELS open channels with all C members, N events split
    by MIX_SHARES — kind 9 channel messages (`h`), thread replies (kind 9 with `e` root/reply
    markers), reactions (kind 7 with `e` + `h`), edits (kind 40003 of the author's own message).

    Untimed setup first: member 0 creates every channel (9007) and adds the others (9000);
    then every member posts MIX_SEEDS_PER_MEMBER seed messages per channel. Replies, reactions
    and edits target seed messages only, so no measured event depends on another one's order.
    """
    from buzz.core.channel_id import new_channel_id

    members = []
    for _ in range(c):
        sk = generate_secret_key()
        members.append(Conn(sk, Event.create(sk, 1, "probe").pubkey))
    now = int(time.time())
    oldest = now - 60
    admin = [Conn(m.secret, m.pubkey) for m in members]
    seeds = [Conn(m.secret, m.pubkey) for m in members]
    channels = [new_channel_id() for _ in range(MIX_CHANNELS)]
    for ch in channels:
        _add(admin[0], Event.create(members[0].secret, 9007, "", [["h", ch], ["name", f"bench-{ch[:8]}"],
             ["visibility", "open"]], oldest))  # fmt: skip
        for m in members[1:]:
            _add(admin[0], Event.create(members[0].secret, 9000, "", [["h", ch], ["p", m.pubkey]], oldest))
    # seed[(member, channel)] = ids of that member's seed messages there
    seed: dict[tuple[int, int], list[str]] = {}
    for mi, m in enumerate(members):
        for ci, ch in enumerate(channels):
            seed[(mi, ci)] = [
                _add(seeds[mi], Event.create(m.secret, 9, f"seed {mi}/{ci}/{k}", [["h", ch]], oldest)).id
                for k in range(MIX_SEEDS_PER_MEMBER)
            ]
    sorts = [name for name, share in MIX_SHARES for _ in range(share)]
    mix = dict.fromkeys((name for name, _ in MIX_SHARES), 0)
    triples = []
    for i in range(n):
        mi, ci = i % c, (i // c) % MIX_CHANNELS
        m, ch, conn = members[mi], channels[ci], members[mi]
        sort = sorts[(i * 37) % len(sorts)]
        at = oldest + (i * 60) // n
        other = seed[((mi + 1) % c, ci)]
        target = other[i % len(other)]
        if sort == "message":
            ev = Event.create(m.secret, 9, f"message #{i} in {ch[:8]}", [["h", ch]], at)
        elif sort == "reply":
            ev = Event.create(m.secret, 9, f"reply #{i}", [["h", ch], ["e", target, "", "root"],
                              ["e", target, "", "reply"]], at)  # fmt: skip
        elif sort == "reaction":
            ev = Event.create(m.secret, 7, f"+{i}", [["h", ch], ["e", target]], at)
        else:
            own = seed[(mi, ci)]
            ev = Event.create(m.secret, 40003, f"edited #{i}", [["h", ch], ["e", own[i % len(own)]]], at)
        mix[sort] += 1
        _add(conn, ev)
        triples.append((bytes.fromhex(ev.pubkey), bytes.fromhex(ev.sig), bytes.fromhex(ev.id)))
    return Workload(members, triples, oldest, n, "workspace mix", [admin, seeds], [1, 128], mix)


# -- (a) verify rate --------------------------------------------------------------------------------
def verify_rate(triples: list[tuple[bytes, bytes, bytes]], min_seconds: float) -> float:
    """Single-thread `PublicKeyXOnly(pub).verify(sig, msg)` per event, as a relay must do."""
    done = 0
    t0 = time.perf_counter()
    while True:
        for pub, sig, msg in triples:
            if not PublicKeyXOnly(pub).verify(sig, msg):
                raise BenchError("a pre-made signature failed to verify")
        done += len(triples)
        elapsed = time.perf_counter() - t0
        if elapsed >= min_seconds:
            return done / elapsed


# -- relay processes ------------------------------------------------------------------------------
@dataclass
class RelayProc:
    name: str
    proc: subprocess.Popen[bytes]
    log_path: Path
    url: str = ""
    config: str = ""
    metrics_url: str = ""  # buzz: its /metrics listener (a free loopback port)

    def log_tail(self, lines: int = 15) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        return ""

    def stop(self) -> None:
        """SIGTERM the relay's process group (it was started in its own session), then SIGKILL."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=10)
        # Stragglers (nostr-relay's spawned workers) share the group; make sure they are gone.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)


def _spawn(
    name: str, argv: list[str], log_path: Path, cwd: Path, extra_env: dict[str, str] | None = None
) -> RelayProc:
    env = dict(os.environ, PYTHONUNBUFFERED="1", **(extra_env or {}))
    if "PYTHONPATH" in (extra_env or {}) and not env["PYTHONPATH"]:
        del env["PYTHONPATH"]  # an empty value still puts the working directory on sys.path
    log = open(log_path, "wb")  # noqa: SIM115 - the child owns it until it exits
    try:
        proc = subprocess.Popen(
            argv, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=env, start_new_session=True,
        )  # fmt: skip
    finally:
        log.close()
    return RelayProc(name, proc, log_path)


def start_buzz(
    tmp: Path,
    database_url: str | None = None,
    tag: str = "",
    buzz: Path | None = None,
    name: str = "buzz",
    redis: tuple[str, str] | None = None,
) -> RelayProc:
    """`buzz relay serve` on a free loopback port: SQLite in `tmp`, or `database_url` (PostgreSQL).

    `buzz` is the executable (default: this venv's; `--baseline` passes another venv's, and
    the child then runs without PYTHONPATH, which would otherwise import this tree's code
    ahead of the baseline's own). `redis` = (URL, workspace id): replica mode on that Redis."""
    data = tmp / f"buzz-data{tag}"
    data.mkdir(exist_ok=True)  # bench/query.py restarts a relay on the store it loaded
    baseline = buzz is not None
    buzz = buzz or Path(sys.executable).with_name("buzz")
    argv = [
        str(buzz),
        "relay",
        "serve",
        "--bind",
        "127.0.0.1:0",
        "--data-dir",
        str(data),
        "--log-level",
        "WARNING",
        "--metrics-bind",
        "127.0.0.1:0",
    ]
    if database_url:
        argv[argv.index("--data-dir") : argv.index("--data-dir")] = ["--db", database_url]
    extra_env = {"PYTHONPATH": ""} if baseline else {}
    if redis is not None:
        argv += ["--redis-url", redis[0]]
        extra_env["BUZZ_WORKSPACE_ID"] = redis[1]
    relay = _spawn(name, argv, tmp / f"buzz{tag}-{time.monotonic_ns()}.log", tmp, extra_env)
    relay.config = "PostgreSQL, one process" if database_url else "SQLite (synchronous=FULL), one process"
    if redis is not None:
        relay.config = "PostgreSQL + Redis, replica mode (one replica)"
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        log = relay.log_path.read_text(errors="replace")
        m = re.search(r"listening on (ws://\S+)", log)
        metrics = re.search(r"metrics:\s+(http://\S+/metrics)", log)
        if m and metrics:
            relay.url, relay.metrics_url = m.group(1), metrics.group(1)
            return relay
        if relay.proc.poll() is not None:
            break
        time.sleep(0.05)
    relay.stop()
    raise BenchError(f"{name} relay did not start:\n{relay.log_tail()}")


def group_cpu_s(pgid: int) -> float:
    """User+system CPU seconds of the live processes in process group `pgid` (from /proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid:  # fields[0] is field 3 (state) of proc(5)
            total += int(fields[11]) + int(fields[12])
    return total / tick


def thread_times(pid: int) -> dict[int, tuple[int, int]]:
    """Thread id → (ns on a CPU, ns runnable but waiting for one) of process `pid`'s threads."""
    out: dict[int, tuple[int, int]] = {}
    with contextlib.suppress(OSError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError, ValueError):
                on_cpu, waiting, _ = Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()
                out[int(tid)] = (int(on_cpu), int(waiting))
    return out


def thread_deltas(
    pid: int, before: dict[int, tuple[int, int]], after: dict[int, tuple[int, int]]
) -> list[tuple[float, float]]:
    """(CPU s, run-queue s) per thread busy in the window, the event loop (tid == pid) first."""
    rows = []
    for tid in sorted(after, key=lambda t: (t != pid, t)):
        cpu = (after[tid][0] - before.get(tid, (0, 0))[0]) / 1e9
        waited = (after[tid][1] - before.get(tid, (0, 0))[1]) / 1e9
        if cpu > 0.01 or tid == pid:
            rows.append((cpu, waited))
    return rows


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def _pip_install(venv: Path, packages: list[str]) -> bool:
    cmd = [str(_venv_python(venv)), "-m", "pip", "install", "-q", "--disable-pip-version-check", *packages]
    try:
        r = subprocess.run(cmd, capture_output=True, timeout=VENV_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        print(f"  pip install {' '.join(packages)}: timed out", file=sys.stderr)
        return False
    if r.returncode != 0:
        print(f"  pip install {' '.join(packages)} failed:\n{r.stderr.decode()[-2000:]}", file=sys.stderr)
    return r.returncode == 0


def _imports(venv: Path, modules: str) -> bool:
    r = subprocess.run(
        [str(_venv_python(venv)), "-c", f"import {modules}"], capture_output=True, timeout=60, check=False
    )
    return r.returncode == 0


def ensure_peer_venv(venv: Path) -> bool:
    """Create `venv` with nostr-relay (and its fast-config extras) if missing.

    Returns whether the fast configuration's modules import; raises BenchError when not even
    nostr-relay itself can be installed.
    """
    if not (_venv_python(venv).exists() and _imports(venv, "nostr_relay")):
        print(f"setting up {venv} (nostr-relay=={PEER_VERSION}) …", file=sys.stderr)
        if not _venv_python(venv).exists():
            r = subprocess.run(
                [sys.executable, "-m", "venv", str(venv)], capture_output=True, timeout=120, check=False
            )
            if r.returncode != 0:
                raise BenchError(f"cannot create {venv}: {r.stderr.decode()[-1000:]}")
        if not _pip_install(venv, [f"nostr-relay=={PEER_VERSION}"]):
            raise BenchError(f"cannot install nostr-relay into {venv}")
    fast = "lmdb, msgpack, whoosh, websockets"
    if not _imports(venv, fast):
        _pip_install(venv, PEER_FAST_DEPS)
    return _imports(venv, fast)


# -- the same-run baseline (--baseline REV) ----------------------------------------------------------
BASELINE_DIR = ROOT / ".bench-baseline"  # gitignored; one <full sha>/ per revision, reused


@dataclass
class Baseline:
    rev: str  # as given on the command line
    sha: str
    buzz: Path  # `buzz` in that revision's own venv
    built: bool  # False: an earlier run's build was reused
    seconds: float  # how long building (or checking the reused build) took
    notes: list[str]

    @property
    def label(self) -> str:
        return f"buzz@{self.sha[:7]}"


def _git(*args: str) -> bytes:
    r = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, timeout=120, check=False)
    if r.returncode != 0:
        raise BenchError(f"git {' '.join(args)} failed: {r.stderr.decode(errors='replace').strip()}")
    return r.stdout


def _pins() -> list[str]:
    """name==version of every distribution in this venv but buzz itself: the baseline gets the
    same aiohttp, uvloop, orjson, coincurve … so the two rows differ by buzz's code only."""
    from importlib.metadata import distributions

    pins = {}
    for d in distributions():
        name = d.metadata["Name"]
        if name and name.lower() != "buzz":
            pins[name.lower()] = f"{name}=={d.version}"
    return sorted(pins.values())


def ensure_baseline(rev: str) -> Baseline:
    """buzz at git revision `rev`, installed from the repository's own objects (`git archive`)
    into `.bench-baseline/<sha>/venv`; an existing complete build is reused."""
    sha = _git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}").decode().strip()
    home = BASELINE_DIR / sha
    venv, ready = home / "venv", home / "ready"  # `ready` is written last: a cut-short build is redone
    buzz = venv / "bin" / "buzz"
    t0 = time.monotonic()
    if ready.exists() and buzz.exists():
        return Baseline(rev, sha, buzz, False, time.monotonic() - t0, ready.read_text().splitlines())
    print(f"building the baseline buzz@{sha[:7]} into {home.relative_to(ROOT)} …", file=sys.stderr)
    shutil.rmtree(home, ignore_errors=True)
    tree = home / "tree"
    tree.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(_git("archive", "--format=tar", sha))) as tar:
        tar.extractall(tree, filter="data")
    r = subprocess.run(
        [sys.executable, "-m", "venv", str(venv)], capture_output=True, timeout=120, check=False
    )
    if r.returncode != 0:
        raise BenchError(f"cannot create {venv}: {r.stderr.decode()[-1000:]}")
    pins = home / "constraints.txt"
    pins.write_text("\n".join(_pins()) + "\n")
    notes = [f"dependencies pinned to this venv's versions ({pins.relative_to(ROOT)})"]
    # A plain (not editable) install: the baseline's code is its site-packages copy, whatever
    # happens to the tree. No extras: `buzz relay serve` needs none.
    if not _pip_install(venv, [str(tree), "-c", str(pins)]):
        notes = ["dependencies NOT pinned (the pinned install failed): resolved by pip afresh"]
        if not _pip_install(venv, [str(tree)]):
            raise BenchError(f"cannot install buzz@{sha[:7]} into {venv}")
    if not buzz.exists():
        raise BenchError(f"buzz@{sha[:7]} installed no `buzz` executable in {venv}")
    seconds = time.monotonic() - t0
    notes.append(f"built {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M UTC} in {seconds:.0f} s")
    ready.write_text("\n".join(notes) + "\n")
    return Baseline(rev, sha, buzz, True, seconds, notes)


def _peer_config(tmp: Path, port: int, fast: bool, workers: int) -> dict[str, Any]:
    quiet = {"level": "WARNING", "handlers": ["console"], "propagate": False}
    conf: dict[str, Any] = {
        "DEBUG": False,
        "relay_name": "bench peer",
        "relay_description": "nostr-relay under bench/ingest.py",
        "authentication": {"enabled": False},
        "verification": {"nip05_verification": "disabled", "expiration": 2592000, "update_frequency": 3600},
        "message_timeout": 1800,
        "subscription_limit": PEER_SUBSCRIPTION_LIMIT,
        "max_limit": 6000,
        "hellthread_limit": 100,
        "logging": {
            "version": 1,
            "formatters": {"simple": {"format": "%(asctime)s %(name)s %(levelname)s %(message)s"}},
            "handlers": {
                "console": {
                    "class": "logging.StreamHandler",
                    "formatter": "simple",
                    "stream": "ext://sys.stdout",
                }
            },
            "loggers": {"nostr_relay": quiet, "websockets.server": quiet, "sqlalchemy.engine": quiet},
            "root": {"level": "WARNING", "handlers": ["console"]},
        },
        "gunicorn": {"bind": f"127.0.0.1:{port}", "workers": 1, "loglevel": "warning", "reload": False},
    }
    if fast:
        # What `nostr-relay serve --try-fast` writes (LMDB, metasync off), with our path, port
        # and worker count, and the default validators of its shipped config.yaml.
        conf["storage"] = {
            "class": "nostr_relay.storage.kv.LMDBStorage",
            "path": str(tmp / "peer-lmdb"),
            "map_size": 1 << 30,
            "metasync": False,
            "validators": PEER_VALIDATORS,
        }
        conf["purple"] = {"host": "127.0.0.1", "port": port, "workers": workers, "disable_compression": True}
    else:
        conf["storage"] = {
            "sqlalchemy.url": f"sqlite+aiosqlite:///{tmp / 'peer.sqlite3'}",
            "num_concurrent_reqs": 10,
            "num_concurrent_adds": 2,
            "validators": PEER_VALIDATORS,
        }
    return conf


def start_peer(venv: Path, tmp: Path, fast: bool, workers: int) -> RelayProc:
    port = free_port()
    conf_path = tmp / ("peer-fast.yaml" if fast else "peer-default.yaml")
    conf_path.write_text(json.dumps(_peer_config(tmp, port, fast, workers), indent=2))  # JSON is YAML
    argv = [str(venv / "bin" / "nostr-relay"), "-c", str(conf_path), "serve"]
    if fast:
        argv.append("--use-purple")
    relay = _spawn("nostr-relay", argv, tmp / ("peer-fast.log" if fast else "peer-default.log"), tmp)
    relay.url = f"ws://127.0.0.1:{port}"
    w = workers or min(os.cpu_count() or 1, 4)
    relay.config = (
        f"nostr-relay {PEER_VERSION}: LMDB (metasync off) + --use-purple, {w} worker process(es)"
        if fast
        else f"nostr-relay {PEER_VERSION}: DEFAULT config (SQLite via SQLAlchemy + gunicorn/uvicorn, 1 worker)"
    )
    try:
        asyncio.run(_wait_ws(relay))
    except BaseException:
        relay.stop()
        raise
    return relay


async def _wait_ws(relay: RelayProc) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            if relay.proc.poll() is not None:
                break
            try:
                ws = await asyncio.wait_for(session.ws_connect(relay.url), 5)
                await ws.close()
                return
            except (aiohttp.ClientError, OSError, TimeoutError):
                await asyncio.sleep(0.2)
    raise BenchError(f"{relay.name} did not start on {relay.url}:\n{relay.log_tail()}")


PG_ADMIN_DSN = os.environ.get("BUZZ_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres")


def _pg_dsn(name: str) -> str:
    from urllib.parse import urlsplit, urlunsplit

    return urlunsplit(urlsplit(PG_ADMIN_DSN)._replace(path="/" + name))


async def pg_admin(sql: str) -> list[Any]:
    """Run one statement on PG_ADMIN_DSN (a connection of its own); its rows."""
    import asyncpg

    conn = await asyncpg.connect(PG_ADMIN_DSN, timeout=5)
    try:
        return await conn.fetch(sql)
    finally:
        await conn.close()


@contextlib.contextmanager
def pg_database() -> Any:
    """A fresh PostgreSQL database on PG_ADMIN_DSN for one relay; dropped on exit.

    Yields its DSN, or None (with the reason printed) when the server is unreachable."""
    import asyncpg

    name = f"buzz_bench_{os.urandom(6).hex()}"
    try:
        asyncio.run(pg_admin(f'CREATE DATABASE "{name}"'))
    except (OSError, asyncpg.PostgresError, TimeoutError) as exc:
        print(f"  PostgreSQL unreachable at {PG_ADMIN_DSN} ({exc}): PostgreSQL rows skipped", file=sys.stderr)
        yield None
        return
    try:
        yield _pg_dsn(name)
    finally:
        asyncio.run(pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


REDIS_URL = os.environ.get("BUZZ_BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")


@contextlib.contextmanager
def redis_workspace() -> Any:
    """(REDIS_URL, a fresh workspace id) for one replica-mode relay; its `buzz:<id>:` keys are
    deleted on exit. Yields None (with the reason printed) when Redis is unreachable."""
    from redis import Redis
    from redis.exceptions import RedisError

    workspace = f"bench-{os.urandom(6).hex()}"
    client = Redis.from_url(REDIS_URL, socket_timeout=5)
    try:
        client.ping()
    except (RedisError, OSError) as exc:
        print(f"  Redis unreachable at {REDIS_URL} ({exc}): replica-mode rows skipped", file=sys.stderr)
        client.close()
        yield None
        return
    try:
        yield REDIS_URL, workspace
    finally:
        keys = list(client.scan_iter(match=f"buzz:{workspace}:*"))
        if keys:
            client.delete(*keys)
        client.close()


def start_sdk(tmp: Path, tag: str = "") -> RelayProc:
    """nostr-sdk's Rust LocalRelay (bench/sdk_relay.py) in a child process, LMDB in `tmp`."""
    port = free_port()
    data = tmp / f"sdk-lmdb{tag}"
    data.mkdir()
    script = Path(__file__).with_name("sdk_relay.py")
    relay = _spawn(
        "nostr-sdk", [sys.executable, str(script), str(port), str(data)], tmp / f"sdk{tag}.log", tmp
    )
    relay.url = f"ws://127.0.0.1:{port}"
    import nostr_sdk

    version = getattr(nostr_sdk, "__version__", None) or _dist_version("nostr-sdk")
    relay.config = f"nostr-sdk {version} LocalRelay (Rust, in-process in its own Python process), NostrLmdb, rate limit lifted"
    try:
        asyncio.run(_wait_ws(relay))
    except BaseException:
        relay.stop()
        raise
    return relay


def _dist_version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "?"


# -- client side ------------------------------------------------------------------------------------
async def _recv_json(ws: aiohttp.ClientWebSocketResponse, timeout: float) -> list[Any]:
    msg = await asyncio.wait_for(ws.receive(), timeout)
    if msg.type != aiohttp.WSMsgType.TEXT:
        raise BenchError(f"connection ended: {msg.type.name} {msg.data!r} {msg.extra!r}")
    return orjson.loads(msg.data)


async def _send_auth(ws: aiohttp.ClientWebSocketResponse, url: str, secret: str, challenge: str) -> str:
    auth = build_auth_event(secret, challenge, url)
    await ws.send_str(f'["AUTH",{auth.to_json()}]')
    return auth.id


async def open_conn(
    session: aiohttp.ClientSession, url: str, secret: str, first_msg_wait: float
) -> aiohttp.ClientWebSocketResponse:
    """Connect; when the relay opens with ["AUTH", challenge] (buzz does), authenticate."""
    ws = await session.ws_connect(
        url, timeout=aiohttp.ClientWSTimeout(ws_close=5), max_msg_size=0, compress=0, autoping=True
    )
    try:
        first = await _recv_json(ws, first_msg_wait)
    except TimeoutError:
        return ws  # the relay did not ask for AUTH
    if first[0] != "AUTH":
        raise BenchError(f"unexpected first message from {url}: {first!r}")
    auth_id = await _send_auth(ws, url, secret, first[1])
    deadline = time.monotonic() + AUTH_TIMEOUT_S
    while True:
        msg = await _recv_json(ws, max(0.01, deadline - time.monotonic()))
        if msg[0] == "OK" and msg[1] == auth_id:
            if not msg[2]:
                raise BenchError(f"AUTH refused by {url}: {msg[3]!r}")
            return ws


@dataclass
class IngestResult:
    events_per_s: float
    wall_s: float
    accepted: int
    duplicates: int
    rejected: int
    first_reject: str | None
    visible_s: float  # first send → every connection's last event is returned by a REQ
    server_cpu_s: float  # the relay's processes, first send → last OK
    client_cpu_s: float  # this process, same window
    # The relay process's threads, in creation order (the event loop first): (CPU s, s waiting
    # for a CPU while runnable), same window, from /proc/PID/task/*/schedstat; empty without it.
    threads: list[tuple[float, float]] = field(default_factory=list)

    @property
    def visible_events_per_s(self) -> float:
        return 0.0 if self.visible_s <= 0 else self.accepted / self.visible_s


@dataclass
class _Tally:
    accepted: int = 0
    duplicates: int = 0
    rejected: int = 0
    first_reject: str | None = None
    last_ok: float = 0.0


async def _pump(
    ws: aiohttp.ClientWebSocketResponse, url: str, conn: Conn, window: int, tally: _Tally
) -> None:
    """Send this connection's events with at most `window` awaiting their OK; count the OKs."""
    credit = asyncio.Semaphore(window)
    pending = set(conn.ids)

    async def receive() -> None:
        try:
            await _receive()
        finally:
            for _ in range(window):  # never leave the sender blocked on credit
                credit.release()

    async def _receive() -> None:
        while pending:
            msg = await _recv_json(ws, MSG_TIMEOUT_S)
            kind = msg[0]
            if kind == "OK":
                eid = msg[1]
                if eid not in pending:
                    continue  # e.g. the OK of a mid-run AUTH
                pending.discard(eid)
                credit.release()
                if msg[2]:
                    tally.accepted += 1
                    if str(msg[3]).startswith("duplicate:"):
                        tally.duplicates += 1
                else:
                    tally.rejected += 1
                    tally.first_reject = tally.first_reject or str(msg[3])
            elif kind == "AUTH":  # a relay that asks later: answer, keep going
                await _send_auth(ws, url, conn.secret, msg[1])
            elif kind == "NOTICE":
                raise BenchError(f"NOTICE during ingest (an event got no OK): {msg[1]!r}")
        tally.last_ok = max(tally.last_ok, time.perf_counter())

    receiver = asyncio.create_task(receive())
    try:
        for frame in conn.frames:
            await credit.acquire()
            if receiver.done():
                break
            await ws.send_str(frame)
        await receiver
    finally:
        receiver.cancel()
        with contextlib.suppress(asyncio.CancelledError, BenchError):
            await receiver


async def _query_ids(ws: aiohttp.ClientWebSocketResponse, filt: dict[str, Any], sub: str) -> int:
    await ws.send_str(orjson.dumps(["REQ", sub, filt]).decode())
    n = 0
    while True:
        msg = await _recv_json(ws, MSG_TIMEOUT_S)
        if msg[0] == "EVENT" and msg[1] == sub:
            n += 1
        elif msg[0] == "EOSE" and msg[1] == sub:
            await ws.send_str(orjson.dumps(["CLOSE", sub]).decode())
            return n
        elif msg[0] == "CLOSED" and msg[1] == sub:
            raise BenchError(f"REQ {filt} refused: {msg[2]!r}")


async def run_ingest(
    url: str, pgid: int, wl: Workload, window: int, first_msg_wait: float, timeout: float
) -> IngestResult:
    async with aiohttp.ClientSession() as session:
        sockets = await asyncio.wait_for(
            asyncio.gather(*(open_conn(session, url, c.secret, first_msg_wait) for c in wl.conns)),
            timeout=AUTH_TIMEOUT_S + first_msg_wait + 5,
        )
        try:
            for phase, w in zip(wl.setup, wl.setup_window, strict=True):
                setup = _Tally()
                await asyncio.wait_for(
                    asyncio.gather(
                        *(
                            _pump(ws, url, c, w, setup)
                            for ws, c in zip(sockets, phase, strict=True)
                            if c.frames
                        )
                    ),
                    timeout=timeout,
                )
                want = sum(len(c.frames) for c in phase)
                if setup.accepted != want or setup.duplicates:
                    raise BenchError(
                        f"setup: {setup.accepted}/{want} accepted ({setup.duplicates} duplicates), "
                        f"first refusal {setup.first_reject!r}"
                    )
            tally = _Tally()
            cpu0, mine0, threads0 = group_cpu_s(pgid), time.process_time(), thread_times(pgid)
            t0 = time.perf_counter()
            await asyncio.wait_for(
                asyncio.gather(
                    *(_pump(ws, url, c, window, tally) for ws, c in zip(sockets, wl.conns, strict=True))
                ),
                timeout=timeout,
            )
            wall = tally.last_ok - t0
            server_cpu, client_cpu = group_cpu_s(pgid) - cpu0, time.process_time() - mine0
            threads = thread_deltas(pgid, threads0, thread_times(pgid))
            # How long until every event can be read back: each connection's last event is
            # its newest write (buzz answers OK after commit; nostr-relay's LMDB writer
            # thread commits after its OK).
            last_ids = [c.ids[-1] for c in wl.conns]
            filt = {"ids": last_ids, "authors": [c.pubkey for c in wl.conns]}
            deadline = time.monotonic() + VISIBLE_TIMEOUT_S
            i = 0
            while await _query_ids(sockets[0], filt, f"v{i}") < len(last_ids):
                if time.monotonic() > deadline:
                    raise BenchError("ingested events never became visible to REQ")
                i += 1
                await asyncio.sleep(0.01)
            visible = time.perf_counter() - t0
        finally:
            for ws in sockets:
                await ws.close()
    return IngestResult(
        wl.n / wall,
        wall,
        tally.accepted,
        tally.duplicates,
        tally.rejected,
        tally.first_reject,
        visible,
        server_cpu,
        client_cpu,
        threads,
    )


@dataclass
class ReqResult:
    p50_ms: float
    p95_ms: float
    mean_ms: float
    count: int
    events_per_req: int


def _pct(sorted_vals: list[float], p: float) -> float:
    """Nearest-rank percentile."""
    k = max(0, min(len(sorted_vals) - 1, math.ceil(p / 100 * len(sorted_vals)) - 1))
    return sorted_vals[k]


async def _check_rejects_bad_sig(ws: aiohttp.ClientWebSocketResponse, conn: Conn) -> None:
    """Both relays must really verify: an event with one flipped signature bit gets OK false."""
    ev = Event.create(conn.secret, 1, f"bad sig {os.urandom(4).hex()}")
    bad = ev.sig[:-1] + format(int(ev.sig[-1], 16) ^ 1, "x")
    d = ev.to_dict() | {"sig": bad}
    await ws.send_str(orjson.dumps(["EVENT", d]).decode())
    deadline = time.monotonic() + MSG_TIMEOUT_S
    while True:
        msg = await _recv_json(ws, max(0.01, deadline - time.monotonic()))
        if msg[0] == "OK" and msg[1] in (ev.id, ""):  # nostr-relay 1.14 answers this OK with id ""
            if msg[2]:
                raise BenchError("relay accepted an event with a bad signature: not a fair comparison")
            return


async def run_reqs(url: str, conn: Conn, count: int, warmup: int, first_msg_wait: float) -> ReqResult:
    """`count` sequential REQ→EOSE round trips (after `warmup` unmeasured ones) on one connection."""
    filt = {"authors": [conn.pubkey], "kinds": [1], "limit": 10}
    async with aiohttp.ClientSession() as session:
        ws = await asyncio.wait_for(
            open_conn(session, url, conn.secret, first_msg_wait), AUTH_TIMEOUT_S + first_msg_wait
        )
        try:
            lat: list[float] = []
            got = set()
            for i in range(warmup + count):
                t = time.perf_counter()
                n = await _query_ids(ws, filt, f"q{i}")
                if i >= warmup:
                    lat.append(time.perf_counter() - t)
                    got.add(n)
            await _check_rejects_bad_sig(ws, conn)
        finally:
            await ws.close()
    if got != {10}:
        raise BenchError(f"REQ limit 10 returned {sorted(got)} events, expected 10 every time")
    lat.sort()
    return ReqResult(_pct(lat, 50) * 1e3, _pct(lat, 95) * 1e3, sum(lat) / len(lat) * 1e3, count, 10)


# -- orchestration -----------------------------------------------------------------------------------
def bench_relay(
    relay: RelayProc, wl: Workload, args: argparse.Namespace, first_msg_wait: float, reqs: bool = True
) -> dict[str, Any]:
    age = time.time() - wl.oldest
    if age > BUZZ_MAX_AGE_S:
        raise BenchError(f"events are {age:.0f} s old; buzz would refuse them (clock window 900 s)")
    print(
        f"  {relay.name}: ingest {wl.n} events ({wl.name}) over {len(wl.conns)} connections …",
        file=sys.stderr,
    )
    ing = asyncio.run(run_ingest(relay.url, relay.proc.pid, wl, args.window, first_msg_wait, args.timeout))
    if ing.accepted != wl.n or ing.rejected or ing.duplicates:
        raise BenchError(
            f"{relay.name}: {ing.accepted}/{wl.n} accepted ({ing.duplicates} duplicates), {ing.rejected} "
            f"rejected (first: {ing.first_reject!r})\n{relay.log_tail()}"
        )
    row: dict[str, Any] = {"config": relay.config, "workload": wl.name, "ingest": ing, "load_avg": load_avg()}
    if reqs:
        print(f"  {relay.name}: {args.reqs} REQs …", file=sys.stderr)
        row["req"] = asyncio.run(run_reqs(relay.url, wl.conns[0], args.reqs, args.warmup, first_msg_wait))
    return row


# Rows in the order they run: (key, relay, workload); `peer` is nostr-relay, `sdk` nostr-sdk.
# `base` is buzz at --baseline REV, run right after buzz on the same workload (nearest in load).
ROWS = (
    ("buzz", "buzz", "kind1"),
    ("base", "buzz-base", "kind1"),
    ("buzz_pg", "buzz-pg", "kind1"),
    ("buzz_pg_rep", "buzz-pg-replica", "kind1"),
    ("peer", "nostr-relay", "kind1"),
    ("sdk", "nostr-sdk", "kind1"),
    ("buzz_mix", "buzz", "mix"),
    ("base_mix", "buzz-base", "mix"),
    ("buzz_pg_mix", "buzz-pg", "mix"),
    ("buzz_pg_rep_mix", "buzz-pg-replica", "mix"),
    ("peer_mix", "nostr-relay", "mix"),
    ("sdk_mix", "nostr-sdk", "mix"),
)


def _start_nostr_relay(
    venv: Path, tmp: Path, args: argparse.Namespace, fast_ok: bool, tag: str
) -> tuple[RelayProc, list[str]]:
    notes = []
    sub = tmp / f"peer{tag}"
    sub.mkdir()
    if args.peer_config == "default":
        notes.append("default config requested (--peer-config default)")
    elif fast_ok:
        try:
            return start_peer(venv, sub, True, args.peer_workers), notes
        except BenchError as exc:
            notes.append(f"fast config failed to start: {str(exc).splitlines()[0]}")
            print(f"  {exc}\n  falling back to nostr-relay's default config", file=sys.stderr)
    else:
        notes.append("fast config unavailable (lmdb/msgpack/whoosh/websockets<14 not importable)")
    return start_peer(venv, sub, False, args.peer_workers), notes


def run(args: argparse.Namespace) -> dict[str, Any]:
    facts = machine_facts()
    out: dict[str, Any] = {
        **facts,
        "events": args.events,
        "connections": args.connections,
        "window": args.window,
        "reqs": args.reqs,
    }
    venv = Path(args.peer_venv).resolve()
    fast_ok = False
    if not args.skip_peer:
        fast_ok = ensure_peer_venv(venv)  # before signing: pip may take a while
        if not fast_ok:
            print("nostr-relay fast-config modules missing; using its default config", file=sys.stderr)
    base = None
    if args.baseline:
        base = ensure_baseline(args.baseline)  # before signing, like the peer's venv: pip is slow
        how = "built" if base.built else "reused"
        print(f"baseline {base.label} ({base.sha}): {how} in {base.seconds:.1f} s", file=sys.stderr)
        out["baseline"] = {
            "rev": base.rev,
            "sha": base.sha,
            "label": base.label,
            "venv": str(base.buzz.parent.parent.relative_to(ROOT)),
            "built": base.built,
            "seconds": base.seconds,
            "notes": base.notes,
        }
    wanted = [r for r in ROWS if _wanted(r, args)]

    print(f"signing {args.events} events with {args.connections} keys …", file=sys.stderr)
    workloads = {"kind1": make_workload(args.events, args.connections)}
    print("verify rate (one core) …", file=sys.stderr)
    out["verify_per_s"] = verify_rate(workloads["kind1"].triples, args.verify_seconds)

    with tempfile.TemporaryDirectory(prefix="buzz-bench-") as tmpdir:
        tmp = Path(tmpdir)
        for key, relay_name, wl_name in wanted:
            if wl_name not in workloads:
                print(f"signing {args.events} workspace-mix events …", file=sys.stderr)
                workloads[wl_name] = make_mix_workload(args.events, args.connections)
                out["mix"] = workloads[wl_name].mix
            wl, tag = workloads[wl_name], f"-{key}"
            notes: list[str] = []
            if relay_name == "buzz":
                relay, wait = start_buzz(tmp, None, tag), AUTH_TIMEOUT_S
            elif relay_name == "buzz-base":
                assert base is not None  # _wanted keeps these rows only with --baseline
                relay, wait = start_buzz(tmp, None, tag, base.buzz, base.label), AUTH_TIMEOUT_S
            elif relay_name in ("buzz-pg", "buzz-pg-replica"):
                with pg_database() as url, contextlib.ExitStack() as stack:  # a fresh database per row
                    redis = (
                        stack.enter_context(redis_workspace()) if relay_name == "buzz-pg-replica" else None
                    )
                    if url is None or (relay_name == "buzz-pg-replica" and redis is None):
                        continue
                    relay = start_buzz(tmp, url, tag, redis=redis)
                    spy = _start_profiler(relay, args, key)
                    try:
                        out[key] = bench_relay(relay, wl, args, AUTH_TIMEOUT_S, wl_name == "kind1")
                    finally:
                        _stop_profiler(spy)
                        relay.stop()
                continue
            elif relay_name == "nostr-relay":
                relay, notes = _start_nostr_relay(venv, tmp, args, fast_ok, tag)
                wait = args.peer_auth_wait
            else:
                relay, wait = start_sdk(tmp, tag), args.peer_auth_wait
            spy = _start_profiler(relay, args, key)
            try:
                out[key] = bench_relay(relay, wl, args, wait, wl_name == "kind1")
                out[key]["notes"] = notes
            finally:
                _stop_profiler(spy)
                relay.stop()
    out["load_avg_end"] = load_avg()
    return out


def _start_profiler(relay: RelayProc, args: argparse.Namespace, key: str) -> subprocess.Popen[bytes] | None:
    """With --profile DIR: py-spy (from PyPI, in this venv) samples a buzz relay into
    DIR/<row>.collapsed (folded stacks, idle frames excluded) until the row ends."""
    if not args.profile or not relay.name.startswith("buzz"):
        return None
    spy = Path(sys.executable).with_name("py-spy")
    if not spy.exists():
        raise BenchError("--profile needs py-spy: .venv/bin/pip install py-spy")
    Path(args.profile).mkdir(parents=True, exist_ok=True)
    out = Path(args.profile) / f"{key}.collapsed"
    argv = [
        str(spy),
        "record",
        "-p",
        str(relay.proc.pid),
        "-f",
        "raw",
        "-o",
        str(out),
        "-r",
        "250",
        "--nonblocking",
        *os.environ.get("BENCH_PYSPY_ARGS", "").split(),  # e.g. "--threads --idle --gil"
    ]
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _stop_profiler(spy: subprocess.Popen[bytes] | None) -> None:
    if spy is None:
        return
    spy.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
    with contextlib.suppress(subprocess.TimeoutExpired):
        spy.wait(timeout=30)
    if spy.poll() is None:
        spy.kill()


def _wanted(row: tuple[str, str, str], args: argparse.Namespace) -> bool:
    _, relay, wl = row
    if wl == "mix" and args.skip_mix:
        return False
    if relay == "buzz-base" and not args.baseline:
        return False
    if relay.startswith("buzz-pg") and args.skip_pg:
        return False
    if relay == "buzz-pg-replica" and args.skip_replica:
        return False
    if relay in ("nostr-relay", "nostr-sdk") and args.skip_peer:
        return False
    return not (relay == "nostr-sdk" and args.skip_sdk)


# -- report -------------------------------------------------------------------------------------------
LABELS = {
    "buzz": "buzz SQLite",
    "buzz_pg": "buzz PostgreSQL",
    "peer": "nostr-relay",
    "sdk": "nostr-sdk LocalRelay",
    "buzz_mix": "buzz SQLite",
    "buzz_pg_mix": "buzz PostgreSQL",
    "buzz_pg_rep": "buzz PG replica",
    "buzz_pg_rep_mix": "buzz PG replica",
    "base": "buzz@REV SQLite",  # REV: the baseline's short sha (_label)
    "base_mix": "buzz@REV SQLite",
    "peer_mix": "nostr-relay",
    "sdk_mix": "nostr-sdk LocalRelay",
}


def _label(out: dict[str, Any], key: str) -> str:
    if key.startswith("base") and "baseline" in out:
        return LABELS[key].replace("buzz@REV", out["baseline"]["label"])
    return LABELS[key]


def _ratio_line(label: str, value: float | None, target: float | None) -> str:
    if value is None:
        return f"{label:<44}{'n/a':>10}"
    if target is None:
        return f"{label:<44}{value:>9.2f}×"
    verdict = "MET" if value >= target else "NOT MET"
    return f"{label:<44}{value:>9.2f}×  target ≥ {target:g}×  {verdict}"


def _rate(out: dict[str, Any], key: str) -> float | None:
    return out[key]["ingest"].events_per_s if key in out else None


def _div(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


def ratios(out: dict[str, Any]) -> dict[str, float | None]:
    b, mix = _rate(out, "buzz"), _rate(out, "buzz_mix")
    return {
        "buzz_over_verify": _div(b, out["verify_per_s"]),
        "buzz_over_peer": _div(b, _rate(out, "peer")),
        "buzz_over_sdk": _div(b, _rate(out, "sdk")),
        "buzz_pg_over_buzz": _div(_rate(out, "buzz_pg"), b),
        "buzz_pg_mix_over_buzz_mix": _div(_rate(out, "buzz_pg_mix"), mix),
        "buzz_pg_replica_over_buzz_pg": _div(_rate(out, "buzz_pg_rep"), _rate(out, "buzz_pg")),
        "mix_over_kind1": _div(mix, b),
        "mix_over_peer_mix": _div(mix, _rate(out, "peer_mix")),
        "mix_over_sdk_mix": _div(mix, _rate(out, "sdk_mix")),
        "req_p50_peer_over_buzz": _div(
            out["peer"]["req"].p50_ms if "peer" in out else None, out["buzz"]["req"].p50_ms
        ),
    }


def _cpu_per_event(out: dict[str, Any], key: str) -> float | None:
    return out[key]["ingest"].server_cpu_s / out["events"] if key in out else None


# Issue 17's ingest targets against the code when it was filed ("today"): run with
# --baseline ff98c5e for them. Each applies to EVENT→OK and to relay CPU per event alike.
BASELINE_TARGETS = {"kind1": 2.0, "mix": 3.0}
ISSUE17_SHA = "ff98c5eb088cfb1b92f3344abbf2e8809975ab7d"  # main when issue 17 was filed


def baseline_ratios(out: dict[str, Any]) -> dict[str, float | None]:
    """buzz over buzz@REV, same run: EVENT→OK rate ratio, and relay events per CPU-second
    ratio (the baseline's relay CPU per event over buzz's: > 1 means buzz spends less)."""
    res: dict[str, float | None] = {}
    for wl, cur, old in (("kind1", "buzz", "base"), ("mix", "buzz_mix", "base_mix")):
        res[f"{wl}_ok"] = _div(_rate(out, cur), _rate(out, old))
        res[f"{wl}_cpu"] = _div(_cpu_per_event(out, old), _cpu_per_event(out, cur))
    return res


def _baseline_lines(out: dict[str, Any]) -> list[str]:
    label = out["baseline"]["label"]
    rs = baseline_ratios(out)
    lines = []
    if out["baseline"]["sha"] != ISSUE17_SHA:
        lines.append(
            f"NOTE: {label} is not ff98c5e (issue 17's 'today'): the verdicts below compare with {label}"
        )
    for wl, name in (("kind1", "kind 1"), ("mix", "mix")):
        for metric, what in (("ok", "EVENT→OK"), ("cpu", "events per relay CPU-s")):
            v, target = rs[f"{wl}_{metric}"], BASELINE_TARGETS[wl]
            head = f"{name} {what}, buzz over {label}"
            if v is None:
                lines.append(f"{head:<54}{'n/a':>8}")
            else:
                verdict = "MET" if v >= target else "NOT MET"
                lines.append(f"{head:<54}{v:>7.2f}×  issue 17 target ≥ {target:g}×  {verdict}")
    return lines


TARGETS = {
    "buzz_over_verify": 0.5,
    "buzz_over_peer": 1.5,
    "req_p50_peer_over_buzz": 1.0,
    "buzz_pg_over_buzz": 0.6,  # issue 30 item 1
    "buzz_pg_mix_over_buzz_mix": 0.5,
}
REPLICA_CPU_TARGET = 0.10  # replica mode's extra relay CPU per event over PostgreSQL alone (issue 30)


def replica_cpu_extra(out: dict[str, Any]) -> dict[str, float | None]:
    """Relay CPU per event in replica mode over the same without Redis, minus 1, per workload."""
    res: dict[str, float | None] = {}
    for wl, rep, alone in (("kind1", "buzz_pg_rep", "buzz_pg"), ("mix", "buzz_pg_rep_mix", "buzz_pg_mix")):
        ratio = _div(_cpu_per_event(out, rep), _cpu_per_event(out, alone))
        res[wl] = None if ratio is None else ratio - 1
    return res


ABS_TARGETS = {"buzz": 10_500, "buzz_mix": 5_000}  # ev/s (issue 17 item 2)
CPU_TARGET_US = 90


def render(out: dict[str, Any]) -> str:
    lines = [
        f"buzz ingest bench — {out['date']}",
        f"CPU: {out['cpu']} — {out['cores']} cores — Python {out['python']} — "
        f"load avg {out['load_avg_start']} at start, {out['load_avg_end']} at end",
        f"N={out['events']} events per row, C={out['connections']} connections, window={out['window']} "
        f"in flight per connection, {out['reqs']} REQs",
    ]
    if "mix" in out:
        lines.append(
            f"workspace mix: {MIX_CHANNELS} channels × {out['connections']} members; "
            + ", ".join(f"{k} {v}" for k, v in out["mix"].items())
        )
    seen = set()
    for key, _, _ in ROWS:
        if key in out and (_label(out, key), out[key]["config"]) not in seen:
            seen.add((_label(out, key), out[key]["config"]))
            lines.append(f"  {_label(out, key)}: {out[key]['config']}")
            lines += [f"    NOTE: {n}" for n in out[key].get("notes", [])]
    if "baseline" in out:
        b = out["baseline"]
        how = "built" if b["built"] else "reused"
        lines.append(
            f"  baseline {b['label']}: git {b['rev']} = {b['sha']}, {b['venv']} {how} in {b['seconds']:.1f} s"
        )
        lines += [f"    {n}" for n in b["notes"]]
    lines += [
        "",
        f"{'workload / relay':<30}{'EVENT→OK':>12}{'queryable':>12}{'CPU/ev relay':>14}"
        f"{'client':>9}{'REQ p50/p95 ms':>17}  load",
        "-" * 110,
        f"{'coincurve verify, 1 core':<30}{out['verify_per_s']:>9,.0f}/s",
    ]
    for key, _, wl in ROWS:
        if key not in out:
            continue
        r, ing = out[key], out[key]["ingest"]
        req = f"{r['req'].p50_ms:.2f} / {r['req'].p95_ms:.2f}" if "req" in r else "—"
        name = f"{'kind 1' if wl == 'kind1' else 'mix'} {_label(out, key)}"
        lines.append(
            f"{name:<30}{ing.events_per_s:>9,.0f}/s{ing.visible_events_per_s:>9,.0f}/s"
            f"{ing.server_cpu_s / out['events'] * 1e6:>11.0f} µs{ing.client_cpu_s / out['events'] * 1e6:>6.0f} µs"
            f"{req:>17}  {r['load_avg']}"
        )
    lines.append("-" * 110)
    lines += _thread_lines(out)
    rs = ratios(out)
    for k, v in rs.items():
        lines.append(_ratio_line(k.replace("_", " "), v, TARGETS.get(k)))
    for wl, extra in replica_cpu_extra(out).items():
        if extra is not None:
            verdict = "MET" if extra <= REPLICA_CPU_TARGET else "NOT MET"
            lines.append(
                f"{'replica mode extra relay CPU/event, ' + wl:<44}{extra * 100:>+8.1f} %  "
                f"target ≤ {REPLICA_CPU_TARGET * 100:g} %  {verdict}"
            )
    if "baseline" in out:
        lines += _baseline_lines(out)
    for key, target in ABS_TARGETS.items():
        v = _rate(out, key)
        if v is not None:
            lines.append(
                f"{key + ' ev/s':<44}{v:>10,.0f}  target ≥ {target:,}  {'MET' if v >= target else 'NOT MET'}"
            )
    if "buzz" in out:
        cpu = out["buzz"]["ingest"].server_cpu_s / out["events"] * 1e6
        lines.append(
            f"{'buzz relay CPU per kind-1 event':<44}{cpu:>7.0f} µs  target ≤ {CPU_TARGET_US} µs  "
            f"{'MET' if cpu <= CPU_TARGET_US else 'NOT MET'}"
        )
    lines.append(
        "EVENT→OK: buzz answers after the commit (SQLite synchronous=FULL / PostgreSQL); nostr-relay "
        "answers before its LMDB writer commits; 'queryable' = until the last events are returned by a REQ."
    )
    return "\n".join(lines)


def _thread_lines(out: dict[str, Any]) -> list[str]:
    """Per buzz row: each relay thread's CPU per event and the share of the run it spent
    runnable but waiting for a CPU (a loaded machine, not the relay, holds it back then)."""
    lines = []
    for key, _, wl in ROWS:
        if key not in out or not key.startswith(("buzz", "base")) or not out[key]["ingest"].threads:
            continue
        ing = out[key]["ingest"]
        cells = [
            f"{cpu / out['events'] * 1e6:.0f} µs ({waited / ing.wall_s:.0%} waiting)"
            for cpu, waited in ing.threads
        ]
        name = f"{'kind 1' if wl == 'kind1' else 'mix'} {_label(out, key)}"
        lines.append(f"  {name} threads, loop first: " + ", ".join(cells))
    return lines


def to_json(out: dict[str, Any]) -> dict[str, Any]:
    def conv(v: Any) -> Any:
        if isinstance(v, IngestResult):
            return {**v.__dict__, "visible_events_per_s": v.visible_events_per_s}
        if isinstance(v, ReqResult):
            return dict(v.__dict__)
        if isinstance(v, dict):
            return {k: conv(x) for k, x in v.items()}
        return v

    res = conv(out)
    res["ratios"] = {**ratios(out), "targets": TARGETS, "absolute_targets_ev_s": ABS_TARGETS}
    res["replica_cpu_extra"] = {**replica_cpu_extra(out), "target": REPLICA_CPU_TARGET}
    if "baseline" in out:
        res["baseline"]["ratios"] = baseline_ratios(out)
        res["baseline"]["targets"] = BASELINE_TARGETS
    return res


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", "--events", type=int, default=10_000, help="events to ingest (2000–20000)")
    ap.add_argument("-c", "--connections", type=int, default=4, help="concurrent connections (1–16)")
    ap.add_argument(
        "--window",
        type=int,
        default=128,
        help="events in flight per connection (buzz answers NOTICE rate-limited past 1024 in flight)",
    )
    ap.add_argument("--reqs", type=int, default=500, help="measured sequential REQs per relay")
    ap.add_argument("--warmup", type=int, default=20, help="unmeasured REQs before those")
    ap.add_argument("--verify-seconds", type=float, default=2.0, help="minimum duration of the verify loop")
    ap.add_argument("--timeout", type=float, default=240.0, help="bound on one relay's ingest, seconds")
    ap.add_argument("--peer-venv", default=str(ROOT / ".bench-venv"), help="venv for nostr-relay")
    ap.add_argument(
        "--peer-workers",
        type=int,
        default=1,
        help="nostr-relay purple worker processes (1 as in its shipped config.yaml; 0 = min(cores, 4))",
    )
    ap.add_argument(
        "--peer-auth-wait",
        type=float,
        default=0.5,
        help="how long to wait for an AUTH challenge from nostr-relay after connecting",
    )
    ap.add_argument(
        "--peer-config",
        choices=("fast", "default"),
        default="fast",
        help="nostr-relay configuration: fast (LMDB + purple) or its default (SQLite + gunicorn)",
    )
    ap.add_argument("--skip-peer", action="store_true", help="do not run nostr-relay nor nostr-sdk")
    ap.add_argument("--skip-sdk", action="store_true", help="do not run nostr-sdk's LocalRelay")
    ap.add_argument("--skip-pg", action="store_true", help="no PostgreSQL rows for buzz")
    ap.add_argument("--skip-mix", action="store_true", help="no workspace-mix rows")
    ap.add_argument(
        "--skip-replica", action="store_true", help="no PostgreSQL + Redis (replica mode) rows for buzz"
    )
    ap.add_argument(
        "--baseline",
        metavar="REV",
        help="also run buzz as of git revision REV (SQLite, kind 1 and mix rows, same client and "
        "events) and print buzz over it beside issue 17's targets (ff98c5e: the code when it was "
        "filed; kind 1 ≥ 2×, mix ≥ 3×); built once into .bench-baseline/<sha>/ (gitignored), then reused",
    )
    ap.add_argument(
        "--profile", metavar="DIR", help="sample the buzz relays with py-spy into DIR/<row>.collapsed"
    )
    ap.add_argument("--json", metavar="OUT.json", help="also write the results as JSON")
    args = ap.parse_args(argv)
    if not 2000 <= args.events <= 20_000:
        ap.error("--events must be between 2000 and 20000")
    if not 1 <= args.connections <= 16:
        ap.error("--connections must be between 1 and 16")
    if not 1 <= args.window * args.connections <= 1000:
        ap.error("--window × --connections must be between 1 and 1000 (buzz's handler cap is 1024)")
    if not 10 <= args.reqs <= 5000:
        ap.error("--reqs must be between 10 and 5000")
    return args


def _terminate(signum: int, _frame: Any) -> None:
    raise SystemExit(128 + signum)  # unwinds through the `finally` blocks that stop the relays


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGHUP, _terminate)
    try:
        out = run(args)
    except BenchError as exc:
        print(f"bench failed: {exc}", file=sys.stderr)
        return 1
    except TimeoutError:
        print("bench failed: a relay did not answer in time", file=sys.stderr)
        return 1
    except (KeyboardInterrupt, SystemExit):
        print("bench interrupted (relays stopped)", file=sys.stderr)
        return 130
    print(render(out))
    if args.json:
        Path(args.json).write_text(json.dumps(to_json(out), indent=2) + "\n")
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
