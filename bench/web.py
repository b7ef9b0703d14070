#!/usr/bin/env python3
"""Browser benchmark: time from *Sign in* to the newest message of a 1,000-message channel
(issue 26), this tree's page against the page of a baseline revision, in the same run.

Run by `make bench`, never by the tests. Loopback only. Each relay (`buzz relay serve`, SQLite)
gets the same channel: 1,000 messages, three a second, every fifth with a fenced code block and
every tenth (offset 3) with an image, the rest a line of Markdown. The image is a 1280 × 800 PNG
uploaded to the relay once and attached (URL line and imeta, as `buzz messages send --file`
sends it) to each of those messages; a relay without media routes (the baseline before issue 26)
gets a Markdown image link there instead, which its page shows as text. web/e2e/first-message.mjs
(playwright-core driving Debian's Chromium, a fresh context per run: no cache, no storage) signs
in with the owner's key and times the click on *Sign in* until the newest message is on the
screen. Rounds alternate between the two relays so that load on the shared box hits both alike;
the figure is the median, the yardstick the baseline's median of the same run (issue 26: no
worse than 1.5×). Then tab → tab delivery (issue 29): web/e2e/delivery.mjs signs the same key in
twice and times each of `--messages` messages from Enter in one tab to its showing in the other;
the figure is the p50 (issue 29: ≤ 100 ms), beside the baseline's. The baseline is buzz at `--baseline REV` (default: main before issue 26),
installed into `.bench-baseline/<sha>/` by bench/ingest.py, so it serves its own page.

Then issue 29's last numbers, on both relays, once the rows above are taken (the channels they
add would change which channel sign-in opens): a `--long` (10,000) message channel of the same
mix and three side channels of 200. web/e2e/scroll.mjs opens the long channel at its newest
message and scrolls to its start from inside the page, `--step` px up each animation frame,
timing every frame with requestAnimationFrame (fps from the median frame; the share of frames
over 16.7 ms, with 1 ms for timer jitter) and counting the messages in the DOM (issue 29: 60 fps,
the DOM bounded). web/e2e/heavy.mjs is a compressed "heavy use" session: `--heavy-rounds` rounds
(default 30) of opening the next of the four channels, reading `--screens` (5) screens up into
its history, sending a message, and every third round opening a thread, replying, closing it;
then the JS heap after a forced collection (CDP). Twenty minutes of a heavy user is about that
many channel switches (one or two a minute), sends (one a minute) and thread visits (ten), and
150 screens of history read back; idle minutes between them add nothing to the heap (what it
holds is what was loaded and shown), so the session does them back to back (issue 29: ≤ 20 MB).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import clients
import ingest
from PIL import Image

from buzz.client import RelayClient
from buzz.client.errors import WorkspaceError
from buzz.client.files import Files, attachment_tag
from buzz.client.identity import Identity
from buzz.core.channel_id import new_channel_id
from buzz.core.event import Event
from buzz.core.keys import generate_secret_key

# main as it was when issue 26 was filed: the page renders every message as plain text.
BEFORE_ISSUE_26 = "9872e6ea86de057195ae668bc106365d6f687361"
TARGET_RATIO = 1.5
DELIVERY_TARGET_MS = 100  # issue 29: tab → tab p50
FRAME_MS = 1000 / 60
HEAP_TARGET_MB = 20  # issue 29: after 20 minutes of heavy use
DOM_BOUND = 200  # message nodes in the DOM while scrolling (the browser test's bound)
SIDE_CHANNELS = ("side-1", "side-2", "side-3")
WEB = ingest.ROOT / "web"
CHROMIUM = os.environ.get("BUZZ_CHROMIUM", "/usr/bin/chromium")
SCENARIO_TIMEOUT_S = 600
PER_SECOND = 3


def content(i: int, image: dict[str, Any] | None = None) -> tuple[str, list[list[str]]]:
    """Message `i` of the channel and its extra tags: a code block every fifth, an image every
    tenth (offset 3): `image` (a blob descriptor) attached, else a Markdown image link."""
    head = f"message {i:04d}"
    if i % 5 == 0:
        return (
            f"{head}: the fix for ticket {i}\n\n```python\ndef handler(event, limit={i}):\n"
            "    seen = set()\n    for item in event.items:\n        if item.id in seen:\n"
            "            continue\n        seen.add(item.id)\n        yield item\n```\n"
        ), []
    if i % 10 == 3 and image is not None:
        tag = attachment_tag(image, f"dashboard-{i:04d}.png")
        return f"{head}: screenshot of the dashboard\n{image['url']}", [tag]
    if i % 10 == 3:
        return (
            f"{head}: screenshot of the dashboard\n\n![dashboard {i}](https://images.example/{i:04d}.png)",
            [],
        )
    return f"{head} with **bold**, _emphasis_ and `code`; see https://example.com/t/{i}", []


def dashboard_png(path: Path) -> Path:
    """A 1280 × 800 PNG with some structure (its thumbnail and blurhash are not flat)."""
    img = Image.new("RGB", (1280, 800), (246, 247, 249))
    for k in range(12):
        band = Image.new("RGB", (90, 40 + 50 * (k % 7)), (40 + 17 * k, 110, 200 - 12 * k))
        img.paste(band, (40 + 100 * k, 760 - band.height))
    img.save(path, "PNG")
    return path


async def upload_image(url: str, secret: str, tmp: Path) -> dict[str, Any] | None:
    """The bench image's descriptor, or None when the relay has no media routes."""
    files = Files(url, Identity(secret))
    try:
        return await files.upload(dashboard_png(tmp / "dashboard.png"))
    except WorkspaceError:
        return None
    finally:
        await files.close()


