"""Run a browser scenario (web/e2e/<name>.mjs: playwright-core driving Debian's Chromium)
against a real relay and hand back its JSON report.

Chromium is /usr/bin/chromium (`apt-get install -y chromium`) or $BUZZ_CHROMIUM; playwright-core
comes from `npm ci` in web/ (make test does it). With CI=true a missing one fails the test;
elsewhere the test skips with the command that installs it.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests.support.deadline import scaled

ROOT = Path(__file__).resolve().parents[2]
WEB = ROOT / "web"
E2E = WEB / "e2e"
# Screenshots go to docs/images only when asked (`make screenshots`), so a test run leaves the
# committed images alone; otherwise to a scratch directory.
IMAGES = os.environ.get("BUZZ_SCREENSHOTS_DIR") or tempfile.mkdtemp(prefix="buzz-screens-")
CHROMIUM = os.environ.get("BUZZ_CHROMIUM", "/usr/bin/chromium")
BUZZ = str(Path(sys.executable).parent / "buzz")


def require_browser() -> str:
    """The node executable, after checking Chromium and playwright-core are there."""
    missing = []
    if not Path(CHROMIUM).is_file():
        missing.append(f"Chromium at {CHROMIUM} (apt-get update && apt-get install -y chromium)")
    node = shutil.which("node")
    if node is None:
        missing.append("Node.js 20 (apt-get install -y nodejs npm)")
    if not (WEB / "node_modules" / "playwright-core").is_dir():
        missing.append("playwright-core (cd web && npm ci; make test does it)")
    if missing:
        what = "browser tests need " + "; ".join(missing)
        if os.environ.get("CI") == "true":
            pytest.fail(what)
        pytest.skip(what)
    assert node is not None
    return node


async def spawn(name: str, config: dict[str, Any], stdin: int | None = None) -> asyncio.subprocess.Process:
    """`node web/e2e/<name>.mjs <config + buzz, images as JSON>` in web/, without our BUZZ_* variables
    but BUZZ_CHROMIUM; stdout and stderr piped, stdin as given (inherited by default)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BUZZ_")}
    env["BUZZ_CHROMIUM"] = CHROMIUM
    return await asyncio.create_subprocess_exec(
        require_browser(),
        str(E2E / f"{name}.mjs"),
        json.dumps(config | {"buzz": BUZZ, "images": IMAGES}),
        cwd=WEB,
        env=env,
        stdin=stdin,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def run_scenario(name: str, config: dict[str, Any], timeout: float = 240) -> dict[str, Any]:
    """Run web/e2e/<name>.mjs with `config` (JSON in argv); its last stdout line is the report
    {"checks": {name: bool}, "numbers": {…}, "errors": [...], "console": [...], …}."""
    proc = await spawn(name, config)
    try:
        stdout, stderr = await asyncio.wait_for(proc.communicate(), scaled(timeout))
    except TimeoutError:
        proc.kill()
        stdout, stderr = await proc.communicate()
        pytest.fail(f"scenario {name} timed out; stderr: {stderr.decode()[-3000:]}")
    lines = [line for line in stdout.decode().splitlines() if line.strip()]
    assert proc.returncode == 0 and lines, f"scenario {name} failed: {stderr.decode()[-4000:]}"
    report: dict[str, Any] = json.loads(lines[-1])
    report["stderr"] = stderr.decode()[-6000:]
    return report


class LiveScenario:
    """A scenario that runs beside the test and talks with it (web/e2e/lib.mjs `reached` /
    `until`): it prints `{"step": name, …}` lines as it gets somewhere and waits for
    `{"go": name, …}` lines on its stdin. Each side waits on the other's events, not a clock."""

    def __init__(self, proc: asyncio.subprocess.Process, name: str) -> None:
        self.proc, self.name = proc, name
        self.steps: dict[str, dict[str, Any]] = {}
        self.lines: list[str] = []
        self._new = asyncio.Event()
        self._stderr = bytearray()
        self._readers = [asyncio.create_task(self._read_stdout()), asyncio.create_task(self._read_stderr())]

    @classmethod
    async def start(cls, name: str, config: dict[str, Any]) -> LiveScenario:
        return cls(await spawn(name, config, stdin=asyncio.subprocess.PIPE), name)

    async def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        async for raw in self.proc.stdout:
            line = raw.decode().strip()
            if not line:
                continue
            self.lines.append(line)
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if isinstance(msg, dict) and isinstance(msg.get("step"), str):
                self.steps[msg["step"]] = msg
            self._new.set()
        self._new.set()

    async def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        async for raw in self.proc.stderr:
            self._stderr += raw

    @property
    def stderr(self) -> str:
        return self._stderr.decode(errors="replace")[-6000:]

    async def reached(self, step: str, timeout: float = 120) -> dict[str, Any]:
        """The scenario's `step` message, once it has printed it; fails if it ended first."""
        async with asyncio.timeout(scaled(timeout)):
            while step not in self.steps:
                if self._readers[0].done():
                    pytest.fail(f"scenario {self.name} ended before step {step!r}: {self.stderr}")
                self._new.clear()
                await self._new.wait()
        return self.steps[step]

    def go(self, name: str, **data: Any) -> None:
        """Let the scenario past its `until(name)`."""
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps({"go": name} | data) + "\n").encode())

    async def report(self, timeout: float = 120) -> dict[str, Any]:
        """Wait for the scenario to end; its report (as `run_scenario`'s)."""
        try:
            await asyncio.wait_for(self.proc.wait(), scaled(timeout))
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()
            pytest.fail(f"scenario {self.name} timed out; stderr: {self.stderr}")
        await asyncio.gather(*self._readers)
        reports = [line for line in self.lines if line.startswith("{") and '"checks"' in line]
        assert self.proc.returncode == 0 and reports, f"scenario {self.name} failed: {self.stderr}"
        report: dict[str, Any] = json.loads(reports[-1])
        report["stderr"] = self.stderr
        return report

    async def abort(self) -> None:
        if self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()
        for task in self._readers:
            task.cancel()


def assert_all_passed(report: dict[str, Any], expected: list[str]) -> None:
    """Every expected check ran and passed, and the page raised nothing."""
    checks = report["checks"]
    assert [name for name in expected if name not in checks] == [], report
    failed = {name: ok for name, ok in checks.items() if not ok}
    assert failed == {} and report["errors"] == [], json.dumps(report, indent=1)
