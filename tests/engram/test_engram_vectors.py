"""Every non-legacy entry of nip-ae-vectors.json that the engram library owns (engram.md §15.2),
one test id per entry, plus the informative legacy event.

Not here: `mem_rs_tests` (the `buzz mem` CLI: hash output, reader resolution, unified-diff
patching, §12) and `prompt_framing_rs_tests` (the agent harness's prompt sections, §13.5);
their owners test them.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

import pytest

from buzz.core import engram, nip44
from buzz.core.event import Event, verify_event
from buzz.core.keys import public_key, sign
from tests.engram import vectors

AE = vectors.nip_ae()
KEYS = AE["keys"]
SK_A, SK_O = KEYS["seckey_a"], KEYS["seckey_o"]
PK_A, PK_O = KEYS["pubkey_a"], KEYS["pubkey_o"]
K_C = bytes.fromhex(KEYS["conversation_key_K_c"])
EVENTS = AE["events"]["cases"]
RS = AE["engram_rs_tests"]


def body_of(spec: dict[str, Any]) -> engram.Body:
    """An engram body from a vector's `{"type", "slug", "value"/"profile"}` description."""
    if spec["type"] == "core":
        return engram.CoreBody(spec["profile"])
    return engram.MemoryBody(spec["slug"], spec["value"])


def vector_event(case: dict[str, Any]) -> Event:
    return Event.from_json(
        {k: case[k] for k in ("id", "pubkey", "created_at", "kind", "tags", "content", "sig")}
    )


def open_both_sides(event: Event) -> engram.Body:
    agent_side = engram.validate_and_decrypt(event, PK_A, PK_O, SK_A, PK_O)
    owner_side = engram.validate_and_decrypt(event, PK_A, PK_O, SK_O, PK_A)
    assert agent_side == owner_side
    return agent_side


def all_heads() -> dict[str, engram.Record]:
    opened = engram.open_candidates([vector_event(c) for c in EVENTS], PK_A, PK_O, SK_A, PK_O)
    assert opened.skipped == 0
    return engram.heads_by_slug(opened.records)


# -- constants, keys ----------------------------------------------------------------------------
CONSTANTS = {k: v for k, v in AE["constants"].items() if k not in ("source", "d_tag_formula")}


@pytest.mark.parametrize("name", list(CONSTANTS), ids=list(CONSTANTS))
def test_constants(name: str) -> None:
    value = CONSTANTS[name]
    ours = {
        "kind": engram.KIND_ENGRAM,
        "core_slug": engram.CORE_SLUG,
        "d_tag_domain_utf8": engram.D_DOMAIN.decode(),
        "d_tag_domain_hex": engram.D_DOMAIN.hex(),
        "d_tag_separator_hex": "00",
        "nip44_plaintext_max": engram.PLAINTEXT_MAX,
        "slug_max_len": engram.SLUG_MAX,
    }
    if name == "slug_regex":
        pattern = re.compile(value)
        samples = [
            *RS["validate_slug"]["valid"],
            *RS["validate_slug"]["invalid"],
            "mem/" + "a" * 64,
            "mem/" + "a" * 65,
        ]
        for slug in samples:
            expected = slug == "core" or (
                len(slug) <= engram.SLUG_MAX and pattern.fullmatch(slug) is not None
            )
            assert engram.is_valid_slug(slug) is expected, slug
    else:
        assert ours[name] == value


@pytest.mark.parametrize("name", ["pubkey_a", "pubkey_o", "conversation_key_K_c"])
def test_keys(name: str) -> None:
    if name == "pubkey_a":
        assert public_key(SK_A) == PK_A
    elif name == "pubkey_o":
        assert public_key(SK_O) == PK_O
    else:
        assert engram.conversation_key(SK_A, PK_O) == engram.conversation_key(SK_O, PK_A) == K_C


# -- d_tags, bodies, events ---------------------------------------------------------------------
D_CASES = AE["d_tags"]["cases"]


@pytest.mark.parametrize("case", D_CASES, ids=[c["slug"] for c in D_CASES])
def test_d_tags(case: dict[str, str]) -> None:
    assert engram.d_tag(K_C, case["slug"]) == case["d"]


BODY_CASES = AE["bodies"]["cases"]


@pytest.mark.parametrize("case", BODY_CASES, ids=[c["name"] for c in BODY_CASES])
def test_bodies(case: dict[str, Any]) -> None:
    spec = {"type": "core" if case["kind"] == "core" else "memory", **case}
    body = body_of(spec)
    assert engram.encode_body(body) == case["json"].encode()
    assert engram.decode_body(case["json"]) == body


