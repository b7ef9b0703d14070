"""Engram rules beyond the vector file: spec examples and the engram.md §15.3 checklist items
the pure library owns (slugs, bodies, envelope order, head outcomes, listing, references)."""

from __future__ import annotations

from typing import Any

import pytest

from buzz.core import engram, nip44
from buzz.core.event import MAX_CREATED_AT, Event

SK_A = "00" * 31 + "01"
SK_O = "00" * 31 + "02"
PK_A = "79be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798"
PK_O = "c6047f9441ed7d6d3045406e95c07cd85c778e4b8cef3ca7abac09b95c709ee5"
K_C = engram.conversation_key(SK_A, PK_O)


# -- slugs (§3.5) -------------------------------------------------------------------------------
VALID_SLUGS = [
    "core",
    "mem/x",
    "mem/x-y_z",
    "mem/0",
    "mem/notes/2026-05-12",
    "mem/a/b/c",
    "mem/" + "a" * 64,
    "mem/core",
]
INVALID_SLUGS = [
    "",
    "MEM/x",
    "mem/",
    "mem//x",
    "mem/-x",
    "mem/_x",
    "mem/x/-y",
    "mem/x/",
    "memx",
    "mem/x/Y",
    "mem/x.y",
    "core/x",
    "Core",
    "CORE",
    "mem/a b",
    "mem/é",
    "mem/" + "a" * 65,
    "mem/" + "/".join(c * 64 for c in "abcd"),
]


@pytest.mark.parametrize("slug", VALID_SLUGS)
def test_spec_valid_slugs(slug: str) -> None:
    assert engram.validate_slug(slug) == slug


@pytest.mark.parametrize("slug", INVALID_SLUGS, ids=[repr(s[:20]) + f"/{len(s)}" for s in INVALID_SLUGS])
def test_spec_invalid_slugs(slug: str) -> None:
    with pytest.raises(engram.InvalidSlug):
        engram.validate_slug(slug)


@pytest.mark.parametrize(
    ("slug", "reason"),
    [
        ("mem/" + "/".join(c * 64 for c in "abcd"), "263 bytes"),
        ("memx", "start with 'mem/'"),
        ("mem/", "nothing after"),
        ("mem/a//b", "segment 2 is empty"),
        ("mem/" + "a" * 65, "segment 1 is longer than 64"),
        ("mem/x/-y", "segment 2 starts with '-'"),
        ("mem/x/aY", "segment 2 contains 'Y'"),
    ],
)
def test_slug_reasons_follow_the_check_order(slug: str, reason: str) -> None:
    with pytest.raises(engram.InvalidSlug, match=reason):
        engram.validate_slug(slug)


@pytest.mark.parametrize(
    ("text", "slug"),
    [
        ("foo", "mem/foo"),
        ("core", "core"),
        ("mem/bar", "mem/bar"),
        ("notes/a", "mem/notes/a"),
        ("core/x", "mem/core/x"),
    ],
)
def test_normalize_slug_examples(text: str, slug: str) -> None:
    assert engram.normalize_slug(text) == slug


@pytest.mark.parametrize("text", ["Foo", "", "/x", " foo", "foo "])
def test_normalize_slug_never_rewrites(text: str) -> None:
    with pytest.raises(engram.InvalidSlug):
        engram.normalize_slug(text)


def test_d_tag_input_bytes_and_validation() -> None:
    import hashlib
    import hmac

    msg = bytes.fromhex("6167656e742d6d656d6f72792f76312f642d746167" + "00" + "636f7265")
    assert engram.d_tag(K_C, "core") == hmac.new(K_C, msg, hashlib.sha256).hexdigest()
    with pytest.raises(engram.InvalidSlug):
        engram.d_tag(K_C, "foo")


