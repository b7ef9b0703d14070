"""Client worker processes for the fan-out and connection benches (bench/fanout.py,
bench/connections.py): many WebSocket connections spread over several processes, so that the
bench client is not the bottleneck, each process reporting its own CPU.

A worker is a forked process driven over a `multiprocessing` pipe with small dicts:
  parent → {"op": "open", "url", "n", "first_msg_wait", "subs": [filter, …] per connection}
  worker → {"op": "opened", "connect_s": [seconds per connection], "cpu_s"}
  parent → {"op": "collect", "expect": events per connection, "timeout"}
  worker → {"op": "collected", "arrivals": {event id: [perf_counter, …]}, "short": connections
            that got fewer than `expect`, "cpu_s"}
  parent → {"op": "close"} → worker closes its sockets and exits.
`time.perf_counter` is CLOCK_MONOTONIC, the same clock in every process of the machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing as mp
import os
import sys
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

import aiohttp
import orjson

from buzz.core.keys import generate_secret_key

try:  # the relay's own loop (`buzz relay serve`): the client costs less CPU per message on it
    from uvloop import run as _run
except ImportError:  # pragma: no cover - uvloop is a dependency of buzz
    _run = asyncio.run

CLIENT_NICE = 10  # the client processes' niceness (the relay runs at the bench's own)
OPEN_CONCURRENCY = 16  # handshakes in flight per worker
EOSE_TIMEOUT_S = 60.0


def _cpu() -> float:
    return time.process_time()


async def _open_one(session: aiohttp.ClientSession, url: str, wait: float, subs: list[dict[str, Any]]) -> Any:
    import ingest  # bench/ingest.py: open_conn answers the relay's AUTH challenge

    t0 = time.perf_counter()
    ws = await ingest.open_conn(session, url, generate_secret_key(), wait)
    elapsed = time.perf_counter() - t0
    # One REQ at a time per connection: the relay refuses (NOTICE) past 1,024 handlers in flight.
    for i, filt in enumerate(subs):
        await ws.send_str(orjson.dumps(["REQ", f"s{i}", filt]).decode())
        while True:
            msg = await ingest._recv_json(ws, EOSE_TIMEOUT_S)
            if msg[0] == "EOSE":
                break
            if msg[0] in ("CLOSED", "NOTICE"):
                raise ingest.BenchError(f"subscription refused: {msg!r}")
    return ws, elapsed


async def _bounded(
    sem: asyncio.Semaphore, session: aiohttp.ClientSession, url: str, wait: float, subs: list[dict[str, Any]]
) -> Any:
    async with sem:
        return await _open_one(session, url, wait, subs)


async def _worker(pipe: Connection) -> None:
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        sockets: list[Any] = []
        while True:
            cmd = await asyncio.get_running_loop().run_in_executor(None, pipe.recv)
            if cmd["op"] == "open":
                cpu0 = _cpu()
                sem = asyncio.Semaphore(OPEN_CONCURRENCY)
                try:
                    # A task group: the first failure cancels the handshakes still queued, so a
                    # relay that stops answering fails the step after one EOSE timeout, not one
                    # per round of OPEN_CONCURRENCY handshakes.
                    async with asyncio.TaskGroup() as tg:
                        tasks = [
                            tg.create_task(_bounded(sem, session, cmd["url"], cmd["first_msg_wait"], s))
                            for s in cmd["subs"]
                        ]
                except Exception as exc:  # reported, the parent fails the run
                    import traceback

                    pipe.send({"op": "error", "error": "".join(traceback.format_exception(exc))[-1500:]})
                    continue
                opened = [t.result() for t in tasks]
                sockets += [ws for ws, _ in opened]
                pipe.send({"op": "opened", "connect_s": [t for _, t in opened], "cpu_s": _cpu() - cpu0})
            elif cmd["op"] == "collect":
                cpu0 = _cpu()
                arrivals: dict[str, list[float]] = {}
                counts = await asyncio.gather(
                    *(_collect(ws, cmd["expect"], cmd["timeout"], arrivals) for ws in sockets)
                )
                short = sum(1 for c in counts if c < cmd["expect"])
                pipe.send({"op": "collected", "arrivals": arrivals, "short": short, "cpu_s": _cpu() - cpu0})
            elif cmd["op"] == "close":
                await asyncio.gather(*(ws.close() for ws in sockets), return_exceptions=True)
                pipe.send({"op": "closed"})
                return


async def _collect(ws: Any, expect: int, timeout: float, arrivals: dict[str, list[float]]) -> int:
    """Count EVENTs on `ws` until `expect` or `timeout`. One deadline for the whole wait, not
    one per message: `asyncio.wait_for` wraps each receive in a task of its own (Python 3.11),
    which cost the client more CPU per delivery than the relay spends."""
    got = 0
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout):
            while got < expect:
                msg = await ws.receive()
                now = time.perf_counter()
                if msg.type != aiohttp.WSMsgType.TEXT:
                    break
                data = orjson.loads(msg.data)
                if data[0] == "EVENT":
                    arrivals.setdefault(data[2]["id"], []).append(now)
                    got += 1
    return got


def _main(pipe: Connection) -> None:
    # Below the relay under test: on 2 shared cores the load generator must not take the CPU the
    # relay needs to hand its frames over (each worker's own CPU is still reported).
    os.nice(CLIENT_NICE)
    try:
        _run(_worker(pipe))
    finally:
        pipe.close()
        os._exit(0)


class Workers:
    """`count` forked worker processes; `open`, `collect`, then `close` (also on errors)."""

    def __init__(self, count: int) -> None:
        ctx = mp.get_context("fork")
        self.pipes: list[Connection] = []
        self.procs: list[Any] = []
        for _ in range(count):
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_main, args=(child,), daemon=True)
            proc.start()
            child.close()
            self.pipes.append(parent)
            self.procs.append(proc)

    def _ask(self, cmds: list[dict[str, Any]], timeout: float) -> list[dict[str, Any]]:
        import ingest

        for pipe, cmd in zip(self.pipes, cmds, strict=True):
            pipe.send(cmd)
        out = []
        for pipe in self.pipes:
            if not pipe.poll(timeout):
                raise ingest.BenchError(
                    f"a client worker did not answer {cmds[0]['op']!r} in {timeout:.0f} s"
                )
            reply = pipe.recv()
            if reply["op"] == "error":
                raise ingest.BenchError(f"client worker: {reply['error']}")
            out.append(reply)
        return out

    def open(
        self, url: str, subs: list[list[dict[str, Any]]], first_msg_wait: float, timeout: float
    ) -> list[dict[str, Any]]:
        """Spread connections (one list of filters each) round-robin over the workers."""
        shares: list[list[list[dict[str, Any]]]] = [[] for _ in self.pipes]
        for i, s in enumerate(subs):
            shares[i % len(shares)].append(s)
        return self._ask(
            [{"op": "open", "url": url, "subs": sh, "first_msg_wait": first_msg_wait} for sh in shares],
            timeout,
        )

    def collect(self, expect: int, timeout: float) -> list[dict[str, Any]]:
        return self._ask(
            [{"op": "collect", "expect": expect, "timeout": timeout}] * len(self.pipes), timeout + 30
        )

    def start_collect(self, expect: int, timeout: float) -> None:
        """Workers start counting deliveries; `finish_collect` gathers their answers."""
        for pipe in self.pipes:
            pipe.send({"op": "collect", "expect": expect, "timeout": timeout})

    def finish_collect(self, timeout: float) -> list[dict[str, Any]]:
        import ingest

        out = []
        for pipe in self.pipes:
            if not pipe.poll(timeout):
                raise ingest.BenchError(f"a client worker did not finish collecting in {timeout:.0f} s")
            out.append(pipe.recv())
        return out

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._ask([{"op": "close"}] * len(self.pipes), 30)
        for proc in self.procs:
            proc.join(5)
            if proc.is_alive():
                proc.kill()
                proc.join(5)

    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]


def rss_kib(pid: int) -> int:
    """VmRSS of one process, KiB (from /proc)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def group_rss_kib(pgid: int) -> int:
    """Sum of VmRSS over the live processes of process group `pgid`, KiB."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.getpgid(int(entry)) == pgid:
                total += rss_kib(int(entry))
        except (OSError, ValueError):
            continue
    return total


def short_error(exc: BaseException) -> str:
    """`Type: last non-empty line` of an exception (a worker's traceback ends with its cause)."""
    last = [line for line in str(exc).splitlines() if line.strip()][-1:] or [""]
    return f"{type(exc).__name__}: {last[0]}"


def buzz_then_peer(
    args: Any, prefix: str, bench: Any, max_connections: int
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Run `bench(relay, args, auth_wait)` against buzz, then (unless `args.skip_peer`) against
    nostr-relay, each in a fresh data dir, with buzz's connection cap raised to
    `max_connections` for the run. Returns (buzz result, peer result or None)."""
    import tempfile
    from pathlib import Path

    import ingest

    venv = Path(args.peer_venv).resolve()
    fast_ok = False if args.skip_peer else ingest.ensure_peer_venv(venv)
    before = os.environ.get("BUZZ_MAX_CONNECTIONS")
    os.environ["BUZZ_MAX_CONNECTIONS"] = str(max_connections)
    peer_result: dict[str, Any] | None = None
    try:
        with tempfile.TemporaryDirectory(prefix=prefix) as tmpdir:
            tmp = Path(tmpdir)
            relay = ingest.start_buzz(tmp)
            try:
                buzz_result = bench(relay, args, ingest.AUTH_TIMEOUT_S)
            finally:
                relay.stop()
            if not args.skip_peer:
                peer = ingest.start_peer(venv, tmp, fast_ok, args.peer_workers)
                try:
                    peer_result = bench(peer, args, 0.05)
                except Exception as exc:  # the yardstick failing must not lose buzz's figures
                    buzz_result["peer_error"] = short_error(exc)
                    print(f"  nostr-relay failed, its rows are left out: {exc!r}", file=sys.stderr)
                finally:
                    peer.stop()
    finally:
        if before is None:
            os.environ.pop("BUZZ_MAX_CONNECTIONS", None)
        else:
            os.environ["BUZZ_MAX_CONNECTIONS"] = before
    return buzz_result, peer_result


# -- the report every bench prints (connections, fanout, query) ------------------------------------
def report_head(title: str, out: dict[str, Any], tail: str = "") -> list[str]:
    """The first two lines of a bench report: `buzz <title> bench — <date>` and the machine
    (CPU, cores, load average at start and end of the run), `tail` appended to the latter."""
    return [
        f"buzz {title} bench — {out['date']}",
        f"CPU: {out['cpu']} — {out['cores']} cores — load avg {out['load_avg_start']} at start, "
        f"{out['load_avg_end']} at end{tail}",
    ]


def relays_of(out: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The report's relays in order: ("buzz", its results), then ("nostr-relay", …) if it ran."""
    return [("buzz", out["buzz"])] + ([("nostr-relay", out["peer"])] if "peer" in out else [])


def config_lines(out: dict[str, Any], detail: Callable[[dict[str, Any]], str] = lambda r: "") -> list[str]:
    """`  <relay>: <config><detail(results)>` for each relay, then the line saying the
    yardstick failed (and its rows are left out) if it did."""
    lines = [f"  {name}: {r['config']}{detail(r)}" for name, r in relays_of(out)]
    if "peer_error" in out["buzz"]:
        lines.append(f"  nostr-relay: FAILED ({out['buzz']['peer_error']}); its rows are left out")
    return lines


def table(header: str, rows: list[str], width: int | None = None) -> list[str]:
    """A blank line, `header`, a rule of `width` dashes (default: the header's length), the
    rows, the rule again."""
    rule = "-" * (len(header) if width is None else width)
    return ["", header, rule, *rows, rule]


def bench_main(args: Any, run: Any, render: Any) -> int:
    """The end of every bench's `main`: `run(args)` → the results; they are written to
    `--json` (if given) before `render(results)` is printed, so a report that fails keeps its
    numbers. A `BenchError` is one line on stderr and exit 1."""
    import json
    from pathlib import Path

    import ingest

    try:
        out = run(args)
    except ingest.BenchError as exc:
        print(f"bench failed: {exc}", file=sys.stderr)
        return 1
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2, default=str) + "\n")
    print(render(out))
    if args.json:
        print(f"\nwrote {args.json}")
    return 0