@pytest.mark.parametrize("case", EVENTS, ids=[c["name"] for c in EVENTS])
def test_events_rebuild_byte_for_byte(case: dict[str, Any]) -> None:
    body = engram.decode_body(case["body"])
    assert engram.encode_body(body) == case["body"].encode()
    assert case["schnorr_aux"] == KEYS["schnorr_aux_all_events"]
    event = engram.build_event(
        SK_A,
        PK_O,
        body,
        case["created_at"],
        nonce=bytes.fromhex(case["nip44_nonce"]),
        aux=bytes.fromhex(case["schnorr_aux"]),
    )
    assert event.to_dict() == vector_event(case).to_dict()
    assert len(event.content) == case["content_len"]
    assert hashlib.sha256(event.content.encode("ascii")).hexdigest() == case["sha256_content"]
    verify_event(event)
    assert open_both_sides(event) == body
    assert body.slug == case["slug"]


LEGACY = AE["legacy_events"]["cases"]


@pytest.mark.parametrize("case", LEGACY, ids=[c["name"] for c in LEGACY])
def test_legacy_events_decode_with_index_ignored(case: dict[str, Any]) -> None:
    event = vector_event(case)
    verify_event(event)
    body = open_both_sides(event)
    assert body == engram.CoreBody(engram.decode_body(EVENTS[3]["body"]).profile)
    # Our writer never emits `index`: re-encoding gives the current (index-free) bytes.
    assert b"index" not in engram.encode_body(body)
    assert engram.encode_body(body) == EVENTS[3]["body"].encode()


# -- expected_outcomes --------------------------------------------------------------------------
OUTCOMES = AE["expected_outcomes"]
HEAD_OF = OUTCOMES["head_of"]


@pytest.mark.parametrize("slug", list(HEAD_OF), ids=list(HEAD_OF))
def test_expected_head_of(slug: str) -> None:
    expected = HEAD_OF[slug]
    d = engram.d_tag(K_C, slug)
    # What a head query (#d = d(slug)) would return from a relay that keeps every version.
    answer = [c for c in EVENTS if c["tags"][0][1] == d]
    if "candidates" in expected:
        assert sorted(c["id"] for c in answer) == sorted(expected["candidates"])
    outcome = engram.head_outcome(answer, PK_A, PK_O, SK_A, PK_O)
    assert isinstance(outcome, engram.Found)
    assert outcome.event.id == expected["head_id"]
    assert engram.select_head(vector_event(c) for c in answer).id == expected["head_id"]
    if "read_result_profile" in expected:
        assert outcome.body == engram.CoreBody(expected["read_result_profile"])
    elif expected["read_result"].startswith("absent"):
        assert outcome.body.is_tombstone
    else:
        assert outcome.body.text == expected["read_result"]


def test_expected_listing() -> None:
    entries = engram.listing(all_heads())
    assert [e.to_dict() for e in entries] == OUTCOMES["listing"]


REFS = OUTCOMES["refs"]


@pytest.mark.parametrize("name", list(REFS), ids=list(REFS))
def test_expected_refs(name: str) -> None:
    heads = all_heads()
    slug = name.split(" ")[0].removesuffix(".profile").removesuffix(".value")
    body = heads[slug].body
    text = body.text
    assert (engram.extract_refs(text) if text is not None else []) == REFS[name]


def test_expected_reachability_from_core() -> None:
    heads = all_heads()
    expected = OUTCOMES["reachability_from_core"]
    assert engram.reachable_from_core(heads) == expected["reachable_slugs"]
    assert engram.find_orphans(heads) == expected["live_orphans"]
    assert engram.dangling_refs(heads) == ["mem/example"]


def test_expected_monotonic_next_write() -> None:
    case = OUTCOMES["monotonic_next_write"]
    head = all_heads()[case["slug"]]
    assert head.created_at == case["prior_head_created_at"]
    assert engram.monotonic_created_at(case["now"], head.created_at) == case["created_at"]


def test_bip340_self_check() -> None:
    check = AE["bip340_self_check"]
    sig = sign(check["seckey"], bytes.fromhex(check["msg"]), bytes.fromhex(check["aux"]))
    assert sig.startswith(check["sig_prefix"])


# -- engram_rs_tests ----------------------------------------------------------------------------
def test_pubkeys_match_spec() -> None:
    case = RS["pubkeys_match_spec"]
    assert public_key(case["seckey_a"]) == case["pubkey_a"]
    assert public_key(case["seckey_o"]) == case["pubkey_o"]