# -- bodies (§6) --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("value", "escaped"),
    [
        ('q"b\\s', r"q\"b\\s"),
        ("\b\f\n\r\t", r"\b\f\n\r\t"),
        ("\x00\x01\x1f", r"\u0000\u0001\u001f"),
        ("/\x7fé😀", "/\x7fé😀"),
    ],
    ids=["quote-backslash", "short-escapes", "other-controls", "raw-slash-del-nonascii"],
)
def test_encode_body_minimal_escaping(value: str, escaped: str) -> None:
    raw = engram.encode_body(engram.MemoryBody("mem/x", value))
    assert raw == ('{"slug":"mem/x","value":"' + escaped + '"}').encode()
    assert engram.decode_body(raw) == engram.MemoryBody("mem/x", value)


def test_body_size_limit_is_on_the_serialized_body() -> None:
    slug = "mem/example"
    fits = engram.MemoryBody(slug, "a" * (65535 - 22 - len(slug)))
    assert len(engram.encode_body(fits)) == 65535
    with pytest.raises(engram.BodyTooLarge) as info:
        engram.encode_body(engram.MemoryBody(slug, "a" * (65536 - 22 - len(slug))))
    assert info.value.size == 65536
    assert len(engram.encode_body(engram.CoreBody("a" * (65535 - 28)))) == 65535
    with pytest.raises(engram.BodyTooLarge):
        engram.encode_body(engram.CoreBody("\n" * 40000))  # escaping counts


def test_empty_value_and_profile_are_live() -> None:
    assert engram.encode_body(engram.MemoryBody("mem/x", "")) == b'{"slug":"mem/x","value":""}'
    assert engram.encode_body(engram.CoreBody("")) == b'{"slug":"core","profile":""}'
    assert not engram.MemoryBody("mem/x", "").is_tombstone


def test_body_constructors_validate() -> None:
    with pytest.raises(engram.InvalidSlug):
        engram.MemoryBody("core", "x")
    with pytest.raises(engram.InvalidSlug):
        engram.MemoryBody("foo", "x")
    with pytest.raises(engram.InvalidBody):
        engram.MemoryBody("mem/x", 5)  # type: ignore[arg-type]
    with pytest.raises(engram.InvalidBody):
        engram.CoreBody(None)  # type: ignore[arg-type]
    with pytest.raises(engram.InvalidBody):
        engram.encode_body(engram.MemoryBody("mem/x", "\ud800"))


BAD_BODIES: list[tuple[str, str | bytes, type[Exception], str]] = [
    ("profile-null", '{"slug":"core","profile":null}', engram.InvalidBody, "profile"),
    ("profile-missing", '{"slug":"core","value":"x"}', engram.InvalidBody, "profile"),
    ("value-missing", '{"slug":"mem/x","profile":"x"}', engram.InvalidBody, "value"),
    ("value-number", '{"slug":"mem/x","value":5}', engram.InvalidBody, "value"),
    ("slug-missing", '{"value":"x"}', engram.InvalidBody, "slug"),
    ("slug-number", '{"slug":1,"value":"x"}', engram.InvalidBody, "slug"),
    ("slug-invalid", '{"slug":"Mem/x","value":"x"}', engram.InvalidSlug, "mem/"),
    ("top-level-array", '["slug","mem/x"]', engram.InvalidBody, "object"),
    ("nan", '{"slug":"mem/x","value":"v","n":NaN}', engram.InvalidBody, "NaN"),
    ("neg-infinity", '{"slug":"mem/x","value":"v","n":-Infinity}', engram.InvalidBody, "Infinity"),
    ("trailing-data", '{"slug":"mem/x","value":"v"} x', engram.InvalidBody, "JSON"),
    ("lone-high-surrogate", '{"slug":"mem/x","value":"\\ud83d"}', engram.InvalidBody, "surrogate"),
    (
        "lone-low-surrogate-in-key",
        '{"slug":"mem/x","value":"v","\\ude00":1}',
        engram.InvalidBody,
        "surrogate",
    ),
    (
        "nested-array-surrogate",
        '{"slug":"mem/x","value":"v","a":[["\\udfff"]]}',
        engram.InvalidBody,
        "surrogate",
    ),
    (
        "dup-in-array-object",
        '{"slug":"mem/x","value":"v","a":[{"k":1,"k":1}]}',
        engram.InvalidBody,
        "duplicate",
    ),
    ("dup-before-bad-slug", '{"slug":"X","slug":"X"}', engram.InvalidBody, "duplicate"),
    ("not-utf8", b'{"slug":"mem/x","value":"\xff"}', engram.InvalidBody, "UTF-8"),
    (
        "deep-nesting",
        '{"slug":"mem/x","value":"v","a":' + "[" * 100000 + "]" * 100000 + "}",
        engram.InvalidBody,
        "deep",
    ),
]


