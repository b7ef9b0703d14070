"""One relay per SQLite database: an exclusive lock file beside it, holding the holder's PID.

SQLite is single-process for the relay (relay.md §13.1: one writer, an in-memory fan-out), so a
second relay on the same file would accept events the first never delivers. The lock is a
`flock` on `relay.lock` in the database's folder: the kernel drops it when the process dies
(kill -9 included), so a stale file never blocks a restart. `buzz admin` does not take it: its
short writes go through SQLite's own locking beside a running relay.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

LOCK_NAME = "relay.lock"


class DataDirLocked(OSError):
    """Another live process holds the lock; the message names its PID."""


@contextlib.contextmanager
def exclusive(folder: Path) -> Iterator[Path]:
    """Hold `<folder>/relay.lock` for the duration (the folder is created). Raises
    DataDirLocked when another process holds it, OSError when the file cannot be opened."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            raise DataDirLocked(
                f"{folder} is in use by another relay (pid {holder}, lock file {path}); "
                "stop it first, or use another --data-dir"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        try:
            yield path
        finally:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
    finally:
        os.close(fd)  # closing the descriptor releases the flock