def test_conversation_key_matches_spec() -> None:
    expected = RS["conversation_key_matches_spec"]["K_c"]
    assert engram.conversation_key(SK_A, PK_O).hex() == expected
    assert engram.conversation_key(SK_O, PK_A).hex() == expected


OFF_CURVE = RS["conversation_key_off_curve"]


@pytest.mark.parametrize("case", OFF_CURVE["cases"], ids=[c["their_pubkey"][-2:] for c in OFF_CURVE["cases"]])
def test_conversation_key_off_curve(case: dict[str, str]) -> None:
    if case["expect"] == "ok":
        assert len(engram.conversation_key(OFF_CURVE["my_seckey"], case["their_pubkey"])) == 32
    else:
        with pytest.raises(engram.InvalidKey) as info:
            engram.conversation_key(OFF_CURVE["my_seckey"], case["their_pubkey"])
        assert case["message_must_contain"] in str(info.value)
        assert isinstance(info.value, nip44.InvalidKey)


OFF_CURVE_PK = "00" * 31 + "05"


def test_conversation_key_off_curve_build_event() -> None:
    assert OFF_CURVE["build_event_with_off_curve_owner"].startswith("InvalidKey")
    with pytest.raises(engram.InvalidKey, match=OFF_CURVE_PK):
        engram.build_event(SK_A, OFF_CURVE_PK, engram.MemoryBody("mem/x", "v"), 1)


def test_conversation_key_off_curve_validate_and_decrypt() -> None:
    assert OFF_CURVE["validate_and_decrypt_with_off_curve_their_pubkey"].startswith("Decrypt")
    event = vector_event(EVENTS[0])
    with pytest.raises(engram.Decrypt):
        engram.validate_and_decrypt(event, PK_A, PK_O, SK_A, OFF_CURVE_PK)


@pytest.mark.parametrize("case", RS["d_tags_match_spec"], ids=[c["slug"] for c in RS["d_tags_match_spec"]])
def test_d_tags_match_spec(case: dict[str, str]) -> None:
    assert engram.d_tag(engram.conversation_key(SK_A, PK_O), case["slug"]) == case["d"]
    assert engram.d_tag(engram.conversation_key(SK_O, PK_A), case["slug"]) == case["d"]


ROUND_TRIPS = RS["body_round_trips_byte_exact"]


@pytest.mark.parametrize("case", ROUND_TRIPS, ids=[f"body-{i}" for i in range(len(ROUND_TRIPS))])
def test_body_round_trips_byte_exact(case: dict[str, Any]) -> None:
    body = body_of(case["body"])
    assert engram.encode_body(body) == case["json"].encode()
    assert engram.decode_body(case["json"]) == body
    assert engram.encode_body(engram.decode_body(case["json"])) == case["json"].encode()


BODY_PARSE = RS["body_parse"]


@pytest.mark.parametrize("case", BODY_PARSE, ids=[c["test"] for c in BODY_PARSE])
def test_body_parse(case: dict[str, Any]) -> None:
    if case["expect"] == "error":
        with pytest.raises(engram.InvalidBody, match=case["error_contains"]):
            engram.decode_body(case["input"])
    else:
        assert engram.decode_body(case["input"]) == body_of(case["expect"])


SLUGS = RS["validate_slug"]


@pytest.mark.parametrize("slug", SLUGS["valid"], ids=SLUGS["valid"])
def test_validate_slug_valid(slug: str) -> None:
    assert engram.validate_slug(slug) == slug


@pytest.mark.parametrize("slug", SLUGS["invalid"], ids=[repr(s) for s in SLUGS["invalid"]])
def test_validate_slug_invalid(slug: str) -> None:
    with pytest.raises(engram.InvalidSlug):
        engram.validate_slug(slug)


NORMALIZE = RS["normalize_slug"]


@pytest.mark.parametrize("case", NORMALIZE, ids=[c["input"] for c in NORMALIZE])
def test_normalize_slug(case: dict[str, Any]) -> None:
    if case["output"] is None:
        with pytest.raises(engram.InvalidSlug):
            engram.normalize_slug(case["input"])
    else:
        assert engram.normalize_slug(case["input"]) == case["output"]


MONOTONIC = RS["monotonic_created_at"]


@pytest.mark.parametrize("case", MONOTONIC, ids=[f"{c['now']}-{c['prior_head']}" for c in MONOTONIC])
def test_monotonic_created_at(case: dict[str, Any]) -> None:
    assert engram.monotonic_created_at(case["now"], case["prior_head"]) == case["expect"]