@pytest.mark.parametrize(
    ("text", "error", "reason"), [c[1:] for c in BAD_BODIES], ids=[c[0] for c in BAD_BODIES]
)
def test_decode_body_rejects(text: str | bytes, error: type[Exception], reason: str) -> None:
    with pytest.raises(error, match=reason):
        engram.decode_body(text)


def test_decode_body_ignores_other_members() -> None:
    assert engram.decode_body('{"slug":"core","profile":"p","value":"v","index":{}}') == engram.CoreBody("p")
    assert engram.decode_body(' {"value":null,"slug":"mem/x","profile":1}\n') == engram.MemoryBody(
        "mem/x", None
    )


# -- build_event and validate_and_decrypt (§5, §7) ----------------------------------------------
def _event(tags: list[list[str]], content: str, kind: int = engram.KIND_ENGRAM, sk: str = SK_A) -> Event:
    return Event.create(sk, kind, content, tags, 1700000000)


GOOD = engram.build_event(SK_A, PK_O, engram.MemoryBody("mem/a", "value"), 1700000000)
D_A = GOOD.tags[0][1]
CONTENT = GOOD.content


def test_built_event_shape() -> None:
    assert GOOD.kind == 30174 and GOOD.pubkey == PK_A
    assert GOOD.tags == (("d", engram.d_tag(K_C, "mem/a")), ("p", PK_O))
    assert all("mem/a" not in item for tag in GOOD.tags for item in tag)
    upper = engram.build_event(SK_A, PK_O.upper(), engram.CoreBody(""), 1)
    assert upper.tags[1] == ("p", PK_O)


ENVELOPE_CASES: list[tuple[str, Any, type[Exception], str]] = [
    (
        "wrong-kind",
        lambda: _event([["d", D_A], ["p", PK_O]], CONTENT, kind=1),
        engram.InvalidEnvelope,
        "wrong kind: 1",
    ),
    (
        "wrong-author",
        lambda: _event([["d", D_A], ["p", PK_O]], CONTENT, sk=SK_O),
        engram.InvalidEnvelope,
        "author",
    ),
    ("no-d", lambda: _event([["p", PK_O]], CONTENT), engram.InvalidEnvelope, "missing d tag"),
    ("bare-d", lambda: _event([["d"], ["p", PK_O]], CONTENT), engram.InvalidEnvelope, "missing d tag"),
    (
        "two-d",
        lambda: _event([["d", D_A], ["d", D_A], ["p", PK_O]], CONTENT),
        engram.InvalidEnvelope,
        "multiple d",
    ),
    (
        "bare-d-and-real-d",
        lambda: _event([["d"], ["d", D_A], ["p", PK_O]], CONTENT),
        engram.InvalidEnvelope,
        "multiple d",
    ),
    (
        "uppercase-d",
        lambda: _event([["d", D_A.upper()], ["p", PK_O]], CONTENT),
        engram.InvalidEnvelope,
        "lowercase",
    ),
    ("short-d", lambda: _event([["d", D_A[:63]], ["p", PK_O]], CONTENT), engram.InvalidEnvelope, "hex"),
    ("no-p", lambda: _event([["d", D_A]], CONTENT), engram.InvalidEnvelope, "missing p tag"),
    (
        "two-p",
        lambda: _event([["d", D_A], ["p", PK_O], ["p", PK_O]], CONTENT),
        engram.InvalidEnvelope,
        "multiple p",
    ),
    ("foreign-p", lambda: _event([["d", D_A], ["p", PK_A]], CONTENT), engram.InvalidEnvelope, "owner"),
    (
        "garbage-content",
        lambda: _event([["d", D_A], ["p", PK_O]], "not base64!"),
        engram.Decrypt,
        "decryptable",
    ),
    (
        "flipped-bit",
        lambda: _event(
            [["d", D_A], ["p", PK_O]], CONTENT[:50] + ("A" if CONTENT[50] != "A" else "B") + CONTENT[51:]
        ),
        engram.Decrypt,
        "MAC",
    ),
    (
        "bad-body",
        lambda: _event([["d", D_A], ["p", PK_O]], nip44.encrypt("not json", K_C)),
        engram.InvalidBody,
        "JSON",
    ),
    (
        "slug-does-not-re-derive",
        lambda: _event([["d", engram.d_tag(K_C, "mem/b")], ["p", PK_O]], CONTENT),
        engram.InvalidEnvelope,
        "re-derive",
    ),
]


