"""The token bucket behind a huddle seat's budgets (issue 24 item 15)."""

from __future__ import annotations

from buzz.core.token_bucket import TokenBucket


def test_a_full_bucket_spends_its_burst_then_its_rate() -> None:
    bucket = TokenBucket.full(rate=50, burst=100, now=0.0)
    assert sum(bucket.take(0.0) for _ in range(150)) == 100  # the burst, all at once
    assert bucket.wait() == 1 / 50
    assert not bucket.take(0.019)  # not yet a whole token
    assert bucket.take(0.021)
    assert sum(bucket.take(1.021) for _ in range(100)) == 50  # a second's worth


def test_it_never_holds_more_than_its_burst() -> None:
    bucket = TokenBucket.full(rate=50, burst=100, now=0.0)
    assert sum(bucket.take(3600.0) for _ in range(200)) == 100
    assert bucket.wait() > 0
