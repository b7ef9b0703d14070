"""Interop, issue 25: nostr-tools, NDK (JavaScript, run by Node) and nostr-sdk (rust-nostr's
Python bindings, in a process of its own) through every relay item of the issue — NIP-17 wraps
dated 36 h back, kinds 10050 / 10063 / 1111 / 6 / 16 / 30024 / the ephemeral range, two AUTHs on
one socket, filters without `kinds`, `OK false` for what is never served, reactions matched by
`#h`, deletions of several targets, CLOSE without CLOSED and the NIP-11 document — against the
real relay on SQLite and PostgreSQL. Each client script prints the checks it ran and what went
wrong; the assertions below require every check to have run and none to have failed."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from tests.support.relay import RunningRelay

HERE = Path(__file__).resolve().parent

NOSTR_TOOLS_CHECKS = {
    "nip11 has no null field",
    "nip11 clock window",
    "repost kinds",
    "10050 served",
    "authors-only filter",
    "the author sees its draft",
    "#k without kinds",
    "{} is served, the draft dropped",
    "only-gated kinds are CLOSED",
    "authors + limit 0 gets EOSE then live",
    "24133 relayed live",
    "NIP-17 wraps read by the recipient",
    "wraps gated to their p",
    "second AUTH accepted",
    "reads with the union of both keys",
    "superseded version refused",
    "reaction without h refused with the fix",
    "reaction matched by #h",
    "deletion of two targets",
    "a deleted event is refused",
    "no CLOSED after CLOSE",
    "no empty CLOSED at all",
    "no event outside its filter",
}


def _node(package: str) -> str:
    path = shutil.which("node")
    if path is None or not (HERE / "node_modules" / package).exists():
        if os.environ.get("CI") == "true":
            pytest.fail("node and tests/interop/node_modules are required in CI (make test installs them)")
        pytest.skip("needs Node.js and `npm ci` in tests/interop (make test does it)")
    return path


async def _run(*argv: str, timeout: float = 120) -> dict:
    proc = await asyncio.create_subprocess_exec(
        *argv, cwd=HERE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    stdout, stderr = await asyncio.wait_for(proc.communicate(), timeout)
    assert proc.returncode == 0, stderr.decode()[-3000:]
    lines = stdout.decode().strip().splitlines()
    assert lines, stderr.decode()[-3000:]
    out = json.loads(lines[-1])
    out["stderr"] = stderr.decode()[-3000:]
    return out


def _passed(out: dict, expected: set[str]) -> None:
    assert out["errors"] == [], (out["errors"], out["stderr"])
    assert set(out["checks"]) == expected, sorted(expected ^ set(out["checks"]))


async def test_nostr_tools(relay: RunningRelay) -> None:
    out = await _run(_node("nostr-tools"), str(HERE / "nostr_tools_citizen.mjs"), relay.url)
    _passed(out, NOSTR_TOOLS_CHECKS)


NDK_CHECKS = {
    "nip11 has no null field",
    "nip11 clock window",
    "10050 served",
    "authors-only filter",
    "the author sees its draft",
    "#k without kinds",
    "only-gated kinds are CLOSED",
    "authors + limit 0 gets EOSE then live",
    "24133 relayed live",
    "NIP-17 wraps read by the recipient",
    "wraps gated to their p",
    "second AUTH accepted",
    "reads with the union of both keys",
    "superseded version refused",
    "NDK reaction carries the h",
    "reaction matched by #h",
    "deletion of two targets",
    "a deleted event is refused",
    "no CLOSED after CLOSE",
}


async def test_ndk(relay: RunningRelay) -> None:
    out = await _run(_node("@nostr-dev-kit/ndk"), str(HERE / "ndk_citizen.mjs"), relay.url)
    _passed(out, NDK_CHECKS)


NOSTR_SDK_CHECKS = {
    "nip11 has no null field",
    "nip11 parsed by the sdk",
    "nip11 clock window",
    "new kinds stored",
    "10050 served",
    "authors-only filter",
    "the author sees its draft",
    "#k without kinds",
    "authors + limit 0 gets EOSE then live",
    "only-gated kinds are CLOSED",
    "24133 relayed live",
    "second AUTH accepted",
    "writes as the second key",
    "the sdk's wrap stored",
    "a wrap 36 h old stored",
    "NIP-17 wraps read by the recipient",
    "wraps gated to their p",
    "reads with the union of both keys",
    "superseded version refused",
    "reaction without h refused with the fix",
    "reaction with h stored",
    "reaction matched by #h",
    "deletion of two targets",
    "a deleted event is refused",
    "no CLOSED after CLOSE",
}


async def test_nostr_sdk(relay: RunningRelay) -> None:
    out = await _run(sys.executable, str(HERE / "nostr_sdk_citizen.py"), relay.url)
    _passed(out, NOSTR_SDK_CHECKS)
