"""Decision 380: a short delay's nap ends its duration after the delay began, not at the end of
a whole second — 100 runs a second of `delay: 1` woke together once a second, stalling the
event loop and the writer. Never before the machine's whole-second `wake_at`."""

from __future__ import annotations

import pytest

from buzz.workflows.drive import nap_until


@pytest.mark.parametrize("began", [1000.0, 1000.1, 1000.5, 1000.999])
def test_a_delay_lasts_its_duration_from_when_it_began(began: float) -> None:
    at = int(began) + 1  # what the machine records for `delay: 1` begun at `began`
    until = nap_until(at, began)
    assert until >= at  # the machine's `now >= wake_at` holds when the nap ends
    assert until - began == pytest.approx(1.05)


def test_delays_begun_across_one_second_wake_spread_like_their_starts() -> None:
    starts = [1000 + i / 100 for i in range(100)]  # a second of runs, one every 10 ms
    wakes = [nap_until(int(s) + 1, s) for s in starts]
    assert len({round(w, 6) for w in wakes}) == 100
    assert max(wakes) - min(wakes) == pytest.approx(max(starts) - min(starts))
