"""Deadlines in tests are hang detectors, never measurements (docs/decisions.md 270).

A bound that holds on an idle box is a wall-clock assumption on a loaded one: with L runnable
processes on N cores each gets about N/L of a core, so CPU-bound work takes L/N times as long.
`scaled(s)` stretches a bound that is generous on an idle box (its wait takes a tenth of it or
less) by that factor, read when the wait starts; the per-test timeout (pytest-timeout, the
`timeout` ini value) is stretched the same way by tests/conftest.py. Nothing here ever shortens a
bound, and nothing retries: a wait still ends on its condition, the deadline only says when a
wait that never ends is reported.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable


def slowdown() -> float:
    """How many times longer CPU-bound work takes now than on an idle box: runnable processes
    per core (the 1-minute load average over the cores), at least 1."""
    try:
        load = os.getloadavg()[0]
    except OSError:  # no load average on this platform: assume an idle box
        return 1.0
    return max(1.0, load / (os.cpu_count() or 1))


def scaled(seconds: float) -> float:
    """`seconds` (a bound that is generous on an idle box) stretched by the present slowdown."""
    return seconds * slowdown()


async def wait_until(condition: Callable[[], bool], timeout: float = 5.0, what: str = "condition") -> None:
    """Poll `condition` until it holds; fail after `timeout` seconds (pass a `scaled` one)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.02)
