#!/usr/bin/env python3
"""Fan-out benchmark: one publisher → S live subscribers, buzz vs nostr-relay (issue 17 item 1).

Run by `make bench` (never by the tests), loopback only. Per relay and per step S
(default 100 / 1,000 / 5,000): S authenticated connections, each with one matching live
subscription (`{"kinds":[1],"authors":[publisher],"since":now}`), spread over W forked client
processes (bench/clients.py) so that the client is not the bottleneck; the publisher sends
M events one at a time (OK awaited, then a pause so that deliveries do not overlap) and the
delivery latency of each (event, subscriber) is arrival − send on the machine's monotonic
clock. Every subscriber must receive every event exactly once (asserted). Beside it, the
relay side: the publisher's EVENT→OK time (buzz sends the OK after the last subscriber's frame
is handed to the kernel, so it bounds the relay's accept → commit → fan-out time from above)
and buzz's own fan-out loop time (`buzz_fanout_seconds` from its /metrics).

The cost of idle subscriptions is measured first, on the fresh relay: the publisher
pipelines N kind 1 events while 100 connections hold 1 (100 in all) or 100 (10,000 in all)
non-matching subscriptions; the ratio of the two publish rates is the cost. With `--baseline REV`
buzz as it was at git revision REV (bench/ingest.py builds it into `.bench-baseline/`) runs the
same steps just before this tree's buzz: the same-run yardstick of a fan-out change (issue 30
item 3). See bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, str(Path(__file__).resolve().parent))
import clients
import ingest

from buzz.core.event import Event
from buzz.core.keys import generate_secret_key

OPEN_TIMEOUT_S = 300.0


async def _publish(
    url: str, secret: str, m: int, gap: float, wait: float
) -> tuple[dict[str, float], list[float]]:
    """M events one at a time; returns (id → perf_counter just before its send, EVENT→OK s)."""
    sent: dict[str, float] = {}
    ok_s: list[float] = []
    async with aiohttp.ClientSession() as session:
        ws = await ingest.open_conn(session, url, secret, wait)
        try:
            for i in range(m):
                ev = Event.create(secret, 1, f"fanout {os.urandom(4).hex()} #{i}")
                frame = f'["EVENT",{ev.to_json()}]'
                sent[ev.id] = time.perf_counter()
                await ws.send_str(frame)
                while True:
                    msg = await ingest._recv_json(ws, ingest.MSG_TIMEOUT_S)
                    if msg[0] == "OK" and msg[1] == ev.id:
                        ok_s.append(time.perf_counter() - sent[ev.id])
                        if not msg[2]:
                            raise ingest.BenchError(f"publish refused: {msg[3]!r}")
                        break
                await asyncio.sleep(gap)
        finally:
            await ws.close()
    return sent, ok_s


def _fanout_histogram(metrics_url: str) -> dict[str, float]:
    """buzz's `buzz_fanout_seconds` series: `le` bound (and "sum", "count") → value."""
    if not metrics_url:
        return {}
    with urllib.request.urlopen(metrics_url, timeout=10) as resp:  # loopback only
        text = resp.read().decode()
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name != "buzz_fanout_seconds":
            continue
        for sample in family.samples:
            if sample.name.endswith("_bucket"):
                out[sample.labels["le"]] = sample.value
            elif sample.name.endswith(("_sum", "_count")):
                out[sample.name.rsplit("_", 1)[1]] = sample.value
    return out


def _loop_figures(before: dict[str, float], after: dict[str, float]) -> dict[str, float | None]:
    """Mean fan-out loop time over the step and the histogram bucket that holds 99 % of them."""
    n = after.get("count", 0) - before.get("count", 0)
    if not after or n <= 0:
        return {"fanout_loop_mean_ms": None, "fanout_loop_p99_le_ms": None}
    mean = (after["sum"] - before.get("sum", 0)) / n
    bound = None
    for le in sorted((k for k in after if k not in ("sum", "count")), key=lambda k: float(k)):
        if after[le] - before.get(le, 0) >= 0.99 * n:
            bound = float(le)
            break
    return {
        "fanout_loop_mean_ms": mean * 1e3,
        "fanout_loop_p99_le_ms": None if bound is None else bound * 1e3,
    }


