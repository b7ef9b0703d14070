#!/usr/bin/env python3
"""Idle-connection benchmark: relay RSS and per-connection memory, connect+AUTH latency,
buzz vs nostr-relay (issue 17 item 1).

Run by `make bench` (never by the tests), loopback only. Connections are opened in steps
(default up to 1,000, 5,000, 10,000 in all) by W forked client processes (bench/clients.py),
each one authenticated when the relay asks (buzz sends a NIP-42 challenge on connect; nostr-relay
in this configuration does not) and then left idle. After each step: the relay's RSS (VmRSS
summed over its process group), (RSS − RSS before the first connection) / connections, and the
p50/p95 of connect (+ AUTH) latency within the step. Every connection of a step must complete
its handshake (asserted: a failed or refused one fails the run). buzz runs twice, on its lean
WebSocket layer (the default) and on aiohttp's (`BUZZ_WEBSOCKET_LAYER=aiohttp`, issue 30 item 2),
so the two layers are compared in the same run. See bench/README.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import clients
import ingest

OPEN_TIMEOUT_S = 600.0
SETTLE_S = 1.0  # after a step, before reading RSS


def bench(relay: ingest.RelayProc, args: argparse.Namespace, wait: float) -> dict[str, Any]:
    time.sleep(SETTLE_S)
    base = clients.group_rss_kib(relay.proc.pid)
    out: dict[str, Any] = {"config": relay.config, "rss_idle_kib": base, "steps": []}
    workers = clients.Workers(args.workers)
    try:
        total = 0
        for target in args.steps:
            n = target - total
            print(f"  {relay.name}: {n} more connections ({target} in all) …", file=sys.stderr)
            t0 = time.perf_counter()
            replies = workers.open(relay.url, [[] for _ in range(n)], wait, OPEN_TIMEOUT_S)
            wall = time.perf_counter() - t0
            lat = sorted(t for r in replies for t in r["connect_s"])
            if len(lat) != n:
                raise ingest.BenchError(f"{relay.name}: {len(lat)}/{n} connections opened")
            total = target
            time.sleep(SETTLE_S)
            rss = clients.group_rss_kib(relay.proc.pid)
            out["steps"].append(
                {
                    "connections": total,
                    "rss_mib": rss / 1024,
                    "per_connection_kib": (rss - base) / total,
                    "connect_p50_ms": ingest._pct(lat, 50) * 1e3,
                    "connect_p95_ms": ingest._pct(lat, 95) * 1e3,
                    "step_wall_s": wall,
                    "client_cpu_s": sum(r["cpu_s"] for r in replies),
                    "client_rss_mib": sum(clients.rss_kib(p) for p in workers.pids()) / 1024,
                    "load_avg": ingest.load_avg(),
                }
            )
            if relay.proc.poll() is not None:
                raise ingest.BenchError(f"{relay.name} exited:\n{relay.log_tail()}")
    finally:
        workers.close()
    return out


def _on_aiohttp(args: argparse.Namespace) -> dict[str, Any]:
    """buzz with its WebSocket on aiohttp's `WebSocketResponse`, the yardstick of the lean layer."""
    os.environ["BUZZ_WEBSOCKET_LAYER"] = "aiohttp"
    try:
        result, _ = clients.buzz_then_peer(
            argparse.Namespace(**{**vars(args), "skip_peer": True}),
            "buzz-conns-",
            bench,
            max(args.steps) + 100,
        )
    finally:
        os.environ.pop("BUZZ_WEBSOCKET_LAYER", None)
    return result