@pytest.mark.parametrize(
    ("make", "error", "reason"), [c[1:] for c in ENVELOPE_CASES], ids=[c[0] for c in ENVELOPE_CASES]
)
def test_validate_and_decrypt_rejects_in_order(make: Any, error: type[Exception], reason: str) -> None:
    with pytest.raises(error, match=reason):
        engram.validate_and_decrypt(make(), PK_A, PK_O, SK_A, PK_O)


def test_uppercase_p_and_extra_tags_pass_the_reader() -> None:
    event = _event(
        [["alt", "encrypted agent memory record"], ["d", D_A], ["p", PK_O.upper()], ["h", "x"]], CONTENT
    )
    assert engram.validate_and_decrypt(event, PK_A, PK_O, SK_O, PK_A) == engram.MemoryBody("mem/a", "value")


def test_wrong_reader_key_is_decrypt() -> None:
    with pytest.raises(engram.Decrypt):
        engram.validate_and_decrypt(GOOD, PK_A, PK_O, "00" * 31 + "03", PK_A)


def test_errors_share_one_base() -> None:
    for cls in (
        engram.InvalidSlug,
        engram.InvalidBody,
        engram.InvalidEnvelope,
        engram.InvalidKey,
        engram.Decrypt,
    ):
        assert issubclass(cls, engram.EngramError) and issubclass(cls, ValueError)
    assert issubclass(engram.BodyTooLarge, engram.EngramError)
    assert issubclass(engram.Decrypt, nip44.Decrypt) and issubclass(engram.InvalidKey, nip44.InvalidKey)


def test_build_event_rejects_malformed_owner() -> None:
    with pytest.raises(engram.InvalidKey):
        engram.build_event(SK_A, "xyz", engram.CoreBody("p"), 1)


# -- head selection and outcomes (§8) -----------------------------------------------------------
def test_head_outcome_failure_empty_allinvalid_found() -> None:
    assert isinstance(engram.head_outcome({"not": "a list"}, PK_A, PK_O, SK_A, PK_O), engram.Failure)
    assert engram.head_outcome([], PK_A, PK_O, SK_A, PK_O) == engram.EmptyAnswer()
    forged = {**GOOD.to_dict(), "content": GOOD.content[:-4] + "AAAA"}  # id no longer matches
    outcome = engram.head_outcome([forged, "garbage"], PK_A, PK_O, SK_A, PK_O)
    assert isinstance(outcome, engram.AllInvalid) and outcome.count == 2
    found = engram.head_outcome([forged, GOOD.to_dict(), "garbage"], PK_A, PK_O, SK_A, PK_O)
    assert found == engram.Found(GOOD, engram.MemoryBody("mem/a", "value"))