async def seed(url: str, secret: str, count: int, tmp: Path, name: str = "bench") -> tuple[str, bool]:
    """The channel and its `count` messages, oldest first, `PER_SECOND` per second of the past;
    whether the images are attached files."""
    channel = new_channel_id()
    image = await upload_image(url, secret, tmp)
    # The relay takes created_at up to 15 minutes back: a long channel is written faster.
    rate = max(PER_SECOND, -(-count // 600))
    start = int(time.time()) - count // rate - 5
    async with RelayClient(url, secret) as client:
        tags = [["h", channel], ["name", name], ["visibility", "open"]]
        result = await client.publish(Event.create(secret, 9007, "", tags))
        if not result.accepted:
            raise ingest.BenchError(f"channel refused: {result.message}")
        for first in range(0, count, 50):  # 50 in flight: a 10,000-message channel in seconds
            events = []
            for i in range(first, min(first + 50, count)):
                text, extra = content(i, image)
                events.append(Event.create(secret, 9, text, [["h", channel], *extra], start + i // rate))
            for i, result in enumerate(await asyncio.gather(*(client.publish(e) for e in events))):
                if not result.accepted:
                    raise ingest.BenchError(f"message {first + i} refused: {result.message}")
    return channel, image is not None


async def seed_window(url: str, secret: str, long: int, tmp: Path) -> None:
    """The long channel and the side channels of the scroll and heavy-use rows."""
    await seed(url, secret, long, tmp, "long")
    for name in SIDE_CHANNELS:
        await seed(url, secret, 200, tmp, name)


def page_script(relay: ingest.RelayProc) -> str:
    """The name of the script the relay's page loads (which bundle it serves)."""
    url = relay.url.replace("ws://", "http://", 1) + "/"
    with urllib.request.urlopen(
        urllib.request.Request(url, headers={"Accept": "text/html"}), timeout=10
    ) as r:
        page = r.read().decode()
    found = re.search(r"/app/(index-[\w-]+\.js)", page)
    if not found:
        raise ingest.BenchError(f"{relay.name}: the page names no script")
    return found.group(1)


def time_sign_in(relay: ingest.RelayProc, secret: str, newest: str, runs: int) -> dict[str, Any]:
    return scenario("first-message", relay, {"secret": secret, "newest": newest, "runs": runs})


def time_delivery(relay: ingest.RelayProc, secret: str, newest: str, count: int) -> dict[str, Any]:
    return scenario("delivery", relay, {"secret": secret, "newest": newest, "count": count})


def time_scroll(relay: ingest.RelayProc, secret: str, long: int, args: argparse.Namespace) -> dict[str, Any]:
    given = {
        "secret": secret,
        "channel": "long",
        "newest": f"message {long - 1:04d}",
        "step": args.step,
        "limitS": args.scroll_limit,
    }
    n = scenario("scroll", relay, given)
    frames = sorted(n.pop("frames")[1:]) or [0.0]
    p50 = statistics.median(frames)
    return n | {
        "frames": len(frames),
        "frame_p50_ms": round(p50, 2),
        "fps_p50": round(1000 / p50, 1) if p50 else 0.0,
        "over_16_7_share": round(sum(f > FRAME_MS + 1 for f in frames) / len(frames), 3),
        "over_33_share": round(sum(f > 2 * FRAME_MS + 1 for f in frames) / len(frames), 3),
        "frame_p99_ms": round(frames[int(0.99 * (len(frames) - 1))], 1),
    }


def time_heavy(relay: ingest.RelayProc, secret: str, args: argparse.Namespace) -> dict[str, Any]:
    channels = ["bench", "long", *SIDE_CHANNELS]
    return scenario(
        "heavy",
        relay,
        {"secret": secret, "channels": channels, "rounds": args.heavy_rounds, "screens": args.screens},
    )


def scenario(name: str, relay: ingest.RelayProc, given: dict[str, Any]) -> dict[str, Any]:
    node = shutil.which("node")
    if (
        node is None
        or not Path(CHROMIUM).is_file()
        or not (WEB / "node_modules" / "playwright-core").is_dir()
    ):
        raise ingest.BenchError("needs node, Chromium (apt-get install chromium) and `cd web && npm ci`")
    config = {"url": relay.url.replace("ws://", "http://", 1) + "/"} | given
    env = {k: v for k, v in os.environ.items() if not k.startswith("BUZZ_")} | {"BUZZ_CHROMIUM": CHROMIUM}
    r = subprocess.run(
        [node, str(WEB / "e2e" / f"{name}.mjs"), json.dumps(config)],
        cwd=WEB, env=env, capture_output=True, timeout=SCENARIO_TIMEOUT_S, check=False,
    )  # fmt: skip
    lines = [line for line in r.stdout.decode().splitlines() if line.startswith("{")]
    if r.returncode != 0 or not lines:
        raise ingest.BenchError(f"{relay.name}: scenario failed: {r.stderr.decode()[-2000:]}")
    report: dict[str, Any] = json.loads(lines[-1])
    if not all(report["checks"].values()) or report["errors"]:
        raise ingest.BenchError(f"{relay.name}: {report['errors'] or report['checks']}")
    return report["numbers"]


def run(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"machine": ingest.machine_facts(), "count": args.count, "rounds": args.rounds}
    base = ingest.ensure_baseline(args.baseline)
    out["baseline"] = {"rev": args.baseline, "sha": base.sha, "label": base.label}
    secret = generate_secret_key()
    newest = f"message {args.count - 1:04d}"
    with tempfile.TemporaryDirectory(prefix="buzz-bench-web-") as tmp:
        relays: dict[str, ingest.RelayProc] = {}
        bundles: dict[str, str] = {}
        attached: dict[str, bool] = {}
        try:
            for key, buzz in (("this", None), ("base", base.buzz)):
                home = Path(tmp) / key
                home.mkdir()
                # The baseline runs its own installed code: a PYTHONPATH pointing at this tree
                # (how developers run the bench) would put this tree's page in its place.
                saved = os.environ.pop("PYTHONPATH", None) if buzz else None
                try:
                    relays[key] = ingest.start_buzz(home, buzz=buzz, name=key)
                finally:
                    if saved is not None:
                        os.environ["PYTHONPATH"] = saved
                _, attached[key] = asyncio.run(seed(relays[key].url, secret, args.count, home))
                bundles[key] = page_script(relays[key])
            if (
                bundles["this"] == bundles["base"]
                and base.sha != ingest._git("rev-parse", "HEAD").decode().strip()
            ):
                raise ingest.BenchError(
                    f"both relays serve {bundles['this']}: the baseline is not the baseline"
                )
            times: dict[str, list[int]] = {"this": [], "base": []}
            shown: dict[str, dict[str, Any]] = {}
            for _ in range(args.rounds):
                for key in ("this", "base"):
                    numbers = time_sign_in(relays[key], secret, newest, args.runs)
                    times[key] += numbers["runsMs"]
                    shown[key] = {
                        "articles": numbers["articles"],
                        "code_blocks": numbers["codeBlocks"],
                        "images": numbers.get("images", 0),
                        "attached_files": attached[key],
                    }
            delivery = {
                key: time_delivery(relays[key], secret, newest, args.messages)["deliveryMs"] for key in relays
            }
            window: dict[str, dict[str, Any]] = {}
            if args.long:
                for key in relays:
                    asyncio.run(seed_window(relays[key].url, secret, args.long, Path(tmp) / key))
                for key in ("this", "base"):
                    window[key] = {"scroll": time_scroll(relays[key], secret, args.long, args)}
                for key in ("this", "base"):
                    window[key]["heavy"] = time_heavy(relays[key], secret, args)
        finally:
            for relay in relays.values():
                relay.stop()
    out["load_avg_end"] = ingest.load_avg()
    for key in ("this", "base"):
        out[key] = {"runs_ms": times[key], "median_ms": statistics.median(times[key]), "bundle": bundles[key]}
        out[key] |= shown[key]
        out[key]["delivery_ms"] = delivery[key]
        out[key]["delivery_p50_ms"] = statistics.median(delivery[key])
        out[key] |= window.get(key, {})
    out["long"] = args.long
    out["ratio"] = out["this"]["median_ms"] / out["base"]["median_ms"]
    return out


def render(out: dict[str, Any]) -> str:
    m = out["machine"]
    lines = [
        f"buzz browser bench — {m['date']}",
        f"CPU: {m['cpu']} — {m['cores']} cores — load avg {m['load_avg_start']} at start, {out['load_avg_end']} at end",
        f"{out['count']} messages (every 5th a code block, every 10th an image), "
        f"{out['rounds']} rounds × {len(out['this']['runs_ms']) // out['rounds']} sign-ins per page",
        "",
        f"{'page':<22} {'median':>8}  {'runs (ms)'}",
    ]
    for key, label in (("this", "this tree"), ("base", out["baseline"]["label"])):
        r = out[key]
        lines.append(
            f"{label:<22} {r['median_ms']:>6.0f} ms  {', '.join(map(str, r['runs_ms']))}  ({r['bundle']})"
        )
    ok = out["ratio"] <= TARGET_RATIO
    lines += [
        "",
        f"shown after sign-in: {out['this']['articles']} messages, {out['this']['code_blocks']} code blocks, "
        f"{out['this']['images']} images (baseline: {out['base']['articles']}, {out['base']['code_blocks']}, "
        f"{out['base']['images']}); images attached as files: this tree {out['this']['attached_files']}, "
        f"baseline {out['base']['attached_files']}",
        f"time to the newest message, this tree / {out['baseline']['label']}: {out['ratio']:.2f}× "
        f"(target ≤ {TARGET_RATIO}×: {'MET' if ok else 'NOT MET'})",
        f"tab → tab delivery p50, {len(out['this']['delivery_ms'])} messages: this tree "
        f"{out['this']['delivery_p50_ms']:.0f} ms, {out['baseline']['label']} {out['base']['delivery_p50_ms']:.0f} ms "
        f"(target ≤ {DELIVERY_TARGET_MS} ms: {'MET' if out['this']['delivery_p50_ms'] <= DELIVERY_TARGET_MS else 'NOT MET'})",
    ]
    if out.get("long"):
        lines += ["", *render_window(out)]
    return "\n".join(lines)


def render_window(out: dict[str, Any]) -> list[str]:
    lines = [
        f"{out['long']}-message channel scrolled bottom → top (fps p50, frames > 16.7 ms, > 33.4 ms, "
        "p99 frame, most messages in the DOM, reached the start in):",
    ]
    for key, label in (("this", "this tree"), ("base", out["baseline"]["label"])):
        s = out[key]["scroll"]
        end = (
            f"{s['seconds']:.0f} s"
            if s["reachedStart"]
            else f"NOT within {s['seconds']:.0f} s (up to message {s.get('oldestSeen')})"
        )
        lines.append(
            f"  {label:<20} {s['fps_p50']:>5.1f} fps  {100 * s['over_16_7_share']:>5.1f} %  {100 * s['over_33_share']:>5.1f} %  "
            f"{s['frame_p99_ms']:>6.1f} ms  {s['most']:>6} in DOM  {end}  ({s['frames']} frames)"
        )
    t = out["this"]["scroll"]
    lines.append(
        f"  target 60 fps with the DOM bounded (< {DOM_BOUND} messages): "
        f"{'MET' if t['fps_p50'] >= 59 and t['most'] < DOM_BOUND else 'NOT MET'}"
    )
    h = out["this"]["heavy"]
    lines.append(
        f"heavy use ({h['switches']} channel switches, {h['sends']} sends, {h['threads']} threads, {h['screens']} screens "
        f"of history, {h['sessionS']} s): JS heap after GC"
    )
    for key, label in (("this", "this tree"), ("base", out["baseline"]["label"])):
        h = out[key]["heavy"]
        lines.append(
            f"  {label:<20} {h['heapMb']:>6.1f} MB (after sign-in {h['heapAfterSignInMb']:.1f} MB), {h['domNodes']} DOM nodes"
        )
    ok = out["this"]["heavy"]["heapMb"] <= HEAP_TARGET_MB
    lines.append(f"  target ≤ {HEAP_TARGET_MB} MB: {'MET' if ok else 'NOT MET'}")
    return lines


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", default=BEFORE_ISSUE_26, help="git revision whose page is the yardstick")
    ap.add_argument("--count", type=int, default=1000, help="messages in the channel (100–5000)")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds (1–20)")
    ap.add_argument("--runs", type=int, default=3, help="sign-ins per page and round (1–20)")
    ap.add_argument("--messages", type=int, default=20, help="tab → tab messages per page (1–200)")
    ap.add_argument(
        "--long", type=int, default=10000, help="messages in the scrolled channel (0: skip; 1000–20000)"
    )
    ap.add_argument("--step", type=int, default=60, help="px scrolled up per animation frame (10–1000)")
    ap.add_argument("--scroll-limit", type=int, default=300, help="seconds the scroll may take per page")
    ap.add_argument("--heavy-rounds", type=int, default=30, help="heavy-use rounds (1–200)")
    ap.add_argument("--screens", type=int, default=5, help="screens read back per heavy-use round")
    ap.add_argument("--json", metavar="OUT.json", help="also write the results as JSON")
    args = ap.parse_args(argv)
    if not 100 <= args.count <= 5000 or not 1 <= args.rounds <= 20 or not 1 <= args.runs <= 20:
        ap.error("--count 100–5000, --rounds 1–20, --runs 1–20")
    if not 1 <= args.messages <= 200:
        ap.error("--messages 1–200")
    if (
        (args.long and not 1000 <= args.long <= 20000)
        or not 10 <= args.step <= 1000
        or not 1 <= args.heavy_rounds <= 200
    ):
        ap.error("--long 0 or 1000–20000, --step 10–1000, --heavy-rounds 1–200")
    return args


def main(argv: list[str] | None = None) -> int:
    return clients.bench_main(parse_args(argv), run, render)


if __name__ == "__main__":
    sys.exit(main())