def run(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {**ingest.machine_facts(), "workers": args.workers}
    if args.aiohttp_first and not args.skip_aiohttp:  # the order's share of a difference
        out["buzz_aiohttp"] = _on_aiohttp(args)
    os.environ.pop("BUZZ_WEBSOCKET_LAYER", None)  # the default: lean
    out["buzz"], peer = clients.buzz_then_peer(args, "buzz-conns-", bench, max(args.steps) + 100)
    if peer is not None:
        out["peer"] = peer
    if not args.skip_aiohttp and "buzz_aiohttp" not in out:
        out["buzz_aiohttp"] = _on_aiohttp(args)
    out["load_avg_end"] = ingest.load_avg()
    return out


def render(out: dict[str, Any]) -> str:
    lines = clients.report_head("idle-connection", out, f"; clients in {out['workers']} processes")
    relays = clients.relays_of(out)
    lines += clients.config_lines(
        out, lambda r: f", RSS with no connection {r['rss_idle_kib'] / 1024:.0f} MiB"
    )
    if "buzz_aiohttp" in out:
        relays.insert(1, ("buzz/aiohttp", out["buzz_aiohttp"]))
        lines.append(
            "  buzz: the lean WebSocket layer; buzz/aiohttp: the same relay with BUZZ_WEBSOCKET_LAYER=aiohttp"
        )
    rows = [
        f"{name:<13}{s['connections']:>7}{s['rss_mib']:>9.0f}{s['per_connection_kib']:>10.1f}"
        f"{s['connect_p50_ms']:>12.1f} / {s['connect_p95_ms']:<7.1f}  {s['load_avg']}"
        for name, r in relays
        for s in r["steps"]
    ]
    header = f"{'relay':<13}{'conns':>7}{'RSS MiB':>9}{'KiB/conn':>10}{'connect p50/p95 ms':>21}  load"
    lines += clients.table(header, rows, 84)
    if "peer" in out:
        for sb, sp in zip(out["buzz"]["steps"], out["peer"]["steps"], strict=True):
            lines.append(
                f"{sb['connections']} connections: buzz / nostr-relay RSS {sb['rss_mib'] / sp['rss_mib']:.2f}×, "
                f"per connection {sb['per_connection_kib'] / max(sp['per_connection_kib'], 0.1):.2f}×"
            )
    if "buzz_aiohttp" in out:
        for sl, sa in zip(out["buzz"]["steps"], out["buzz_aiohttp"]["steps"], strict=True):
            lines.append(
                f"{sl['connections']} connections: lean / aiohttp per connection "
                f"{sl['per_connection_kib']:.1f} / {sa['per_connection_kib']:.1f} KiB "
                f"({sl['per_connection_kib'] / max(sa['per_connection_kib'], 0.1):.2f}×), connect+AUTH p50 "
                f"{sl['connect_p50_ms']:.1f} / {sa['connect_p50_ms']:.1f} ms"
            )
    last = out["buzz"]["steps"][-1]
    if last["connections"] == 10_000:
        mb, kib = last["rss_mib"] * 1.048576, last["per_connection_kib"]
        lines.append(
            f"target (issue 30): ≤ 5 KiB per idle connection: {kib:.1f} KiB {'MET' if kib <= 5 else 'NOT MET'}; "
            f"10,000 of them < 100 MB RSS: {mb:.0f} MB {'MET' if mb < 100 else 'NOT MET'} "
            f"(RSS with no connection {out['buzz']['rss_idle_kib'] / 1024:.0f} MiB)"
        )
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=lambda v: [int(x) for x in v.split(",")], default=[1000, 5000, 10000],
                    help="connections in all after each step, increasing, comma-separated (≤ 15000)")  # fmt: skip
    ap.add_argument("-w", "--workers", type=int, default=4, help="client processes (1–16)")
    ap.add_argument("--peer-venv", default=str(ingest.ROOT / ".bench-venv"))
    ap.add_argument("--peer-workers", type=int, default=1)
    ap.add_argument("--skip-peer", action="store_true", help="buzz only")
    ap.add_argument("--skip-aiohttp", action="store_true", help="buzz on its lean WebSocket layer only")
    ap.add_argument("--aiohttp-first", action="store_true", help="run the aiohttp layer before the lean one")
    ap.add_argument("--json", metavar="OUT.json", help="also write the results as JSON")
    args = ap.parse_args(argv)
    if args.steps != sorted(set(args.steps)) or args.steps[0] < 1 or args.steps[-1] > 15_000:
        ap.error("--steps must increase, between 1 and 15000")
    if not 1 <= args.workers <= 16:
        ap.error("--workers 1–16")
    return args


def main(argv: list[str] | None = None) -> int:
    return clients.bench_main(parse_args(argv), run, render)


if __name__ == "__main__":
    sys.exit(main())