def fanout_step(relay: ingest.RelayProc, s: int, args: argparse.Namespace, wait: float) -> dict[str, Any]:
    secret = generate_secret_key()
    pub = Event.create(secret, 1, "probe").pubkey
    workers = clients.Workers(min(args.workers, s))
    try:
        t0 = time.perf_counter()
        filt = {"kinds": [1], "authors": [pub], "since": int(time.time()) - 5}
        workers.open(relay.url, [[filt]] * s, wait, OPEN_TIMEOUT_S)
        open_s = time.perf_counter() - t0
        gap = args.gap + s / 5000
        workers.start_collect(args.messages, args.messages * (gap + 5) + 30)
        hist0 = _fanout_histogram(relay.metrics_url)
        cpu0 = ingest.group_cpu_s(relay.proc.pid)
        sent, ok_s = asyncio.run(_publish(relay.url, secret, args.messages, gap, wait))
        replies = workers.finish_collect(args.messages * (gap + 5) + 60)
        relay_cpu = ingest.group_cpu_s(relay.proc.pid) - cpu0
        loop = _loop_figures(hist0, _fanout_histogram(relay.metrics_url))
    finally:
        workers.close()
    lat: list[float] = []
    per_event: dict[str, int] = dict.fromkeys(sent, 0)
    for rep in replies:
        for eid, arrivals in rep["arrivals"].items():
            if eid not in sent:
                raise ingest.BenchError(f"{relay.name}: delivered an event that was not published: {eid}")
            per_event[eid] += len(arrivals)
            lat += [a - sent[eid] for a in arrivals]
    wrong = {e: n for e, n in per_event.items() if n != s}
    if wrong or any(r["short"] for r in replies):
        raise ingest.BenchError(
            f"{relay.name}: S={s}: deliveries per event {sorted(set(wrong.values()))}, expected {s}"
        )
    lat.sort()
    ok_s.sort()
    deliveries = len(lat)
    client_cpu = sum(r["cpu_s"] for r in replies)
    return {
        "subscribers": s,
        "messages": args.messages,
        "p50_ms": ingest._pct(lat, 50) * 1e3,
        "p99_ms": ingest._pct(lat, 99) * 1e3,
        "max_ms": lat[-1] * 1e3,
        "ok_p50_ms": ingest._pct(ok_s, 50) * 1e3,
        "ok_p99_ms": ingest._pct(ok_s, 99) * 1e3,
        **loop,
        "relay_cpu_us_per_delivery": relay_cpu / deliveries * 1e6,
        "client_cpu_us_per_delivery": client_cpu / deliveries * 1e6,
        "connect_s": open_s,
        "load_avg": ingest.load_avg(),
    }


def idle_step(
    relay: ingest.RelayProc, per_conn: int, args: argparse.Namespace, wait: float
) -> dict[str, Any]:
    workers = clients.Workers(args.workers)
    try:
        subs = [
            [{"kinds": [1], "authors": [os.urandom(32).hex()]} for _ in range(per_conn)]
            for _ in range(args.idle_connections)
        ]
        workers.open(relay.url, subs, wait, OPEN_TIMEOUT_S)
        wl = ingest.make_workload(args.events, 1)
        ing = asyncio.run(ingest.run_ingest(relay.url, relay.proc.pid, wl, args.window, wait, 240))
    finally:
        workers.close()
    if ing.accepted != wl.n or ing.rejected:
        raise ingest.BenchError(f"{relay.name}: idle row: {ing.accepted}/{wl.n} accepted")
    return {
        "idle_subscriptions": per_conn * args.idle_connections,
        "events_per_s": ing.events_per_s,
        "relay_cpu_us_per_event": ing.server_cpu_s / wl.n * 1e6,
        "load_avg": ingest.load_avg(),
    }


def bench(relay: ingest.RelayProc, args: argparse.Namespace, wait: float) -> dict[str, Any]:
    out: dict[str, Any] = {"config": relay.config, "fanout": [], "idle": []}
    # The idle rows first: nostr-relay, right after closing the 5,000 subscribers of the last
    # fan-out step, stops answering new subscriptions' EOSE for minutes.
    for per_conn in (1, 100):
        print(
            f"  {relay.name}: publish with {per_conn * args.idle_connections} idle subscriptions …",
            file=sys.stderr,
        )
        try:
            out["idle"].append(idle_step(relay, per_conn, args, wait))
        except Exception as exc:
            if relay.name != "buzz":
                # The yardstick's idle rows failing must not lose its fan-out rows.
                out["idle_error"] = clients.short_error(exc)
                print(f"  {relay.name}: idle rows failed, left out: {out['idle_error']}", file=sys.stderr)
                break
            raise
    for s in args.steps:
        print(f"  {relay.name}: fan-out to {s} subscribers …", file=sys.stderr)
        out["fanout"].append(fanout_step(relay, s, args, wait))
    return out


