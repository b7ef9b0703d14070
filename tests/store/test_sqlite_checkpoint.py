"""Decision 381: the SQLite writer never checkpoints inside a COMMIT; the `sqlite-checkpoint`
thread copies the WAL into the database while writes go on, and stops with the store. On a
real SQLite file, read back through connections of its own."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

from buzz.store.sqlite import SqliteStore
from tests.store.helpers import T0, make
from tests.support.deadline import scaled


def _threads() -> set[str]:
    return {t.name for t in threading.enumerate()}


async def test_the_wal_is_checkpointed_off_the_writer(tmp_path: Path) -> None:
    path = tmp_path / "relay.sqlite3"
    store = SqliteStore(path)
    await store.open()
    try:
        assert "sqlite-checkpoint" in _threads()
        writer = store._writer
        assert writer is not None
        assert writer.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
        # more than the 1,000 WAL pages at which SQLite would checkpoint inside a COMMIT
        for start in range(0, 3000, 300):
            await asyncio.gather(
                *(store.insert(make(1, "x" * 2000, created_at=T0 + start + i)) for i in range(300))
            )
        # the events reach the database file itself while the store is open: no COMMIT copies
        # WAL pages any more, so only the checkpoint thread can have put them there
        deadline = asyncio.get_running_loop().time() + scaled(10)
        checkpointer = store._checkpointer
        assert checkpointer is not None
        # the file grows while a checkpoint copies pages; `_done` moves once it returned
        while path.stat().st_size < 3000 * 2000 or checkpointer._done == 0:
            assert asyncio.get_running_loop().time() < deadline, (path.stat().st_size, checkpointer._done)
            await asyncio.sleep(0.1)
    finally:
        await store.close()
    assert "sqlite-checkpoint" not in _threads()
    reopened = sqlite3.connect(path)
    try:
        assert reopened.execute("SELECT count(*) FROM events WHERE kind = 1").fetchone()[0] == 3000
    finally:
        reopened.close()
