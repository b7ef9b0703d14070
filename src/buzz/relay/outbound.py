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
    """FIFO of text frames: at most `max_messages` and `max_bytes` (bytes of `str` memory)."""

    def __init__(self, max_messages: int, max_bytes: int) -> None:
        self.max_messages = max_messages
        self.max_bytes = max_bytes
        self._items: deque[tuple[str, int]] = deque()
        self._bytes = 0
        self._nonempty = asyncio.Event()
        self._room = asyncio.Event()

    def __len__(self) -> int:
        return len(self._items)

    @property
    def bytes(self) -> int:
        """Memory held by the queued messages, bytes."""
        return self._bytes

    def _fits(self, size: int) -> bool:
        if not self._items:
            return True
        return len(self._items) < self.max_messages and self._bytes + size <= self.max_bytes

    def _append(self, text: str, size: int) -> None:
        self._items.append((text, size))
        self._bytes += size
        self._nonempty.set()

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
            self._room.clear()
            await self._room.wait()
        self._append(text, size)

    async def get(self) -> str:
        """The oldest message, waiting for one."""
        while not self._items:
            self._nonempty.clear()
            await self._nonempty.wait()
        text, size = self._items.popleft()
        self._bytes -= size
        self._room.set()
        return text

    def take_ready(self, max_messages: int, max_bytes: int) -> list[str]:
        """Without waiting: the oldest queued messages, at most `max_messages` of them and,
        past the first, at most `max_bytes` of `str` memory in all (possibly none)."""
        out: list[str] = []
        taken = 0
        while self._items and len(out) < max_messages:
            text, size = self._items[0]
            if out and taken + size > max_bytes:
                break
            self._items.popleft()
            self._bytes -= size
            taken += size
            out.append(text)
        if out:
            self._room.set()
        return out

    def clear(self) -> None:
        """Drop everything queued (the connection is closing)."""
        self._items.clear()
        self._bytes = 0
        self._room.set()
