"""The NIP-98 replay guard's table (relay.md §15 item 1, issue 9 item 8), on both backends."""

from __future__ import annotations

from buzz.store.sqlbase import SqlStore

T = 1_700_000_000


async def test_an_id_is_claimed_once_within_its_ttl(store: SqlStore) -> None:
    assert await store.claim_auth_event("a" * 64, 120, now=T)
    assert not await store.claim_auth_event("a" * 64, 120, now=T + 119)
    assert await store.claim_auth_event("b" * 64, 120, now=T + 60)
    assert await store.claim_auth_event("a" * 64, 120, now=T + 120)  # expired: its created_at is stale by now
    assert not await store.claim_auth_event("b" * 64, 120, now=T + 120)


async def test_expired_ids_are_dropped(store: SqlStore) -> None:
    for i in range(50):
        assert await store.claim_auth_event(f"{i:064x}", 120, now=T)
    assert await store.claim_auth_event("c" * 64, 120, now=T + 500)
    rows = await store._read(_count_txn)
    assert rows == 1


async def _count_txn(conn: object) -> int:
    return int((await conn.fetch("SELECT COUNT(*) FROM nip98_seen"))[0][0])  # type: ignore[attr-defined]
