"""Store-queue order for pipelined events of one connection (docs/decisions.md 2a, 74).

Pipelined events validate concurrently, but each must queue its write only after the event
before it on the connection has queued its own (or finished without one), so commits and OKs
keep arrival order. A `Turn` is one event's place in that chain.
"""

from __future__ import annotations

import asyncio


class Turn:
    """`wait()` returns once the previous turn is released; `release()` is idempotent and must
    be called on every path (it is what lets the next event queue its write).

    A flag and, only when someone actually waits, one future: most turns are released before
    the next event looks at them, and an `asyncio.Event` per event cost more than the rest.
    """

    __slots__ = ("_prev", "_released", "_waiter")

    def __init__(self, prev: Turn | None) -> None:
        self._prev = prev
        self._released = False
        self._waiter: asyncio.Future[None] | None = None

    async def wait(self) -> None:
        prev = self._prev
        if prev is not None:
            if not prev._released:
                waiter = prev._waiter
                if waiter is None or waiter.done():  # done: an earlier waiter was cancelled
                    waiter = prev._waiter = asyncio.get_running_loop().create_future()
                await waiter
            self._prev = None  # drop the chain behind us

    def release(self) -> None:
        self._released = True
        self._prev = None
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
