"""NIP-01 filters: parsing (relay.md §6.1), matching (§6.1, §6.2, §6.4) and a differential run
against rust-nostr's matcher (nostr-sdk)."""

from __future__ import annotations

import hashlib
import json
import random
import time
from typing import Any

import pytest

from buzz.core.errors import BadFilter
from buzz.core.event import Event
from buzz.core.filters import MAX_LIMIT, Filter, matches_any, parse_filters

SECRETS = [f"{i:064x}" for i in range(3, 7)]
AUX = bytes(32)
CHANNEL = "0d7c1f9e-3c9b-4f3e-9a57-4c1d2b6f8e10"
OTHER_CHANNEL = "6a1f0e52-8f0c-4a0e-b1a4-9f6e3d2c1b00"


def _ev(kind: int = 1, tags: list[list[str]] | None = None, created_at: int = 100, secret: int = 0) -> Event:
    return Event.create(SECRETS[secret], kind, "x", tags or [], created_at=created_at, aux=AUX)


def _f(obj: dict[str, Any]) -> Filter:
    return Filter.parse(obj)


# -- parsing --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "obj",
    [
        {"#tt": ["a"]},
        {"#": ["a"]},
        {"#1": ["a"]},
        {"#é": ["a"]},
        {"ids": ["ABCDEF"]},
        {"ids": ["a" * 65]},
        {"ids": [""]},
        {"ids": ["xyz"]},
        {"authors": ["A" * 64]},
        {"authors": ["a" * 63]},
        {"since": -1},
        {"since": 1.5},
        {"since": 1.0},
        {"until": True},
        {"limit": "10"},
        {"limit": -1},
        {"kinds": [65536]},
        {"kinds": [1.0]},
        {"kinds": "1"},
        {"#t": "a"},
        {"#t": [1]},
        {"search": 1},
    ],
    ids=["multi-letter-tag", "hash-alone", "digit-tag", "non-ascii-tag", "uppercase-ids", "ids-too-long",
         "ids-empty-string", "ids-non-hex", "uppercase-author", "short-author", "negative-since",
         "float-since-1.5", "float-since-1.0", "bool-until", "string-limit", "negative-limit",
         "kind-65536", "float-kind", "kinds-not-list", "tag-not-list", "tag-int-value", "search-int"],
)  # fmt: skip
def test_parse_errors(obj: dict[str, Any]) -> None:
    with pytest.raises(BadFilter) as info:
        Filter.parse(obj)
    assert str(info.value).startswith("invalid: bad filter: ")


@pytest.mark.parametrize("obj", [[], "x", None], ids=["list", "str", "null"])
def test_parse_non_object(obj: object) -> None:
    with pytest.raises(BadFilter):
        Filter.parse(obj)


def test_parse_accepts_and_ignores_unknown_keys() -> None:
    f = _f(
        {"kinds": [1, 9], "#T": ["A"], "limit": 5, "since": 0, "until": 2**53 - 1, "foo": [1], "search": ""}
    )
    assert f.kinds == {1, 9} and f.tags == {"T": {"A"}} and f.limit == 5 and f.search == ""
    assert f.to_dict() == {
        "kinds": [1, 9],
        "#T": ["A"],
        "since": 0,
        "until": 2**53 - 1,
        "limit": 5,
        "search": "",
    }


def test_parse_filters_stops_at_first_bad() -> None:
    assert len(parse_filters([{}, {"kinds": [1]}])) == 2
    with pytest.raises(BadFilter):
        parse_filters([{}, {"#xy": []}])


def test_effective_limit() -> None:
    assert _f({}).effective_limit == MAX_LIMIT == 1000
    assert _f({"limit": 5000}).effective_limit == 1000
    assert _f({"limit": 0}).effective_limit == 0


# -- matching -------------------------------------------------------------------------------------
EVENT = _ev(9, [["t", "rust"], ["t", "nostr"], ["p", "b" * 64], ["e", "c" * 64, "wss://r", "reply"]])


def test_no_fields_matches_everything() -> None:
    assert _f({}).matches(EVENT)


@pytest.mark.parametrize("key", ["ids", "authors", "kinds", "#t", "#h"])
def test_empty_list_matches_nothing(key: str) -> None:
    f = _f({key: []})
    assert f.is_empty_match
    assert not f.matches(EVENT)