def baseline_run(args: argparse.Namespace, out: dict[str, Any]) -> None:
    """buzz at `args.baseline`, its own installed code, through the same steps (`out["base"]`)."""
    import tempfile

    base = ingest.ensure_baseline(args.baseline)
    out["baseline"] = {"rev": args.baseline, "sha": base.sha, "label": base.label}
    saved = {k: os.environ.get(k) for k in ("PYTHONPATH", "BUZZ_MAX_CONNECTIONS")}
    # A PYTHONPATH pointing at this tree (how developers run the bench) would run this tree's code.
    os.environ.pop("PYTHONPATH", None)
    os.environ["BUZZ_MAX_CONNECTIONS"] = str(max(args.steps) + 100)
    try:
        with tempfile.TemporaryDirectory(prefix="buzz-fanout-base-") as tmp:
            relay = ingest.start_buzz(Path(tmp), buzz=base.buzz, name=base.label)
            try:
                out["base"] = bench(relay, args, ingest.AUTH_TIMEOUT_S)
            finally:
                relay.stop()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def run(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {**ingest.machine_facts(), "workers": args.workers, "messages": args.messages}
    ingest.PEER_SUBSCRIPTION_LIMIT = 128  # nostr-relay's default 32 would refuse the idle row
    if args.baseline:
        baseline_run(args, out)
    out["buzz"], peer = clients.buzz_then_peer(args, "buzz-fanout-", bench, max(args.steps) + 100)
    if peer is not None:
        out["peer"] = peer
    out["load_avg_end"] = ingest.load_avg()
    return out


def _loop_cell(f: dict[str, Any]) -> str:
    """`mean / ≤p99-bucket` of buzz's fan-out loop, or `-` (nostr-relay exports none)."""
    mean, le = f.get("fanout_loop_mean_ms"), f.get("fanout_loop_p99_le_ms")
    if mean is None:
        return "-"
    return f"{mean:.1f} / ≤{le:g}" if le is not None else f"{mean:.1f} / -"


def _idle_cost(r: dict[str, Any]) -> float:
    few, many = r["idle"]
    return few["events_per_s"] / many["events_per_s"]


def render(out: dict[str, Any]) -> str:
    lines = clients.report_head("fan-out", out)
    lines.append(f"{out['messages']} events per step, subscribers over {out['workers']} client processes")
    relays = clients.relays_of(out)
    lines += clients.config_lines(out)
    if "base" in out:
        label = out["baseline"]["label"]
        relays = [(label, out["base"]), *relays]
        lines.append(
            f"  {label}: git {out['baseline']['rev']} = {out['baseline']['sha']}, run just before buzz"
        )
    rows = [
        f"{name:<13}{f['subscribers']:>6}{f['p50_ms']:>9.1f}{f['p99_ms']:>9.1f}{f['max_ms']:>9.1f}"
        f"{f['ok_p50_ms']:>9.1f}{f['ok_p99_ms']:>9.1f}{_loop_cell(f):>15}"
        f"{f['relay_cpu_us_per_delivery']:>10.0f} µs{f['client_cpu_us_per_delivery']:>10.0f} µs  {f['load_avg']}"
        for name, r in relays
        for f in r["fanout"]
    ]
    header = (
        f"{'':<13}{'':>6}{'client-observed delivery':>27}{'relay side':>33}{'CPU per delivery':>26}\n"
        f"{'relay':<13}{'subs':>6}{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}{'OK p50':>9}{'OK p99':>9}"
        f"{'loop ms':>15}{'relay':>13}{'client':>13}  load"
    )
    lines += clients.table(header, rows, 122)
    lines.append(
        "client-observed: send → arrival in a client process (clients on the same 2 cores as the relay);"
    )
    lines.append(
        "OK p50/p99: the publisher's EVENT→OK (buzz: after commit and the last subscriber's frame handed"
    )
    lines.append(
        "to the kernel, an upper bound of its relay-side time); loop: buzz_fanout_seconds mean / p99 bucket"
    )
    for name, r in relays:
        if len(r["idle"]) < 2:
            lines.append(f"{name:<13} idle rows FAILED ({r.get('idle_error', 'missing')}); left out")
            continue
        few, many = r["idle"]
        lines.append(
            f"{name:<13} publish rate with {few['idle_subscriptions']:,} idle subs {few['events_per_s']:,.0f} ev/s, "
            f"with {many['idle_subscriptions']:,}: {many['events_per_s']:,.0f} ev/s → cost {_idle_cost(r):.2f}×"
        )
    b = out["buzz"]
    thousand = next((f for f in b["fanout"] if f["subscribers"] == 1000), None)
    if "peer" in out:
        for fb, fp in zip(b["fanout"], out["peer"]["fanout"], strict=True):
            lines.append(
                f"S={fb['subscribers']}: buzz p99 / nostr-relay p99 = {fb['p99_ms'] / fp['p99_ms']:.2f}×, "
                f"p50 ratio {fb['p50_ms'] / fp['p50_ms']:.2f}×"
            )
    if "base" in out:
        label = out["baseline"]["label"]
        for fb, f0 in zip(b["fanout"], out["base"]["fanout"], strict=True):
            lines.append(
                f"S={fb['subscribers']}: buzz / {label}: relay CPU per delivery "
                f"{fb['relay_cpu_us_per_delivery'] / f0['relay_cpu_us_per_delivery']:.2f}×, "
                f"EVENT→OK p99 {fb['ok_p99_ms'] / f0['ok_p99_ms']:.2f}×, "
                f"client-observed p99 {fb['p99_ms'] / f0['p99_ms']:.2f}×"
            )
    if thousand:
        cpu = thousand["relay_cpu_us_per_delivery"]
        lines.append(
            f"target: relay CPU per delivery ≤ 6 µs at 1,000 subscribers: {cpu:.1f} µs "
            f"{'MET' if cpu <= 6 else 'NOT MET'}"
        )
        side = thousand["ok_p99_ms"]
        lines.append(
            f"target: 1,000 subscribers p99 < 20 ms relay-side: EVENT→OK p99 {side:.1f} ms "
            f"{'MET' if side < 20 else 'NOT MET'} (fan-out loop {_loop_cell(thousand).strip()} ms); "
            f"client-observed p99 {thousand['p99_ms']:.1f} ms with the clients' "
            f"{thousand['client_cpu_us_per_delivery']:.0f} µs CPU per delivery on the same cores"
        )
    lines.append(
        f"target: 10,000 idle subs cost < 2× 100: {_idle_cost(b):.2f}× {'MET' if _idle_cost(b) < 2 else 'NOT MET'}"
    )
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=lambda v: [int(x) for x in v.split(",")], default=[100, 1000, 5000],
                    help="subscriber counts, comma-separated (each 1–9000)")  # fmt: skip
    ap.add_argument("-m", "--messages", type=int, default=10, help="events published per step (1–100)")
    ap.add_argument("--gap", type=float, default=0.1, help="pause after each OK, s (+ S/5000 s)")
    ap.add_argument("-w", "--workers", type=int, default=4, help="client processes (1–16)")
    ap.add_argument(
        "--idle-connections", type=int, default=100, help="connections holding the idle subscriptions"
    )
    ap.add_argument("-n", "--events", type=int, default=3000, help="events pipelined in the idle rows")
    ap.add_argument("--window", type=int, default=128, help="events in flight in the idle rows")
    ap.add_argument("--peer-venv", default=str(ingest.ROOT / ".bench-venv"))
    ap.add_argument("--peer-workers", type=int, default=1)
    ap.add_argument("--skip-peer", action="store_true", help="buzz only")
    ap.add_argument(
        "--baseline", metavar="REV", help="also run buzz at git revision REV first (same-run yardstick)"
    )
    ap.add_argument("--json", metavar="OUT.json", help="also write the results as JSON")
    args = ap.parse_args(argv)
    if not all(1 <= s <= 9000 for s in args.steps) or not 1 <= args.messages <= 100:
        ap.error("--steps each 1–9000, --messages 1–100")
    if (
        not 1 <= args.workers <= 16
        or not 1 <= args.idle_connections <= 1000
        or not 100 <= args.events <= 20000
    ):
        ap.error("--workers 1–16, --idle-connections 1–1000, --events 100–20000")
    return args


def main(argv: list[str] | None = None) -> int:
    return clients.bench_main(parse_args(argv), run, render)


if __name__ == "__main__":
    sys.exit(main())