def test_select_head_lww_with_id_tiebreak() -> None:
    case = RS["select_head_lww_with_id_tiebreak"]
    body = engram.MemoryBody("mem/example", "v")
    events = [engram.build_event(SK_A, PK_O, body, t) for t in case["created_at"]]
    for order in (events, events[::-1]):
        assert engram.select_head(order).created_at == case["expect_winner_created_at"]
    # Tie rule: equal created_at → the lower hex id wins.
    tied = [engram.build_event(SK_A, PK_O, body, 1700000000) for _ in range(4)]
    assert engram.select_head(tied).id == min(e.id for e in tied)


def test_round_trip_event_validates_and_decrypts() -> None:
    case = RS["round_trip_event_validates_and_decrypts"]
    body = body_of(case["body"])
    event = engram.build_event(SK_A, PK_O, body, case["created_at"])
    verify_event(event)
    assert open_both_sides(event) == body


def test_validate_and_decrypt_rejects_non_lowercase_d_tag() -> None:
    case = RS["validate_and_decrypt_rejects_non_lowercase_d_tag"]
    built = engram.build_event(SK_A, PK_O, body_of(case["body"]), case["created_at"])
    tags = [["d", built.tags[0][1].upper()], list(built.tags[1])]
    mutated = Event.create(SK_A, built.kind, built.content, tags, built.created_at)
    verify_event(mutated)
    with pytest.raises(engram.InvalidEnvelope):
        engram.validate_and_decrypt(mutated, PK_A, PK_O, SK_A, PK_O)


def test_body_too_large_rejected_at_build_time() -> None:
    case = RS["body_too_large_rejected_at_build_time"]
    body = engram.MemoryBody(case["body"]["slug"], "a" * 65535)
    with pytest.raises(engram.BodyTooLarge) as info:
        engram.build_event(SK_A, PK_O, body, 1)
    assert info.value.size == case["serialized_len"]


REFS_CASES = RS["extract_refs"]


@pytest.mark.parametrize("case", REFS_CASES, ids=[f"refs-{i}" for i in range(len(REFS_CASES))])
def test_extract_refs(case: dict[str, Any]) -> None:
    assert engram.extract_refs(case["input"]) == case["expect"]


# -- engram_fetch_rs_tests.decode_core_body (§13.4 states) --------------------------------------
def _core_answer(test: str) -> Any:
    if test == "decode_empty_array_is_confirmed_absence":
        return []
    if test == "decode_valid_core_returns_profile":
        return [engram.build_event(SK_A, PK_O, engram.CoreBody("I am Sami."), 1700000000).to_dict()]
    if test == "decode_undecryptable_candidate_is_err_not_absent":
        # A core event for this pair whose content was encrypted to a different owner.
        other = public_key("00" * 31 + "03")
        foreign = engram.build_event(SK_A, other, engram.CoreBody("not yours"), 1700000000)
        tags = [["d", engram.d_tag(K_C, "core")], ["p", PK_O]]
        return [Event.create(SK_A, engram.KIND_ENGRAM, foreign.content, tags, 1700000000).to_dict()]
    if test == "decode_non_core_body_is_absent":
        return [engram.build_event(SK_A, PK_O, engram.MemoryBody("mem/x", None), 1700000000).to_dict()]
    return CORE_FETCH_CASES[test]["relay_result"]


CORE_FETCH_CASES = {c["test"]: c for c in AE["engram_fetch_rs_tests"]["decode_core_body"]}
CORE_FETCH_EXPECT = {
    "decode_empty_array_is_confirmed_absence": (engram.CoreState.CONFIRMED_EMPTY, None),
    "decode_valid_core_returns_profile": (engram.CoreState.FOUND, "I am Sami."),
    "decode_undecryptable_candidate_is_err_not_absent": (engram.CoreState.FAILURE, None),
    "decode_non_core_body_is_absent": (engram.CoreState.CONFIRMED_EMPTY, None),
    "decode_unparseable_candidates_is_err": (engram.CoreState.FAILURE, None),
}


@pytest.mark.parametrize("test", list(CORE_FETCH_CASES), ids=list(CORE_FETCH_CASES))
def test_decode_core_body(test: str) -> None:
    outcome = engram.head_outcome(_core_answer(test), PK_A, PK_O, SK_A, PK_O)
    assert engram.core_state(outcome) == CORE_FETCH_EXPECT[test]
    if "decryptable" in CORE_FETCH_CASES[test]["expect"]:
        assert isinstance(outcome, engram.AllInvalid) and "decryptable" in outcome.reason