def test_since_until_inclusive() -> None:
    assert _f({"since": 100, "until": 100}).matches(EVENT)
    assert not _f({"since": 101}).matches(EVENT)
    assert not _f({"until": 99}).matches(EVENT)


def test_ids_prefix() -> None:
    assert _f({"ids": [EVENT.id[:8]]}).matches(EVENT)
    assert _f({"ids": [EVENT.id]}).matches(EVENT)
    assert _f({"ids": ["0" * 64, EVENT.id[:1]]}).matches(EVENT)
    assert not _f({"ids": [EVENT.id[1:9]]}).matches(EVENT)


def test_authors_and_kinds() -> None:
    assert _f({"authors": [EVENT.pubkey], "kinds": [9, 1]}).matches(EVENT)
    assert not _f({"authors": [_ev(secret=1).pubkey]}).matches(EVENT)
    assert not _f({"kinds": [1]}).matches(EVENT)


def test_tag_exact_value_only() -> None:
    assert _f({"#t": ["rust"]}).matches(EVENT)
    assert not _f({"#t": ["rus"]}).matches(EVENT)  # a prefix never matches
    assert not _f({"#t": ["Rust"]}).matches(EVENT)  # case-sensitive
    assert not _f({"#e": ["C" * 64]}).matches(EVENT)
    assert _f({"#e": ["c" * 64]}).matches(EVENT)
    assert not _f({"#T": ["rust"]}).matches(EVENT)  # tag names are case-sensitive too


def test_tags_and_across_keys_or_within_key() -> None:
    assert _f({"#t": ["rust"], "#p": ["b" * 64]}).matches(EVENT)
    assert not _f({"#t": ["rust"], "#p": ["d" * 64]}).matches(EVENT)
    assert _f({"#t": ["go", "nostr"]}).matches(EVENT)
    assert not _f({"#t": ["go", "zig"]}).matches(EVENT)


def test_tag_needs_two_elements_and_one_letter_name() -> None:
    ev = _ev(tags=[["t"], ["tt", "a"], ["x", "1", "2"]])
    assert not _f({"#t": [""]}).matches(ev)
    assert _f({"#x": ["1"]}).matches(ev)
    assert not _f({"#x": ["2"]}).matches(ev)


def test_or_across_filters() -> None:
    filters = parse_filters([{"kinds": [1]}, {"#t": ["nostr"]}])
    assert matches_any(filters, EVENT)
    assert not matches_any(parse_filters([{"kinds": [1]}, {"#t": ["go"]}]), EVENT)
    assert not matches_any([], EVENT)


def test_h_rule_explicit_tag() -> None:
    # An h value listed in #h matches, like any tag filter of NIP-01.
    ev = _ev(9, [["h", CHANNEL]])
    assert _f({"#h": [CHANNEL]}).matches(ev)
    assert matches_any([_f({"#h": [OTHER_CHANNEL, CHANNEL]})], ev)


def test_h_rule_has_no_fallback_to_the_channel() -> None:
    # Issue 25 item 5 (docs/decisions.md 174): relay.md §6.2 item 2's fallback is gone, an event
    # without an h tag never matches #h (channel reactions and deletions carry their h instead).
    reaction = _ev(7, [["e", "c" * 64]])
    assert not _f({"#h": [CHANNEL]}).matches(reaction)
    assert not matches_any([_f({"#h": [CHANNEL]})], reaction)


def test_h_rule_explicit_tag_is_authoritative() -> None:
    # §18 item 36: a kind 7 with ["h", D] does not reach #h:[C].
    reaction = _ev(7, [["h", OTHER_CHANNEL], ["e", "c" * 64]])
    assert not _f({"#h": [CHANNEL]}).matches(reaction)


# -- differential run against nostr-sdk ------------------------------------------------------------
SEED = 20240601
PAIRS = 40_000
FILTERS = 10_000  # each filter is tried on the event it was built around and on random ones
T_VALUES = ["a", "b", "c", "A", "ab", "", "é"]


