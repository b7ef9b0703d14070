"""A throwaway PostgreSQL database per test.

`temp_database()` CREATEs a uniquely named database on the test server, yields its DSN and
DROPs it afterwards. The server is `BUZZ_TEST_POSTGRES_URL` (an admin DSN), by default
`postgresql://postgres@127.0.0.1:5432/postgres`. When it is unreachable the test is skipped
with the command that starts it, or fails when `CI=true` (CI must not skip silently).
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import AsyncIterator
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

DEFAULT_ADMIN_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"
START_HINT = "pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start"


def admin_dsn() -> str:
    return os.environ.get("BUZZ_TEST_POSTGRES_URL", DEFAULT_ADMIN_DSN)


def _with_database(dsn: str, name: str) -> str:
    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(path="/" + name))


async def _connect_admin() -> asyncpg.Connection:
    dsn = admin_dsn()
    try:
        return await asyncpg.connect(dsn, timeout=5)
    except (OSError, asyncpg.PostgresError, TimeoutError) as exc:
        message = f"PostgreSQL unreachable at {dsn} ({exc}); start it with: {START_HINT}"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


@contextlib.asynccontextmanager
async def temp_database() -> AsyncIterator[str]:
    """Yield the DSN of a freshly created, empty database; drop it (forcefully) on exit."""
    name = f"buzz_test_{uuid.uuid4().hex[:16]}"
    admin = await _connect_admin()
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    try:
        yield _with_database(admin_dsn(), name)
    finally:
        admin = await _connect_admin()
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()
