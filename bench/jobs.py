#!/usr/bin/env python3
"""Jobs benchmark (issue 27): 200 jobs to 4 agents through real harnesses, with a kill -9 in
the middle. Run by `make bench`, never by the tests.

Setup: `buzz relay serve` on SQLite; four agents (each with its owner's NIP-OA tag), each run
by `buzz agent run` with the fast fake ACP agent `examples/rules_agent.py` (a job's agent time
is a plan update, a tool call and one text chunk: no model, no sleep), in four channels (an
agent works one job per channel at a time, so each agent serves every channel). A requester
posts 200 jobs at a fixed pace, round-robin over agents and channels, and watches every job's
events live.

Figures: request → accept (43002) p50/p99; request → result (43004) p50/p99, and the same
minus the agent's own time (the span from the job turn's 💬 to its result is the turn; the
part before 💬 is the harness's intake, queue and session set-up). Yardstick, same relay, same
run: EVENT → OK of a plain kind 9 (the floor of one relay round trip) and the time from a
kind 9 to its live delivery to another connection (one hop, like request → harness).

Deployment (default, `--standby`): each agent runs as two harnesses with its key, both always
on (a primary and a standby; docs/decisions.md 371). Both get every live 43001; the claim
decides which one works it. When one dies, new jobs go to the survivor at once; a job its claim
held but had not accepted is seized after the claims' accept grace; an accepted, unfinished one
is taken over when its claim stops moving for a lease. `--no-standby`: one harness per agent
(the layout before 371, where a job to the killed agent waits for its restart).

Exactly-once: after half of the jobs one harness is killed with SIGKILL (with its agent
subprocess) and started again; at the end every job must have exactly one 43002 and exactly
one 43004/43006 on the relay — counted, never sampled.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
import ingest

from buzz.client import RelayClient
from buzz.core.channel_id import new_channel_id
from buzz.core.event import Event
from buzz.core.keys import generate_secret_key, public_key
from buzz.core.nip_oa import build_auth_tag
from buzz.jobs import build

ROOT = Path(__file__).resolve().parents[1]
RULES_AGENT = str(ROOT / "examples" / "rules_agent.py")
AGENTS = 4
CHANNELS = 4
SPEECH = "\U0001f4ac"


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def ms(value: float) -> float:
    return round(value * 1000, 1)


class Harness:
    def __init__(self, tmp: Path, url: str, secret: str, tag: list[str], index: str) -> None:
        self.tmp, self.url, self.secret, self.tag, self.index = tmp, url, secret, tag, index
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = tmp / f"harness-{index}.log"

    def start(self) -> None:
        env = dict(
            os.environ, BUZZ_PRIVATE_KEY=self.secret, BUZZ_AUTH_TAG=json.dumps(self.tag), PYTHONUNBUFFERED="1"
        )
        work = self.tmp / f"agent-{self.index}"
        work.mkdir(exist_ok=True)
        args = [str(Path(sys.executable).with_name("buzz")), "agent", "run", "--relay", self.url,
                "--agent-command", sys.executable, "--agent-args", RULES_AGENT, "--claim-lease", "4",
                "--no-typing", "--no-presence", "--no-memory", "--no-turn-metrics", "--catch-up", "0",
                "--job-progress-interval", "5", "--agents", os.environ.get("BENCH_JOBS_POOL", "2")]  # fmt: skip
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                args, env=env, cwd=work, stdout=out, stderr=out, start_new_session=True
            )

    def ready(self) -> bool:
        return "serving" in self.log.read_text(errors="replace") if self.log.exists() else False

    def held(self) -> set[str]:
        """Job id prefixes this process queued (or ran) and did not end, from its log."""
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        queued = set(re.findall(r"job ([0-9a-f]{12}) queued in", text))
        return queued - set(re.findall(r"job ([0-9a-f]{12}) ended", text))

    def kill9(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.kill9()


async def yardstick(url: str, secret: str, channel: str, rounds: int) -> dict[str, float]:
    """EVENT→OK of a kind 9, and kind 9 → live delivery on another connection."""
    oks, hops = [], []
    async with RelayClient(url, secret) as writer, RelayClient(url, secret) as reader:
        sub = await reader.subscribe([{"kinds": [9], "#h": [channel], "since": int(time.time())}])
        await asyncio.wait_for(sub.eose.wait(), 10)
        for i in range(rounds):
            event = Event.create(secret, 9, f"yardstick {i}", [["h", channel]])
            start = time.perf_counter()
            result = await writer.publish(event)
            oks.append(time.perf_counter() - start)
            assert result.accepted, result.message
            while (await sub.next(10)).id != event.id:
                pass
            hops.append(time.perf_counter() - start)
    return {
        "ok_p50_ms": ms(pct(oks, 50)),
        "ok_p99_ms": ms(pct(oks, 99)),
        "hop_p50_ms": ms(pct(hops, 50)),
        "hop_p99_ms": ms(pct(hops, 99)),
    }


def log_count(harnesses: list[Harness], *texts: str) -> int:
    logs = [h.log.read_text(errors="replace") for h in harnesses if h.log.exists()]
    return sum(log.count(text) for log in logs for text in texts)


async def scenario(tmp: Path, url: str, jobs: int, pace: float, standby: bool) -> dict[str, Any]:
    owner = asker = generate_secret_key()  # the agents' owner asks (the default respond-to: owner-only)
    agents = [generate_secret_key() for _ in range(AGENTS)]
    tags = [list(build_auth_tag(owner, public_key(a))) for a in agents]
    channels = []
    async with RelayClient(url, asker) as c:
        for i in range(CHANNELS):
            channel = new_channel_id()
            tags_9007 = [["h", channel], ["name", f"jobs-{i}"], ["visibility", "open"]]
            assert (await c.publish(Event.create(asker, 9007, "", tags_9007))).accepted
            for a in agents:
                put = Event.create(asker, 9000, "", [["h", channel], ["p", public_key(a)]])
                assert (await c.publish(put)).accepted
            channels.append(channel)
    for a, tag in zip(agents, tags, strict=True):  # AUTH with the tag: the relay learns the owner
        async with RelayClient(url, a, auth_tags=[tag]) as c:
            profile = Event.create(a, 0, json.dumps({"name": f"agent-{public_key(a)[:6]}"}), [tag])
            assert (await c.publish(profile)).accepted
    harnesses = [Harness(tmp, url, a, t, f"{i}") for i, (a, t) in enumerate(zip(agents, tags, strict=True))]
    if standby:  # the always-on standby of each agent: same key, same owner tag
        harnesses += [
            Harness(tmp, url, a, t, f"{i}-standby") for i, (a, t) in enumerate(zip(agents, tags, strict=True))
        ]
    for h in harnesses:
        h.start()
    deadline = time.monotonic() + 60
    while not all(h.ready() for h in harnesses):
        if time.monotonic() > deadline:
            raise ingest.BenchError(
                "harnesses did not start:\n" + "\n".join(h.log.read_text()[-800:] for h in harnesses)
            )
        await asyncio.sleep(0.1)
    yard = await yardstick(url, asker, channels[0], 100)
    asked: dict[str, float] = {}
    assignee: dict[str, int] = {}
    seen: dict[str, dict[str, float]] = {}
    killed_at = None
    killed_t = 0.0
    held: set[str] = set()
    try:
        async with RelayClient(url, asker) as watcher, RelayClient(url, asker) as writer:
            subs = [
                await watcher.subscribe(
                    [{"kinds": [43002, 43004, 43006, 7], "#h": [ch], "since": int(time.time()) - 1}]
                )
                for ch in channels
            ]
            for sub in subs:
                await asyncio.wait_for(sub.eose.wait(), 10)

            async def pump(sub: Any) -> None:
                async for event in sub:
                    now = time.perf_counter()
                    target = next((t[1] for t in event.tags if t[0] == "e"), None)
                    if target is None:
                        continue
                    marks = seen.setdefault(target, {})
                    key = {43002: "accept", 43004: "end", 43006: "end"}.get(event.kind)
                    if event.kind == 7 and event.content == SPEECH:
                        key = "turn"
                    if key is not None and key not in marks:
                        marks[key] = now

            pumps = [asyncio.create_task(pump(s)) for s in subs]
            for i in range(jobs):
                agent = public_key(agents[i % AGENTS])
                channel = channels[(i // AGENTS) % CHANNELS]
                t = build.request(channel, agent, prompt=f"job {i}: summarise", created_at=int(time.time()))
                event = Event.create(asker, t.kind, t.content, t.tags)
                asked[event.id] = time.perf_counter()
                assignee[event.id] = i % AGENTS
                result = await writer.publish(event)
                assert result.accepted, result.message
                # mid-run, while it holds a job (queued or running), else 25 jobs later anyway
                if killed_at is None and i >= jobs // 2 and (harnesses[1].held() or i >= jobs // 2 + 25):
                    harnesses[1].kill9()
                    killed_at, killed_t = i, time.perf_counter()
                    held = harnesses[1].held()  # its log is complete up to the kill
                    harnesses[1].start()
                await asyncio.sleep(1 / pace)
            deadline = time.monotonic() + 120
            while sum(1 for j in asked if "end" in seen.get(j, {})) < len(asked):
                if time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.2)
            for p in pumps:
                p.cancel()
            # exactly once: counted on the relay, not from what the watcher happened to see
            counts = {}
            for job in asked:
                stored = await writer.query([{"kinds": [43002, 43004, 43006], "#e": [job], "limit": 20}])
                counts[job] = (
                    sum(e.kind == 43002 for e in stored),
                    sum(e.kind in (43004, 43006) for e in stored),
                )
    finally:
        for h in harnesses:
            h.stop()
    # agent 1's jobs that the kill caught: accepted before it and ended after it (an accepted,
    # unfinished job of the killed harness or of its standby), and asked before it but accepted
    # after it (claimed and not yet accepted, or not yet claimed)
    dead = [j for j in asked if j[:12] in held]  # what the killed process held
    recovered = [f"{how} job {j[:12]}" for j in dead for how in ("took over", "seized")]  # log lines
    after = {
        "taken over by the standby": log_count(harnesses[1 + AGENTS : 2 + AGENTS], *recovered),
        "by the restarted process": log_count(harnesses[1:2], *recovered),
    }
    ones = [j for j in asked if assignee[j] == 1 and asked[j] < killed_t]
    running = [j for j in ones if seen.get(j, {}).get("accept", 1e18) < killed_t < seen[j].get("end", 1e18)]
    unaccepted = [j for j in ones if seen.get(j, {}).get("accept", 1e18) > killed_t]
    accept = [seen[j]["accept"] - asked[j] for j in asked if "accept" in seen.get(j, {})]
    # the agents whose harness was not killed: the steady path, apart from the crash window
    steady = [seen[j]["accept"] - asked[j] for j in asked if "accept" in seen.get(j, {}) and assignee[j] != 1]
    end = [seen[j]["end"] - asked[j] for j in asked if "end" in seen.get(j, {})]
    beyond = [
        (seen[j]["turn"] - asked[j]) for j in asked if "turn" in seen.get(j, {}) and "end" in seen[j]
    ]  # request → 💬: the harness's part before the agent works
    agent_time = [seen[j]["end"] - seen[j]["turn"] for j in asked if {"turn", "end"} <= set(seen.get(j, {}))]
    return {
        "jobs": jobs,
        "pace_per_s": pace,
        "killed_after_job": killed_at,
        "yardstick": yard,
        "accept_p50_ms": ms(pct(accept, 50)),
        "accept_p99_ms": ms(pct(accept, 99)),
        "steady_accept_p50_ms": ms(pct(steady, 50)),
        "steady_accept_p99_ms": ms(pct(steady, 99)),
        "result_p50_ms": ms(pct(end, 50)),
        "result_p99_ms": ms(pct(end, 99)),
        "before_turn_p50_ms": ms(pct(beyond, 50)),
        "before_turn_p99_ms": ms(pct(beyond, 99)),
        "turn_p50_ms": ms(pct(agent_time, 50)),
        "turn_p99_ms": ms(pct(agent_time, 99)),
        "lost": sum(1 for a, e in counts.values() if e == 0),
        "doubled": sum(1 for a, e in counts.values() if a > 1 or e > 1),
        "exactly_once": sum(1 for a, e in counts.values() if a == 1 and e == 1),
        "results_seen": len(end),
        "standby": standby,
        "before_turn_p99_by_agent_ms": [
            ms(
                pct(
                    [
                        seen[j]["turn"] - asked[j]
                        for j in asked
                        if assignee[j] == a and "turn" in seen.get(j, {})
                    ],
                    99,
                )
            )
            for a in range(AGENTS)
        ],
        "killed_held": len(dead),
        "killed_held_exactly_once": sum(1 for j in dead if counts[j] == (1, 1)),
        "killed_held_result_after_kill_max_ms": ms(
            max((seen[j]["end"] - killed_t for j in dead if "end" in seen.get(j, {})), default=0.0)
        ),
        "killed_held_recovered": after,
        "harnesses": len(harnesses),
        "in_flight_at_kill": len(running),
        "in_flight_exactly_once": sum(1 for j in running if counts[j] == (1, 1)),
        "in_flight_result_max_ms": ms(max((seen[j]["end"] - asked[j] for j in running), default=0.0)),
        "unaccepted_at_kill": len(unaccepted),
        "unaccepted_accept_max_ms": ms(
            max((seen[j]["accept"] - asked[j] for j in unaccepted if "accept" in seen[j]), default=0.0)
        ),
        "seized": log_count(harnesses, "seized job"),
        "taken_over": log_count(harnesses, "took over job"),
        "mean_accept_ms": ms(statistics.fmean(accept)) if accept else None,
    }


def render(out: dict[str, Any]) -> str:
    r, y = out["run"], out["run"]["yardstick"]
    declined = r["jobs"] - r["exactly_once"] - r["lost"] - r["doubled"]
    return "\n".join(
        [
            f"Jobs (issue 27) — {out['machine']['cpu']}, load {out['machine']['load_avg_start']} → {ingest.load_avg()}",
            f"{r['jobs']} jobs to {AGENTS} agents in {CHANNELS} channels at {r['pace_per_s']}/s; one harness killed -9 after job {r['killed_after_job']} and restarted",
            (
                f"deployment: each agent runs as two harnesses, a primary and an always-on standby ({r['harnesses']} harnesses); the primary of one agent is killed"
                if r["standby"]
                else f"deployment: one harness per agent ({r['harnesses']} harnesses), no standby"
            ),
            "",
            "| figure | p50 ms | p99 ms | × yardstick p50 |",
            "|---|---|---|---|",
            f"| yardstick: EVENT → OK (kind 9) | {y['ok_p50_ms']} | {y['ok_p99_ms']} | 1.00 |",
            f"| yardstick: kind 9 → live delivery | {y['hop_p50_ms']} | {y['hop_p99_ms']} | {y['hop_p50_ms'] / y['ok_p50_ms']:.2f} |",
            f"| request → accept (43002), all jobs | {r['accept_p50_ms']} | {r['accept_p99_ms']} | {r['accept_p50_ms'] / y['ok_p50_ms']:.2f} |",
            f"| request → accept, the 3 agents not killed | {r['steady_accept_p50_ms']} | {r['steady_accept_p99_ms']} | {r['steady_accept_p50_ms'] / y['ok_p50_ms']:.2f} |",
            f"| request → 💬 (harness before the agent) | {r['before_turn_p50_ms']} | {r['before_turn_p99_ms']} | {r['before_turn_p50_ms'] / y['ok_p50_ms']:.2f} |",
            f"| 💬 → result (the job turn) | {r['turn_p50_ms']} | {r['turn_p99_ms']} | |",
            f"| request → result (43004) | {r['result_p50_ms']} | {r['result_p99_ms']} | {r['result_p50_ms'] / y['ok_p50_ms']:.2f} |",
            "",
            f"exactly once (one 43002 and one 43004/43006 per job, counted on the relay): {r['exactly_once']}/{r['jobs']}; "
            f"lost {r['lost']}, doubled {r['doubled']}, other {declined}",
            f"the killed agent's jobs caught by the kill: {r['in_flight_at_kill']} accepted and unfinished "
            f"({r['in_flight_exactly_once']} exactly once, result ≤ {r['in_flight_result_max_ms']} ms after the request), "
            f"{r['unaccepted_at_kill']} asked and not yet accepted (accept ≤ {r['unaccepted_accept_max_ms']} ms); "
            f"harness logs: {r['seized']} seized after the accept grace, {r['taken_over']} taken over after a lease",
            f"the killed process held {r['killed_held']} job(s) (queued or running, from its log): "
            f"{r['killed_held_exactly_once']} exactly once, the last result {r['killed_held_result_after_kill_max_ms']} ms after the kill; "
            + ", ".join(f"{n} {how}" for how, n in r["killed_held_recovered"].items()),
            "request → 💬 p99 per agent (ms; agent 1 is the killed one's): "
            + ", ".join(str(v) for v in r["before_turn_p99_by_agent_ms"]),
            "target: accept p99 < 250 ms — all jobs: "
            + ("met" if r["accept_p99_ms"] < 250 else "NOT met")
            + "; agents not killed: "
            + ("met" if r["steady_accept_p99_ms"] < 250 else "NOT met"),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--pace", type=float, default=5.0, help="jobs requested per second (default 5)")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument("--keep", action="store_true", help="keep the logs (the temporary directory)")
    parser.add_argument(
        "--standby",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="run each agent as two always-on harnesses (default; --no-standby: one per agent)",
    )
    args = parser.parse_args()
    out: dict[str, Any] = {"machine": ingest.machine_facts()}
    keep = Path(tempfile.mkdtemp(prefix="bench-jobs-")) if args.keep else None
    with tempfile.TemporaryDirectory() as name:
        tmp = keep or Path(name)
        if keep is not None:
            print(f"logs in {tmp}", file=sys.stderr)
        relay = ingest.start_buzz(tmp, tag="-jobs")
        try:
            out["run"] = asyncio.run(scenario(tmp, relay.url, args.jobs, args.pace, args.standby))
        finally:
            relay.stop()
    if args.json is not None:
        args.json.write_text(json.dumps(out, indent=2))
    print(render(out))
    if out["run"]["exactly_once"] != out["run"]["jobs"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
