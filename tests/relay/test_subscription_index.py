"""The live matcher index (issue 2 §4): an event is checked only against subscriptions that
could match it, and the final word is always `Filter.matches`."""

from __future__ import annotations

from dataclasses import dataclass, field

from buzz.core.event import Event
from buzz.core.filters import Filter
from buzz.core.keys import generate_secret_key, public_key
from buzz.relay.delivery.subscriptions import Subscription, SubscriptionIndex

CHANNEL = "0b7a5f8e-8a59-4c2b-9a39-6f4a3e1c2d10"


@dataclass
class _Sink:
    pubkey: str | None = None
    sent: list[str] = field(default_factory=list)

    def send(self, text: str) -> None:
        self.sent.append(text)


def _sub(sub_id: str, *filters: dict) -> Subscription:
    return Subscription(_Sink(), sub_id, tuple(Filter.parse(f) for f in filters))


def test_event_reaches_only_buckets_it_names() -> None:
    sk = generate_secret_key()
    pk = public_key(sk)
    index = SubscriptionIndex()
    by_kind = _sub("kind", {"kinds": [1]})
    by_author = _sub("author", {"authors": [pk]})
    by_tag = _sub("tag", {"#t": ["x"], "kinds": [1]})
    other_tag = _sub("other", {"#t": ["y"]})
    other_kind = _sub("k7", {"kinds": [7]})
    empty = _sub("empty", {"kinds": []})
    for s in (by_kind, by_author, by_tag, other_tag, other_kind, empty):
        index.add(s)
    event = Event.create(sk, 1, "hi", [["t", "x"]])
    assert {s.sub_id for s in index.matching(event, None)} == {"kind", "author", "tag"}
    index.remove(by_tag)
    assert {s.sub_id for s in index.matching(event, None)} == {"kind", "author"}
    assert len(index) == 5


def test_channel_events_only_reach_filters_naming_the_channel() -> None:
    sk = generate_secret_key()
    index = SubscriptionIndex()
    named = _sub("named", {"kinds": [9], "#h": [CHANNEL]})
    unnamed = _sub("unnamed", {"kinds": [9]})
    index.add(named)
    index.add(unnamed)
    msg = Event.create(sk, 9, "in channel", [["h", CHANNEL]])
    assert [s.sub_id for s in index.matching(msg, CHANNEL)] == ["named"]
    # `#h` matches by the event's own h tags (NIP-01, decision 174): a channel reaction
    # reaches it with its h tag, and one stored without (before the rule) reaches nothing.
    reaction = Event.create(sk, 7, "+", [["e", "a" * 64], ["h", CHANNEL]])
    untagged = Event.create(sk, 7, "-", [["e", "a" * 64]])
    react_sub = _sub("react", {"kinds": [7], "#h": [CHANNEL]})
    index.add(react_sub)
    assert [s.sub_id for s in index.matching(reaction, CHANNEL)] == ["react"]
    assert [s.sub_id for s in index.matching(untagged, CHANNEL)] == []


def test_a_subscription_is_yielded_once_even_when_several_filters_match() -> None:
    sk = generate_secret_key()
    index = SubscriptionIndex()
    sub = _sub("multi", {"kinds": [1]}, {"authors": [public_key(sk)]}, {"#t": ["x"]})
    index.add(sub)
    event = Event.create(sk, 1, "", [["t", "x"]])
    assert [s.sub_id for s in index.matching(event, None)] == ["multi"]


def test_subscriptions_with_equal_filters_share_one_match_and_leave_independently() -> None:
    """Equal filters (limit aside) are matched once per event for all their holders
    (issue 30 item 3); removing one holder leaves the others reached."""
    sk = generate_secret_key()
    pk = public_key(sk)
    index = SubscriptionIndex()
    subs = [_sub(f"s{i}", {"kinds": [1], "authors": [pk], "limit": i}) for i in range(5)]
    other = _sub("other", {"kinds": [1], "authors": [pk], "since": 2_000_000_000})
    for s in (*subs, other):
        index.add(s)
    event = Event.create(sk, 1, "hi")
    assert [s.sub_id for s in index.matching(event, None)] == [f"s{i}" for i in range(5)]
    index.remove(subs[2])
    index.remove(other)
    assert [s.sub_id for s in index.matching(event, None)] == ["s0", "s1", "s3", "s4"]
    for s in subs:
        index.remove(s)
    assert index.matching(event, None) == []
    assert len(index) == 0
