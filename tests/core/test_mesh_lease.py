"""The sans-I/O lease rules of huddle.md §9.3, §9.4 and §9.8: keys, value format, the fence
check order, join resolution and the generation floor."""

from __future__ import annotations

import pytest

from buzz.core.mesh_lease import (
    FenceReason,
    GenerationFloor,
    Lease,
    LocalOwner,
    RemoteOwner,
    fence_check,
    lease_keys,
    new_runtime_id,
    parse_lease,
    resolve,
)

A, B = "a" * 64, "b" * 64


def test_keys_share_the_braced_session_hash_tag() -> None:
    assert lease_keys("sid", "ws") == ("buzz:{sid}:ws:tunnel:lease", "buzz:{sid}:ws:tunnel:generation")


def test_runtime_ids_are_fresh_64_hex() -> None:
    one, two = new_runtime_id(), new_runtime_id()
    assert one != two and len(one) == 64 and int(one, 16) >= 0 and one == one.lower()


def test_value_round_trips_and_malformed_values_raise() -> None:
    lease = Lease(A, 7)
    assert lease.value() == f"{A}|7|huddle-control"
    assert parse_lease(lease.value().encode()) == lease
    assert parse_lease(None) is None
    for bad in (f"{A}|0|huddle-control", f"{A}|x|huddle-control", f"{A}|3|other", "A" * 64 + "|3|huddle-control",
                f"{A[:-1]}|3|huddle-control", f"{A}|3", f"{A}|-1|huddle-control"):  # fmt: skip
        with pytest.raises(ValueError):
            parse_lease(bad)


def test_fence_check_order() -> None:
    lease = Lease(A, 5)
    assert fence_check(Lease(A, 5), lease, 5) is None
    assert fence_check(Lease(A, 4), lease, 5) is FenceReason.STALE_GENERATION
    assert fence_check(Lease(A, 4), None, 5) is FenceReason.STALE_GENERATION  # stale beats missing
    assert fence_check(Lease(A, 5), None, 5) is FenceReason.NO_ACTIVE_LEASE
    assert fence_check(Lease(A, 6), lease, 5) is FenceReason.FUTURE_GENERATION
    assert fence_check(Lease(B, 5), lease, 5) is FenceReason.OWNER_MISMATCH
    assert fence_check(Lease(A, 1), None, 0) is FenceReason.NO_ACTIVE_LEASE


def test_resolve_names_the_owner() -> None:
    assert resolve(A, Lease(A, 2), acquired=True) == LocalOwner(Lease(A, 2), fresh=True)
    assert resolve(A, Lease(A, 2), acquired=False) == LocalOwner(Lease(A, 2), fresh=False)
    assert resolve(A, Lease(B, 2), acquired=False) == RemoteOwner(Lease(B, 2))


def test_generation_floor() -> None:
    floor = GenerationFloor()
    assert floor.admit("s", 3)  # first seen is recorded
    assert floor.admit("s", 3) and floor.admit("s", 4)  # equal or higher passes, higher raises
    assert not floor.admit("s", 3) and floor.dropped == 1  # below the floor: dropped, counted
    assert floor.admit("t", 1)  # per session
    floor.forget("s")
    assert floor.admit("s", 1)
