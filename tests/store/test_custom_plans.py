"""A member's read on PostgreSQL is planned for its own values; the rest keep cached plans
(decision 337)."""

from __future__ import annotations

import pytest

from buzz.store.dialect import Conn
from buzz.store.postgres import PostgresStore
from tests.store.helpers import ALICE, flt, insert_all, make, query_ids
from tests.support.pg import temp_database

pytestmark = pytest.mark.postgres


async def _plan_cache_mode(conn: Conn) -> str:
    rows = await conn.fetch("SHOW plan_cache_mode")
    return str(rows[0][0])


async def test_timed_reads_plan_every_run_and_leave_the_connection_as_it_was() -> None:
    async with temp_database() as dsn:
        store = PostgresStore(dsn, min_size=1, max_size=1)  # one connection: every read shares it
        await store.open()
        try:
            await insert_all(store, *(make(1, f"n{i}", who=ALICE) for i in range(3)))
            assert await store._timed_read(30, _plan_cache_mode) == "force_custom_plan"
            # The setting ended with the timed read's transaction: the next reads on the same
            # connection (point reads, the write path's) keep PostgreSQL's cached plans.
            assert await store._point_read(_plan_cache_mode) == "auto"
            assert len(await query_ids(store, flt(authors=[ALICE.pubkey], kinds=[1], limit=50))) == 3
            assert await store._read(_plan_cache_mode) == "auto"
        finally:
            await store.close()
