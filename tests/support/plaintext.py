"""Does the relay's database hold a plaintext? Every byte of the SQLite files (main, WAL,
shared memory) of the data directory, or every row of every PostgreSQL table as text. Used by
the end-to-end encryption tests: the operator must not be able to read a private DM."""

from __future__ import annotations

import asyncpg

from tests.support.relay import RunningRelay


async def database_holds(running: RunningRelay, needle: str) -> bool:
    """True when `needle` (UTF-8, or its hex as PostgreSQL prints bytea) is in the database."""
    config = running.relay.config
    raw = needle.encode()
    if config.database_url:
        conn = await asyncpg.connect(config.database_url)
        try:
            tables = await conn.fetch(
                "SELECT schemaname, tablename FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema')"
            )
            for t in tables:
                rows = await conn.fetch(f'SELECT r::text AS v FROM "{t["schemaname"]}"."{t["tablename"]}" r')
                for row in rows:
                    if needle in row["v"] or raw.hex() in row["v"]:
                        return True
        finally:
            await conn.close()
    return any(path.is_file() and raw in path.read_bytes() for path in config.data_dir.rglob("*"))
