"""A connection's outbound queue, bounded in messages and in bytes (relay.md §7.9, issue 9 item 3).

`offer` never waits (live fan-out: a full queue is the caller's drop); `put` waits for room
(the connection's own stored results). A message is charged what its `str` occupies in
memory (`sys.getsizeof`), so the byte bound is the memory the queue can hold. A message
larger than the whole bound still goes out when the queue is empty, so nothing is stuck.
"""

from __future__ import annotations

import asyncio
import sys
from collections import deque


class Outbound:
    """FIFO of text frames: at most `max_messages` and `max_bytes` (bytes of `str` memory).

    Idle connections are the common case (issue 17: 10,000 of them), so the deque and the
    waiters' futures exist only while something is queued or waited for.
    """

    __slots__ = ("_bytes", "_items", "_nonempty", "_room", "max_bytes", "max_messages")

    def __init__(self, max_messages: int, max_bytes: int) -> None:
        self.max_messages = max_messages
        self.max_bytes = max_bytes
        self._items: deque[tuple[str, int]] | None = None  # None while empty
        self._bytes = 0
        self._nonempty: asyncio.Future[None] | None = None  # a `get` waiting
        self._room: asyncio.Future[None] | None = None  # a `put` waiting

    def __len__(self) -> int:
        return len(self._items) if self._items is not None else 0

    @property
    def empty(self) -> bool:
        return not self._items

    @property
    def bytes(self) -> int:
        """Memory held by the queued messages, bytes."""
        return self._bytes

    def _fits(self, size: int) -> bool:
        if not self._items:
            return True
        return len(self._items) < self.max_messages and self._bytes + size <= self.max_bytes

    def _append(self, text: str, size: int) -> None:
        if self._items is None:
            self._items = deque()
        self._items.append((text, size))
        self._bytes += size
        _wake(self._nonempty)
        self._nonempty = None

    def _popped(self) -> None:
        if not self._items:
            self._items = None  # give the deque back while idle
        _wake(self._room)
        self._room = None

    def offer(self, text: str) -> bool:
        """Enqueue if it fits; False (nothing queued) when full."""
        size = sys.getsizeof(text)
        if not self._fits(size):
            return False
        self._append(text, size)
        return True

    async def put(self, text: str) -> None:
        """Enqueue, waiting until it fits."""
        size = sys.getsizeof(text)
        while not self._fits(size):
            if self._room is None:
                self._room = asyncio.get_running_loop().create_future()
            await asyncio.shield(self._room)  # one waiter cancelled must not cancel the others
        self._append(text, size)

    async def get(self) -> str:
        """The oldest message, waiting for one."""
        while not self._items:
            if self._nonempty is None:
                self._nonempty = asyncio.get_running_loop().create_future()
            await asyncio.shield(self._nonempty)
        assert self._items is not None
        text, size = self._items.popleft()
        self._bytes -= size
        self._popped()
        return text

    def take_ready(self, max_messages: int, max_bytes: int) -> list[str]:
        """Without waiting: the oldest queued messages, at most `max_messages` of them and,
        past the first, at most `max_bytes` of `str` memory in all (possibly none)."""
        out: list[str] = []
        items = self._items
        if not items:
            return out
        taken = 0
        while items and len(out) < max_messages:
            text, size = items[0]
            if out and taken + size > max_bytes:
                break
            items.popleft()
            self._bytes -= size
            taken += size
            out.append(text)
        self._popped()
        return out

    def clear(self) -> None:
        """Drop everything queued (the connection is closing)."""
        self._items = None
        self._bytes = 0
        _wake(self._room)
        self._room = None


def _wake(waiter: asyncio.Future[None] | None) -> None:
    if waiter is not None and not waiter.done():
        waiter.set_result(None)
