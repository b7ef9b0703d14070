"""Access changes made while Redis is down are not lost (issue 9 item 7, relay.md §4.7, §12.4).

Bob reads a private channel through replica B; Alice removes him on replica A while the bus is
down, so B never hears the `access_changed`. B must not deliver to Bob meanwhile (no cached
"readable" while the bus is deaf), and once the bus is back B re-checks the subscription against
the store and closes it. Our own redis-server is stopped and started; the shared one is untouched.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from buzz.core.event import Event
from buzz.relay.auth.revocation import ACCESS_REVOKED
from tests.replicas.conftest import replica_pair
from tests.replicas.helpers import closed, nothing_more, wait_until
from tests.replicas.own_redis import own_redis
from tests.support.relay import Identity
from tests.workspace.helpers import accepted, create_channel, drain, live, message, put_user

pytestmark = [pytest.mark.redis, pytest.mark.postgres]


async def test_member_removed_during_outage_is_revoked_after_reconnect(
    tmp_path: Path, workspace_id: str, alice: Identity, bob: Identity
) -> None:
    async with (
        own_redis(tmp_path / "redis") as redis,
        replica_pair(tmp_path, redis.url, workspace_id) as (a, b),
        a.client(alice) as alice_a,
        b.client(alice) as alice_b,
        b.client(bob) as bob_b,
    ):
        bus_a, bus_b = a.relay.bus, b.relay.bus
        assert bus_a is not None and bus_b is not None
        channel = await create_channel(alice_a, alice, "private")
        await put_user(alice_a, alice, channel, bob.pubkey)
        sub = await live(bob_b, {"kinds": [9], "#h": [channel]})
        before = await message(alice_b, alice, channel, "bob may read this")  # fills B's cache
        assert (await sub.next()).id == before.id

        await redis.stop()
        await wait_until(lambda: not bus_a.connected and not bus_b.connected, 10, "both to notice")
        removal = Event.create(alice.secret, 9001, "", [["h", channel], ["p", bob.pubkey]])
        await accepted(alice_a, removal)  # its access_changed cannot reach B
        await wait_until(lambda: bus_a.unsent_access_changes > 0, 10, "A to keep the failed access_changed")
        during = await message(alice_b, alice, channel, "not for bob (outage)")
        await nothing_more(sub)  # B asked the store, not its cache

        await redis.start()
        await wait_until(lambda: bus_a.connected and bus_b.connected, 40, "both to reconnect")
        assert await closed(sub, 10) == ACCESS_REVOKED
        await wait_until(lambda: bus_a.unsent_access_changes == 0, 10, "A to resend it")
        after = await message(alice_a, alice, channel, "not for bob (after)")
        assert [e.id for e in drain(sub)] == []
        async with b.client(bob) as again:  # and a new REQ on B is refused by the store's answer
            with pytest.raises(Exception) as refused:
                await again.query([{"kinds": [9], "#h": [channel]}])
            assert "restricted" in str(refused.value)
        assert {during.id, after.id} <= {e.id for e in await alice_b.query([{"kinds": [9], "#h": [channel]}])}