def test_one_garbled_candidate_never_fails_a_read() -> None:
    newer = engram.build_event(SK_A, PK_O, engram.MemoryBody("mem/a", "newer"), 1700000005)
    opened = engram.open_candidates([GOOD, {"junk": 1}, newer, newer], PK_A, PK_O, SK_A, PK_O)
    assert opened.skipped == 1 and opened.last_error
    assert engram.select_head(opened.records).id == newer.id  # duplicate ids count once


def test_select_head_ties_go_to_the_lower_id() -> None:
    body = engram.MemoryBody("mem/a", "v")
    tied = [engram.build_event(SK_A, PK_O, body, 5) for _ in range(6)]
    older = engram.build_event(SK_A, PK_O, body, 4)
    assert engram.select_head([older, *tied]).id == min(e.id for e in tied)
    assert engram.select_head([]) is None


def test_monotonic_created_at_saturates_and_poison_check() -> None:
    assert engram.monotonic_created_at(0, MAX_CREATED_AT) == MAX_CREATED_AT
    assert engram.monotonic_created_at(100, 200) == 201  # the rule itself never refuses
    assert not engram.is_clock_poisoned(700, 100)
    assert engram.is_clock_poisoned(701, 100)


# -- listing and references (§9, §10) -----------------------------------------------------------
def _write(slug: str, text: str | None, t: int) -> engram.Record:
    body = engram.CoreBody(text or "") if slug == "core" else engram.MemoryBody(slug, text)
    event = engram.build_event(SK_A, PK_O, body, t)
    return engram.Record(event, body)


def test_listing_drops_tombstones_and_core_and_sorts_by_slug() -> None:
    records = [
        _write("mem/b", "1", 1),
        _write("mem/b", "2", 2),
        _write("mem/a", "x", 1),
        _write("mem/gone", "x", 1),
        _write("mem/gone", None, 2),
        _write("core", "see [[mem/a]]", 1),
        _write("mem/a-z", "", 1),
    ]
    entries = engram.listing(engram.heads_by_slug(records))
    assert [e.slug for e in entries] == ["mem/a", "mem/a-z", "mem/b"]
    assert entries[2].event_id == records[1].id and entries[2].created_at == 2
    assert list(entries[0].to_dict()) == ["slug", "event_id", "created_at"]


def test_orphans_and_dangling_references() -> None:
    heads = engram.heads_by_slug(
        [
            _write("core", "[[core]] [[mem/a]] [[mem/missing]]", 1),
            _write("mem/a", "[[mem/b]] [[mem/a]]", 1),
            _write("mem/b", "[[mem/dead]]", 1),
            _write("mem/dead", None, 1),
            _write("mem/lonely", "[[mem/a]]", 1),
            _write("mem/island", "[[mem/island2]]", 1),
            _write("mem/island2", "[[mem/island]]", 1),
        ]
    )
    assert engram.reachable_from_core(heads) == ["core", "mem/a", "mem/missing", "mem/b", "mem/dead"]
    assert engram.find_orphans(heads) == ["mem/island", "mem/island2", "mem/lonely"]
    assert engram.dangling_refs(heads) == ["mem/missing", "mem/dead"]


def test_without_core_every_live_slug_is_an_orphan() -> None:
    heads = {"mem/a": engram.MemoryBody("mem/a", "[[mem/b]]"), "mem/b": engram.MemoryBody("mem/b", "")}
    assert engram.reachable_from_core(heads) == []
    assert engram.find_orphans(heads) == ["mem/a", "mem/b"]


@pytest.mark.parametrize(
    ("count", "limit", "max_limit", "truncated"),
    [(4999, 5000, None, False), (5000, 5000, None, True), (500, 5000, 500, True), (499, 5000, 500, False)],
)
def test_is_listing_truncated(count: int, limit: int, max_limit: int | None, truncated: bool) -> None:
    assert engram.is_listing_truncated(count, limit, max_limit) is truncated
