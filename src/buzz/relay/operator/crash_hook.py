"""Test-only crash point: SIGKILL the relay right after an event of one kind commits.

`BUZZ_TEST_KILL_AFTER_COMMIT_KIND=<kind>` in a relay process's environment makes the first
committed event of that kind kill the process (SIGKILL, as `kill -9` does) before its
follow-ups run: the window of issue 9 item 5, reproduced on purpose by
tests/relay/test_crash_repair.py. Unset — always, outside that test — it does nothing.
It is not a configuration setting and is not documented for operators.
"""

from __future__ import annotations

import os
import signal

ENV = "BUZZ_TEST_KILL_AFTER_COMMIT_KIND"
COUNT_ENV = "BUZZ_TEST_KILL_AFTER_COMMIT_COUNT"  # the n-th commit of that kind (default the first)
_KIND = int(os.environ.get(ENV) or -1)
_left = [int(os.environ.get(COUNT_ENV) or 1)]


def after_commit(kind: int) -> None:
    """Kill this process when `kind` is the configured crash kind (its n-th commit)."""
    if kind == _KIND:
        _left[0] -= 1
        if _left[0] <= 0:
            os.kill(os.getpid(), signal.SIGKILL)
