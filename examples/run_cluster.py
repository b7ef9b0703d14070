#!/usr/bin/env python3
"""`make run-cluster`: two relay replicas on this machine, to try huddles across replicas.

Both replicas run `buzz relay serve` with BUZZ_MESH=on on one PostgreSQL database and one Redis
(huddle.md §9; README "Run several replicas"): replica A on 127.0.0.1:3000, replica B on
127.0.0.1:3001 by default, sharing one relay key (kept in `<data-dir>/relay.key`, so a restart
keeps it) and one workspace id. The database is created when missing (PostgreSQL with trust auth
on 127.0.0.1:5432 by default). Redis must already answer (the command that starts it is printed
when it does not). Ctrl-C sends SIGTERM to both replicas, which drain (huddle peers get a clear
close, their room leases are released) and exit; then this script exits.

Exit codes: 0 after Ctrl-C, 1 when PostgreSQL or Redis is unreachable or a replica exits on
its own.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

REDIS_HINT = 'redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no'
PG_HINT = "pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start"
STOP_TIMEOUT_S = 20


def fail(message: str) -> None:
    print(f"run-cluster: {message}", file=sys.stderr)
    raise SystemExit(1)


async def ensure_database(admin_dsn: str, name: str) -> str:
    """CREATE DATABASE `name` unless it exists; returns its DSN."""
    import asyncpg

    try:
        conn = await asyncpg.connect(admin_dsn, timeout=5)
    except (OSError, asyncpg.PostgresError, TimeoutError) as exc:
        fail(f"PostgreSQL unreachable at {admin_dsn} ({exc}); start it with: {PG_HINT}")
    try:
        if not await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name):
            await conn.execute(f'CREATE DATABASE "{name}"')
            print(f"run-cluster: created database {name}")
    finally:
        await conn.close()
    return urlunsplit(urlsplit(admin_dsn)._replace(path="/" + name))


async def check_redis(url: str) -> None:
    from redis.asyncio import Redis
    from redis.exceptions import RedisError

    client = Redis.from_url(url, socket_connect_timeout=2)
    try:
        await client.ping()
    except (RedisError, OSError) as exc:
        fail(f"Redis unreachable at {url} ({exc}); start it with: {REDIS_HINT}")
    finally:
        await client.aclose()


def relay_key(data_dir: Path) -> str:
    """The replicas' shared relay key, generated once into `<data_dir>/relay.key` (mode 0600)."""
    path = data_dir / "relay.key"
    if path.exists():
        return path.read_text().strip()
    from buzz.core.keys import generate_secret_key

    key = generate_secret_key()
    data_dir.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600)
    path.write_text(key + "\n")
    return key


def pipe_banner(name: str, stream: object) -> None:
    for line in stream:  # type: ignore[attr-defined]
        print(f"[{name}] {line}", end="", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ports", default="3000,3001", help="replica A's and B's ports on 127.0.0.1")
    ap.add_argument("--data-dir", default="./buzz-cluster", help="relay key, per-replica data and logs")
    ap.add_argument("--database", default="buzz_cluster", help="PostgreSQL database (created if missing)")
    ap.add_argument("--pg-admin", default="postgresql://postgres@127.0.0.1:5432/postgres")
    ap.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    ap.add_argument("--workspace", default="cluster", help="BUZZ_WORKSPACE_ID (Redis key prefix)")
    args = ap.parse_args()

    ports = [int(p) for p in args.ports.split(",")]
    if len(ports) != 2:
        fail("--ports takes two ports, e.g. 3000,3001")
    data_dir = Path(args.data_dir).resolve()
    dsn = asyncio.run(ensure_database(args.pg_admin, args.database))
    asyncio.run(check_redis(args.redis_url))
    buzz = str(Path(sys.executable).with_name("buzz"))
    base = {k: v for k, v in os.environ.items() if not k.startswith(("BUZZ_", "RELAY_"))}
    env = {**base, "BUZZ_MESH": "on", "BUZZ_WORKSPACE_ID": args.workspace,
           "BUZZ_RELAY_PRIVATE_KEY": relay_key(data_dir)}  # fmt: skip

    procs: list[subprocess.Popen[str]] = []
    stopping = threading.Event()

    def stop(*_: object) -> None:
        stopping.set()

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    try:
        for name, port in zip("ab", ports, strict=True):
            log = open(data_dir / f"replica-{name}.log", "ab")  # noqa: SIM115 (the child keeps it)
            proc = subprocess.Popen(
                [buzz, "relay", "serve", "--bind", f"127.0.0.1:{port}", "--data-dir",
                 str(data_dir / f"replica-{name}"), "--db", dsn, "--redis-url", args.redis_url],
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                env=env,
                start_new_session=True,  # Ctrl-C reaches this script only: it drains both in order
            )  # fmt: skip
            procs.append(proc)
            assert proc.stdout is not None
            first = proc.stdout.readline()  # "listening on …": the replica is up
            if not first:
                fail(f"replica {name} did not start; see {data_dir}/replica-{name}.log")
            print(f"[{name}] {first}", end="", flush=True)
            threading.Thread(target=pipe_banner, args=(name, proc.stdout), daemon=True).start()
        print(
            f"\nrun-cluster: two replicas, BUZZ_MESH=on, database {args.database}, Redis {args.redis_url}\n"
            f"  replica A: ws://127.0.0.1:{ports[0]}  (browser: http://127.0.0.1:{ports[0]})\n"
            f"  replica B: ws://127.0.0.1:{ports[1]}  (browser: http://127.0.0.1:{ports[1]})\n"
            f"  logs: {data_dir}/replica-a.log, replica-b.log — Ctrl-C stops both\n",
            flush=True,
        )
        while not stopping.wait(0.5):
            for name, proc in zip("ab", procs, strict=True):
                if proc.poll() is not None:
                    print(
                        f"run-cluster: replica {name} exited ({proc.returncode}); stopping", file=sys.stderr
                    )
                    stopping.set()
                    break
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    codes = [p.returncode for p in procs]
    print(f"run-cluster: both replicas stopped (exit codes {codes[0]}, {codes[1]})")
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    crashed = any(c not in (0, -signal.SIGTERM) for c in codes)
    raise SystemExit(1 if crashed else 0)


if __name__ == "__main__":
    main()
