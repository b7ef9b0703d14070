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
_KIND = int(os.environ.get(ENV) or -1)


def after_commit(kind: int) -> None:
    """Kill this process when `kind` is the configured crash kind."""
    if kind == _KIND:
        os.kill(os.getpid(), signal.SIGKILL)
