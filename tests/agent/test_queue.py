"""The per-channel work queue (agents.md §4.7; §9.2 items 23–24)."""

from __future__ import annotations

import pytest

from buzz.agent.queue import DeadLetter, Item, Retry, WorkQueue, backoff_s
from buzz.core.event import Event
from buzz.core.keys import generate_secret_key

SK = generate_secret_key()
C1 = "11111111-1111-4111-8111-111111111111"
C2 = "22222222-2222-4222-8222-222222222222"


def item(channel: str, t: float, content: str = "x") -> Item:
    return Item(Event.create(SK, 9, content, [["h", channel]]), channel, t)


def test_batches_of_fifty_and_one_in_flight_per_channel() -> None:
    q = WorkQueue()
    for i in range(60):
        q.push(item(C1, i))
    first = q.next_batch(100)
    assert first is not None and len(first.items) == 50
    assert q.next_batch(100) is None  # C1 has a batch in flight
    with pytest.raises(ValueError):
        q.take(C1)
    q.finish(C1)
    second = q.next_batch(100)
    assert second is not None and len(second.items) == 10
    assert [i.enqueued_at for i in second.items] == list(range(50, 60))


def test_oldest_waiting_channel_goes_first() -> None:
    q = WorkQueue()
    q.push(item(C2, 1))
    q.push(item(C1, 3))
    q.push(item(C2, 5))
    assert q.ready(10) == [C2, C1]
    batch = q.next_batch(10, accept=lambda c: c != C2)
    assert batch is not None and batch.channel == C1


def test_pending_cap_evicts_the_oldest() -> None:
    q = WorkQueue()
    items = [item(C1, i) for i in range(501)]
    evicted = [q.push(i) for i in items]
    assert evicted[:500] == [None] * 500 and evicted[500] is items[0]
    assert q.pending_count(C1) == 500


def test_backoff_sequence() -> None:
    assert [backoff_s(n) for n in range(1, 10)] == [5, 10, 20, 40, 80, 160, 300, 300, 300]


def test_failed_batch_is_retried_at_the_head_then_dead_lettered() -> None:
    q = WorkQueue()
    q.push(item(C1, 0, "a"))
    batch = q.take(C1)
    q.push(item(C1, 1, "later"))
    now = 100.0
    for attempt in range(1, 10):
        result = q.fail(C1, now)
        assert result == Retry(backoff_s(attempt), attempt)
        assert q.next_batch(now + result.delay_s - 0.1) is None  # not before the backoff
        assert q.next_wakeup(now) == pytest.approx(now + result.delay_s)
        now += result.delay_s
        again = q.next_batch(now)
        assert again is batch and [i.event.content for i in again.items] == ["a"]  # the same batch, alone
    final = q.fail(C1, now)
    assert isinstance(final, DeadLetter) and final.batch is batch and batch.attempts == 10
    following = q.next_batch(now)
    assert following is not None and [i.event.content for i in following.items] == ["later"]


def test_drain_and_take_pending() -> None:
    q = WorkQueue()
    for i in range(3):
        q.push(item(C1, i))
    q.take(C1)
    q.push(item(C1, 9))
    assert len(q.take_pending(C1)) == 1
    q.push(item(C1, 10))
    assert len(q.drain(C1)) == 1 and q.pending_count(C1) == 0
    assert q.in_flight(C1) is not None and q.has_work()
    q.finish(C1)
    assert not q.has_work()


def test_removing_a_retried_batch_lets_the_next_go_at_once() -> None:
    """A job cancelled while it waits on its backoff: the channel's next event is not held
    until that backoff would have ended (nothing would wake the channel then)."""
    q = WorkQueue()
    first = item(C1, 0, "failing job")
    q.push(first)
    q.take(C1)
    q.push(item(C1, 1, "next job"))
    now = 100.0
    assert isinstance(q.fail(C1, now), Retry)
    assert q.remove(C1, first.event.id) is first
    following = q.next_batch(now)
    assert following is not None and [i.event.content for i in following.items] == ["next job"]


def test_a_failed_job_waits_aside_and_does_not_hold_its_channel() -> None:
    """`hold=False` (a job, decision 372): what waits behind it goes during its backoff; once
    the backoff is over it goes before younger work; `max_attempts` caps its attempts."""
    q = WorkQueue()
    job = item(C1, 0, "failing job")
    job.solo = True
    q.push(job)
    batch = q.take(C1)
    q.push(item(C1, 1, "next"))
    now = 100.0
    assert q.fail(C1, now, hold=False, max_attempts=2) == Retry(backoff_s(1), 1)
    assert q.pending_count(C1) == 2 and q.next_wakeup(now) == pytest.approx(now + backoff_s(1))
    following = q.next_batch(now)  # during the backoff
    assert following is not None and [i.event.content for i in following.items] == ["next"]
    q.finish(C1)
    q.push(item(C1, 2, "younger"))
    assert q.next_batch(now + backoff_s(1)) is batch  # back before younger work
    assert q.fail(C1, now, hold=False, max_attempts=2) == DeadLetter(batch)
    assert [i.event.content for i in q.drain(C1)] == ["younger"]


def test_a_job_waiting_aside_can_be_removed() -> None:
    q = WorkQueue()
    job = item(C1, 0, "failing job")
    q.push(job)
    q.take(C1)
    assert isinstance(q.fail(C1, 0.0, hold=False), Retry)
    assert q.remove(C1, job.event.id) is job and not q.has_work()
