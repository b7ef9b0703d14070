"""The per-event shortcuts of the ingest path (issue 30 item 4, decisions 357–358) answer
exactly what the long way answers: held metrics, the content size check, the Unicode check
of an ASCII string, and the media references of an event that names none."""

from __future__ import annotations

import time

import pytest
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from buzz.core import limits
from buzz.core.errors import BuzzError, MalformedEvent
from buzz.core.event import Event
from buzz.core.keys import generate_secret_key
from buzz.media.service import MediaService
from buzz.relay.metrics_prom import (
    LATENCY_BUCKETS,
    PENDING_OBSERVATIONS,
    RelayMetrics,
    Snapshot,
    observe_many,
    sample_values,
)
from buzz.relay.precheck import PrecheckContext, run_prechecks
from buzz.relay.session import Session

SECRET = generate_secret_key()


def _samples(text: str, name: str) -> list[tuple[str, float]]:
    return [(labels, value) for labels, value in sample_values(text, name) if "_created" not in labels]


def test_observe_many_adds_what_observe_adds() -> None:
    # Values on every bound, between them, past the last and at zero: the same buckets.
    values = [b for b in LATENCY_BUCKETS] + [b * 1.5 for b in LATENCY_BUCKETS] + [0.0, 1e9, 0.0001, 0.0001]
    one, bulk = CollectorRegistry(), CollectorRegistry()
    by_one = Histogram("t", "t", ["op"], buckets=LATENCY_BUCKETS, registry=one).labels("insert")
    for v in values:
        by_one.observe(v)
    observe_many(Histogram("t", "t", ["op"], buckets=LATENCY_BUCKETS, registry=bulk).labels("insert"), values)
    for name in ("t_bucket", "t_count"):
        assert _samples(generate_latest(bulk).decode(), name) == _samples(generate_latest(one).decode(), name)
    [(_, bulk_sum)] = _samples(generate_latest(bulk).decode(), "t_sum")
    [(_, one_sum)] = _samples(generate_latest(one).decode(), "t_sum")
    assert bulk_sum == pytest.approx(one_sum)


def test_held_metrics_are_all_in_every_scrape() -> None:
    metrics = RelayMetrics(lambda: Snapshot(0, 0, 0, 0, {}, {}, False, False))
    n = PENDING_OBSERVATIONS + 7  # one bulk add on the way, the rest held until the scrape
    for _ in range(n):
        metrics.store_inserted(0.002)
        metrics.event_answered(1, True, "")
    metrics.event_answered(1, False, "invalid: nope")
    text = metrics.render().decode()
    counts = dict(_samples(text, "buzz_store_seconds_count"))
    assert counts['{op="insert"}'] == n
    answers = {labels: value for labels, value in _samples(text, "buzz_events_total")}
    assert sum(v for k, v in answers.items() if 'result="accepted"' in k) == n
    assert sum(v for k, v in answers.items() if 'result="refused"' in k) == 1
    metrics.store_inserted(0.002)  # and what came after the scrape is in the next one
    assert dict(_samples(metrics.render().decode(), "buzz_store_seconds_count"))['{op="insert"}'] == n + 1


@pytest.mark.parametrize(
    ("content", "ok"),
    [
        ("x" * limits.MAX_CONTENT_BYTES, True),
        ("x" * (limits.MAX_CONTENT_BYTES + 1), False),
        ("😀" * (limits.MAX_CONTENT_BYTES // 4), True),  # at the shortcut's bound: 4 bytes each
        ("😀" * (limits.MAX_CONTENT_BYTES // 4) + "x", False),
        ("é" * (limits.MAX_CONTENT_BYTES // 4 + 1), True),  # past it, counted: 2 bytes each
    ],
)
def test_content_size_check_counts_utf8_bytes(content: str, ok: bool) -> None:
    event = Event.create(SECRET, 1, content)
    now = int(time.time())
    session = Session(event.pubkey, "ws")
    if ok:
        run_prechecks(session, event, PrecheckContext(now, 0))
        return
    with pytest.raises(BuzzError, match=f"got {len(content.encode())}"):
        run_prechecks(session, event, PrecheckContext(now, 0))


@pytest.mark.parametrize("where", ["content", "tag"])
def test_a_lone_surrogate_is_refused_an_ascii_string_is_not(where: str) -> None:
    good = Event.create(SECRET, 1, "plain ascii", [["t", "ascii"]]).to_dict()
    assert Event.from_json(good).content == "plain ascii"
    bad = dict(good)
    if where == "content":
        bad["content"] = "ok \ud800"
    else:
        bad["tags"] = [["t", "\udfff"]]
    with pytest.raises(MalformedEvent, match="unpaired surrogate"):
        Event.from_json(bad)


@pytest.mark.parametrize(
    ("kind", "tags", "may"),
    [
        (1, [], False),
        (1, [["t", "imeta"], ["e", "a" * 64]], False),  # `imeta` as a value, not a tag name
        (1, [["imeta", "url https://elsewhere.example/a.png"]], True),
        (9, [["h", "c"], ["imeta", "x"]], True),
        (0, [], True),  # a profile's picture / banner
    ],
)
def test_may_reference_is_false_only_where_refs_find_nothing(
    kind: int, tags: list[list[str]], may: bool
) -> None:
    event = Event.create(SECRET, kind, "{}" if kind == 0 else "hello", tags)
    assert MediaService.may_reference(event) is may