def _random_events(rng: random.Random, count: int) -> list[Event]:
    e_values = [f"{rng.getrandbits(256):064x}" for _ in range(5)]
    p_values = [_ev(secret=i).pubkey for i in range(len(SECRETS))]
    events = []
    for _ in range(count):
        tags: list[list[str]] = []
        for _ in range(rng.randint(0, 5)):
            name = rng.choice(["t", "t", "p", "e", "tt", "x"])
            pool = {"t": T_VALUES, "p": p_values, "e": e_values}.get(name, T_VALUES)
            tag = [name, rng.choice(pool)]
            if rng.random() < 0.2:
                tag.append("extra")
            if rng.random() < 0.1:
                tag = [name]  # a one-element tag never matches
            tags.append(tag)
        events.append(
            Event.create(
                rng.choice(SECRETS),
                rng.choice([0, 1, 5, 7, 9, 30023]),
                "c",
                tags,
                created_at=rng.randint(100, 120),
                aux=AUX,
            )
        )
    return events


def _pick(rng: random.Random, pool: list[Any], own: list[Any]) -> list[Any]:
    """1-3 distinct values from `pool`, plus one of `own` (the target's values) most of the time."""
    values = rng.sample(pool, min(len(pool), rng.randint(1, 3)))
    if own and rng.random() < 0.7:
        values[0] = rng.choice(own)
    return sorted(set(values))


def _random_filter(rng: random.Random, events: list[Event], target: Event) -> dict[str, Any]:
    """A filter built around `target`, so that about half of the pairs with it match."""
    others = rng.sample(events, 8)
    obj: dict[str, Any] = {}
    if rng.random() < 0.15:
        obj["ids"] = _pick(rng, [e.id for e in others], [target.id])
    if rng.random() < 0.4:
        obj["authors"] = _pick(rng, [e.pubkey for e in others], [target.pubkey])
    if rng.random() < 0.4:
        obj["kinds"] = _pick(rng, [0, 1, 3, 5, 7, 9, 30023], [target.kind])
    for name in ("t", "p", "e"):
        if rng.random() < 0.3:
            pool = T_VALUES if name == "t" else [v for e in others for v in e.tag_values(name)]
            own = target.tag_values(name)
            if pool or own:
                obj["#" + name] = _pick(rng, pool or own, own)
    if rng.random() < 0.4:
        obj["since"] = rng.randint(95, target.created_at)
    if rng.random() < 0.4:
        obj["until"] = rng.randint(target.created_at - 3, 125)
    if rng.random() < 0.2:
        obj["limit"] = rng.randint(0, 50)
    return obj


def test_differential_against_nostr_sdk() -> None:
    nostr_sdk = pytest.importorskip("nostr_sdk")
    started = time.monotonic()
    rng = random.Random(SEED)
    events = _random_events(rng, 300)
    sdk_events = [nostr_sdk.Event.from_json(e.to_json()) for e in events]
    per_filter = PAIRS // FILTERS
    mismatches: list[tuple[dict[str, Any], str, bool, bool]] = []
    counts = {True: 0, False: 0}
    for _ in range(FILTERS):
        target = rng.randrange(len(events))
        obj = _random_filter(rng, events, events[target])
        ours = Filter.parse(obj)
        theirs = nostr_sdk.Filter.from_json(json.dumps(obj))
        for i in [target, *rng.sample(range(len(events)), per_filter - 1)]:
            a = ours.matches(events[i])
            b = theirs.match_event(sdk_events[i])
            counts[a] += 1
            if a != b:
                mismatches.append((obj, events[i].to_json(), a, b))
    assert not mismatches, f"{len(mismatches)} mismatches, first: {mismatches[:3]}"
    assert counts[True] + counts[False] == PAIRS
    # Both outcomes must be common, or the comparison says little.
    assert min(counts.values()) > PAIRS // 10, counts
    assert time.monotonic() - started < 20


def test_ids_prefix_match_with_many_prefixes_of_mixed_lengths() -> None:
    """`matches` agrees with "some prefix starts the id" for 4,096 prefixes of 1–64 characters."""
    ids = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(200)]
    prefixes = [hashlib.sha256(f"p{i}".encode()).hexdigest()[: 1 + i % 64] for i in range(4096)]
    prefixes = [p for p in prefixes if len(p) > 3] + [ids[0][:3], ids[1], ids[2][:40]]
    flt = Filter.parse({"ids": prefixes})
    for event_id in ids:
        event = Event(event_id, "ab" * 32, 0, 1, (), "", "00" * 64)
        assert flt.matches(event) == any(event_id.startswith(p) for p in prefixes), event_id
    assert flt == Filter.parse({"ids": list(reversed(prefixes))})
