"""The AUTH deadline measures the client (docs/decisions.md 273): an AUTH the relay read in time
is answered however long the relay then takes over it. Real relay on PostgreSQL; the relay's
ban-list read at AUTH is held back by a lock another session holds on the table, as a store
busy with other work holds it back."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from buzz.client import RelayError
from tests.support.deadline import scaled
from tests.support.pg import temp_database
from tests.support.relay import Identity, relay_on

DEADLINE_S = 0.5


async def _admission_waits_on_the_lock(locker: asyncpg.Connection) -> bool:
    return bool(
        await locker.fetchval(
            "SELECT count(*) FROM pg_locks WHERE relation = 'relay_bans'::regclass AND NOT granted"
        )
    )


async def test_an_auth_read_in_time_is_answered_after_the_deadline(tmp_path, alice: Identity) -> None:
    async with temp_database() as dsn, relay_on(tmp_path, dsn, auth_timeout_s=DEADLINE_S) as running:
        locker = await asyncpg.connect(dsn)
        client = running.client(alice)
        try:
            held = locker.transaction()
            await held.start()
            await locker.execute("LOCK TABLE relay_bans IN ACCESS EXCLUSIVE MODE")
            connecting = asyncio.create_task(client.connect())
            while not await _admission_waits_on_the_lock(locker):  # the relay has read the AUTH
                await asyncio.sleep(0.02)
            # The relay runs on this loop: once this sleep ends, its deadline timer (due earlier)
            # has fired, and so has the check it defers by one loop turn.
            await asyncio.sleep(2 * DEADLINE_S)
            assert not connecting.done() and not client.closed
            await held.rollback()
            await connecting  # OK true: authenticated
            assert client.pubkey == alice.pubkey
            assert await client.count([{"kinds": [1], "authors": [alice.pubkey]}]) == 0  # still open
        finally:
            await client.close()
            await locker.close()


async def test_a_refused_auth_after_the_deadline_closes_the_connection(tmp_path, alice: Identity) -> None:
    """The deadline still holds for a client that does not authenticate: an AUTH refused after
    it went by (here: a closed workspace, whose refusal alone keeps the connection) closes the
    connection at once."""
    config = {"auth_timeout_s": DEADLINE_S, "require_relay_membership": True}
    async with temp_database() as dsn, relay_on(tmp_path, dsn, **config) as running:
        locker = await asyncpg.connect(dsn)
        client = running.client(alice, auth=False)
        try:
            await client.connect()
            held = locker.transaction()
            await held.start()
            await locker.execute("LOCK TABLE relay_bans IN ACCESS EXCLUSIVE MODE")
            authenticating = asyncio.create_task(client.authenticate())
            while not await _admission_waits_on_the_lock(locker):
                await asyncio.sleep(0.02)
            await asyncio.sleep(2 * DEADLINE_S)
            assert not client.closed  # the AUTH is still being answered
            await held.rollback()
            with pytest.raises(RelayError, match="restricted: not a relay member"):
                await authenticating
            await asyncio.wait_for(client.wait_closed(), scaled(10))  # closed by the relay
        finally:
            await client.close()
            await locker.close()
