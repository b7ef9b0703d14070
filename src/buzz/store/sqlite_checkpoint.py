"""WAL checkpoints of the SQLite store on a thread of their own (decision 381).

SQLite's automatic checkpoint runs inside the COMMIT that pushes the WAL past 1,000 pages: the
writer thread copies the WAL into the database file and fsyncs it before that commit returns,
so every write queued behind it — a message's OK, a workflow's next step — waits tens of
milliseconds more, a few times a minute under a steady write load. Here the writer's
connection has `wal_autocheckpoint = 0` and this thread runs a PASSIVE checkpoint on its own
connection after commits: PASSIVE never takes the write lock, so the writer goes on appending
to the WAL while the pages are copied. The WAL is bounded as before: it is checkpointed at
least every `period` seconds while there are commits, and again when its writer closes.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path


class Checkpointer:
    def __init__(
        self, path: Path, connect: Callable[[Path], sqlite3.Connection], period: float = 0.5
    ) -> None:
        self._conn = connect(path)
        self._period = period
        self._commits = 0  # bumped by the writer thread after each COMMIT
        self._done = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="sqlite-checkpoint", daemon=True)
        self._thread.start()

    def committed(self) -> None:
        """Called by the writer thread after a COMMIT (an int bump: no lock, no wake-up)."""
        self._commits += 1

    def _loop(self) -> None:
        while not self._stop.wait(self._period):
            seen = self._commits
            if seen == self._done:
                continue
            try:
                self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            except sqlite3.Error:
                continue  # a busy checkpointer is retried at the next period
            self._done = seen

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self._conn.close()
