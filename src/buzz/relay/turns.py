"""Store-queue order for pipelined events of one connection (docs/decisions.md 2a, 74).

Pipelined events validate concurrently, but each must queue its write only after the event
before it on the connection has queued its own (or finished without one), so commits and OKs
keep arrival order. A `Turn` is one event's place in that chain.
"""

from __future__ import annotations

import asyncio


class Turn:
    """`wait()` returns once the previous turn is released; `release()` is idempotent and must
    be called on every path (it is what lets the next event queue its write)."""

    __slots__ = ("_done", "_prev")

    def __init__(self, prev: Turn | None) -> None:
        self._prev = prev
        self._done = asyncio.Event()

    async def wait(self) -> None:
        prev = self._prev
        if prev is not None:
            await prev._done.wait()
            self._prev = None  # drop the chain behind us

    def release(self) -> None:
        self._done.set()
        self._prev = None
