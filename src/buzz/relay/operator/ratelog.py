"""Rate-limited log lines for repeated trouble (a Redis outage, a flapping bus).

An outage makes the same failure happen once per publish, per presence write, per reconnect
attempt. `RepeatLog` writes the first occurrence of a key at once, then at most one line per
`interval_s` that says how many more happened since ("… (repeated 412 times in the last 30 s)").
`recovered(key)` writes what is still counted and forgets the key, so the end of an outage is
never silent about its tail.

Keys are short fixed strings chosen by the caller ("redis-publish"), never client data, so the
table stays as small as the set of call sites.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

DEFAULT_INTERVAL_S = 30.0


@dataclass(slots=True)
class _Pending:
    window_start: float  # monotonic time of the last line written for this key
    suppressed: int = 0
    level: int = logging.WARNING
    message: str = ""
    args: tuple[object, ...] = ()


class RepeatLog:
    """Wraps a `logging.Logger`; one instance per logger (module).

    `clock` returns monotonic seconds (tests pass their own). Not thread-safe: call it from the
    event loop, as every Redis/bus path does.
    """

    def __init__(
        self,
        logger: logging.Logger,
        interval_s: float = DEFAULT_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._log = logger
        self._interval = interval_s
        self._clock = clock
        self._pending: dict[str, _Pending] = {}

    def warning(self, key: str, message: str, *args: object) -> None:
        self.log(logging.WARNING, key, message, *args)

    def error(self, key: str, message: str, *args: object) -> None:
        self.log(logging.ERROR, key, message, *args)

    def log(self, level: int, key: str, message: str, *args: object) -> None:
        """Write `message % args` now if `key` is new or its window has passed; else count it.

        A line written after suppressions carries the newest message and the count.
        """
        now = self._clock()
        pending = self._pending.get(key)
        if pending is None:
            self._pending[key] = _Pending(now)
            self._log.log(level, message, *args)
            return
        if now - pending.window_start < self._interval:
            pending.suppressed += 1
            pending.level, pending.message, pending.args = level, message, args
            return
        repeated, elapsed = pending.suppressed, now - pending.window_start
        pending.window_start, pending.suppressed = now, 0
        if repeated:
            self._log.log(
                level, message + " (repeated %d times in the last %.0f s)", *args, repeated, elapsed
            )
        else:
            self._log.log(level, message, *args)

    def recovered(self, key: str, message: str | None = None, *args: object) -> None:
        """The trouble named `key` is over: flush its count, then log `message` at INFO if given.

        Does nothing for a key that never fired, so it may be called on every success.
        """
        pending = self._pending.pop(key, None)
        if pending is None:
            return
        if pending.suppressed:
            elapsed = self._clock() - pending.window_start
            self._log.log(
                pending.level,
                pending.message + " (repeated %d times in the last %.0f s)",
                *pending.args,
                pending.suppressed,
                elapsed,
            )
        if message is not None:
            self._log.info(message, *args)

    def active(self, key: str) -> bool:
        """True while `key` has fired and not been marked recovered."""
        return key in self._pending
