"""NIP-OA owner attestation: every entry of nip-oa-vectors.json (engram.md §14, §15.2).

Roles are reversed relative to the NIP-AE vectors: here the OWNER secret is 00…01 and the
AGENT secret is 00…02.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from buzz.core import nip_oa
from buzz.core.event import Event
from buzz.core.keys import public_key, sign
from tests.engram import vectors

OA = vectors.nip_oa()
SPEC = OA["spec_vector"]
OWNER_SK, OWNER_PK = SPEC["owner_secret"], SPEC["owner_pubkey"]
AGENT_SK, AGENT_PK = SPEC["agent_secret"], SPEC["agent_pubkey"]
SPEC_TAG: list[str] = SPEC["tag"]
SIGNED_EVENT = Event.from_json(OA["signed_event_example"]["event"])


def _raw_tag(owner_sk: str, agent_pk: str, conditions: str) -> list[str]:
    """A tag signed without build_auth_tag's checks, to test what verifiers refuse."""
    return [
        "auth",
        public_key(owner_sk),
        conditions,
        sign(owner_sk, nip_oa.auth_message(agent_pk, conditions)),
    ]


def _agent_event(tags: list[list[str]], kind: int = 1, created_at: int = 1713956400) -> Event:
    return Event.create(AGENT_SK, kind, "owner-attested agent event", tags, created_at)


# -- spec_vector, signed_event_example ----------------------------------------------------------
def test_spec_vector() -> None:
    conditions = SPEC["conditions"]
    assert nip_oa.auth_preimage(AGENT_PK, conditions).decode() == SPEC["preimage"]
    assert nip_oa.auth_message(AGENT_PK, conditions).hex() == SPEC["sha256_preimage"]
    assert ["auth", OWNER_PK, conditions, SPEC["auth_sig"]] == SPEC_TAG
    compact = json.dumps(SPEC_TAG, separators=(",", ":"))
    assert compact == SPEC["tag_json_compact"]
    assert compact.encode().hex() == SPEC["tag_bytes_hex"]
    assert nip_oa.verify_auth_tag(SPEC_TAG, AGENT_PK) == OWNER_PK


def test_signed_event_example() -> None:
    assert nip_oa.verify_event_auth(SIGNED_EVENT) == OWNER_PK
    assert nip_oa.owner_of(SIGNED_EVENT) == OWNER_PK


def test_build_auth_tag_matches_the_spec_shape_and_verifies() -> None:
    tag = nip_oa.build_auth_tag(OWNER_SK, AGENT_PK, SPEC["conditions"])
    assert tag[:3] == SPEC_TAG[:3] and len(tag[3]) == 128
    assert nip_oa.verify_auth_tag(tag, AGENT_PK) == OWNER_PK
    pinned = nip_oa.build_auth_tag(OWNER_SK, AGENT_PK, SPEC["conditions"], aux=bytes(32))
    assert pinned == nip_oa.build_auth_tag(OWNER_SK, AGENT_PK, SPEC["conditions"], aux=bytes(32))


# -- invalid_cases_from_spec.must_reject --------------------------------------------------------
def _two_auth_tags() -> Event:
    tag = nip_oa.build_auth_tag(OWNER_SK, AGENT_PK)
    return _agent_event([tag, tag])


def _bad_arity() -> list[Event]:
    return [_agent_event([SPEC_TAG[:3]]), _agent_event([[*SPEC_TAG, "extra"]])]


def _conditions(text: str) -> Event:
    return _agent_event([_raw_tag(OWNER_SK, AGENT_PK, text)])


def _self_attested() -> Event:
    return _agent_event([_raw_tag(AGENT_SK, AGENT_PK, "")])


def _bad_carrier() -> list[Event]:
    return [replace(SIGNED_EVENT, content="tampered"), replace(SIGNED_EVENT, sig="0" * 128)]


MUST_REJECT: dict[str, Callable[[], Event | list[Event]]] = {
    "an event containing two auth tags": _two_auth_tags,
    "an auth tag with fewer or more than four elements": _bad_arity,
    "conditions string 'kind=1&' (trailing delimiter)": lambda: _conditions("kind=1&"),
    "conditions string 'kind=01' (leading zero)": lambda: _conditions("kind=01"),
    "owner pubkey equal to event.pubkey (self-attestation)": _self_attested,
    "a well-formed auth tag on an event whose NIP-01 id or sig is invalid": _bad_carrier,
}
MUST_REJECT_LIST = OA["invalid_cases_from_spec"]["must_reject"]


@pytest.mark.parametrize("text", MUST_REJECT_LIST, ids=MUST_REJECT_LIST)
def test_invalid_cases_from_spec(text: str) -> None:
    made = MUST_REJECT[text]()
    for event in made if isinstance(made, list) else [made]:
        assert nip_oa.owner_of(event) is None
        with pytest.raises(nip_oa.InvalidAuthTag):
            nip_oa.verify_event_auth(event)


def test_the_two_auth_tags_would_each_be_valid_alone() -> None:
    tag = nip_oa.build_auth_tag(OWNER_SK, AGENT_PK)
    assert nip_oa.owner_of(_agent_event([tag])) == OWNER_PK


# -- sdk_conditions_grammar ---------------------------------------------------------------------
GRAMMAR = OA["sdk_conditions_grammar"]


@pytest.mark.parametrize("conditions", GRAMMAR["valid"], ids=[repr(c) for c in GRAMMAR["valid"]])
def test_conditions_grammar_valid(conditions: str) -> None:
    nip_oa.parse_conditions(conditions)
    tag = nip_oa.build_auth_tag(OWNER_SK, AGENT_PK, conditions)
    assert nip_oa.parse_auth_tag(tag).conditions == conditions


@pytest.mark.parametrize("conditions", GRAMMAR["invalid"], ids=[repr(c) for c in GRAMMAR["invalid"]])
def test_conditions_grammar_invalid(conditions: str) -> None:
    with pytest.raises(nip_oa.InvalidAuthTag):
        nip_oa.parse_conditions(conditions)
    with pytest.raises(nip_oa.InvalidAuthTag):
        nip_oa.build_auth_tag(OWNER_SK, AGENT_PK, conditions)
    with pytest.raises(nip_oa.InvalidAuthTag):
        nip_oa.verify_auth_tag(_raw_tag(OWNER_SK, AGENT_PK, conditions), AGENT_PK)


# -- sdk_time_bounds ----------------------------------------------------------------------------
TIME = OA["sdk_time_bounds"]["cases"]


@pytest.mark.parametrize(
    "case", TIME, ids=[f"{c['conditions'] or 'empty'}@{c['t']}-{'ok' if c['ok'] else 'reject'}" for c in TIME]
)
def test_time_bounds(case: dict[str, Any]) -> None:
    tag = nip_oa.build_auth_tag(OWNER_SK, AGENT_PK, case["conditions"])
    assert nip_oa.parse_auth_tag(tag).holds(None, case["t"]) is case["ok"]
    if case["ok"]:
        assert nip_oa.verify_auth_tag_at(tag, AGENT_PK, case["t"]) == OWNER_PK
    else:
        with pytest.raises(nip_oa.InvalidAuthTag):
            nip_oa.verify_auth_tag_at(tag, AGENT_PK, case["t"])


@pytest.mark.parametrize(("created_at", "ok"), [(101, True), (199, True), (100, False), (200, False)])
def test_time_clauses_use_the_carrying_events_created_at(created_at: int, ok: bool) -> None:
    tag = nip_oa.build_auth_tag(OWNER_SK, AGENT_PK, "kind=9&created_at>100&created_at<200")
    event = _agent_event([tag], kind=9, created_at=created_at)
    assert (nip_oa.owner_of(event) == OWNER_PK) is ok


def test_kind_clause_is_checked_on_full_verification() -> None:
    tag = nip_oa.build_auth_tag(OWNER_SK, AGENT_PK, "kind=9")
    assert nip_oa.owner_of(_agent_event([tag], kind=9)) == OWNER_PK
    assert nip_oa.owner_of(_agent_event([tag], kind=1)) is None
    assert nip_oa.verify_auth_tag_at(tag, AGENT_PK, 0) == OWNER_PK  # kind= ignored by time checks


# -- sdk_parse_auth_tag_structure ---------------------------------------------------------------
STRUCTURE = OA["sdk_parse_auth_tag_structure"]


def _with(index: int, value: str) -> list[str]:
    tag = list(SPEC_TAG)
    tag[index] = value
    return tag


STRUCTURE_REJECT: dict[str, object] = {
    "not json": "not json",
    '{"auth":"x"}': '{"auth":"x"}',
    '["auth","a","b"]': '["auth","a","b"]',
    "first element not 'auth'": _with(0, "AUTH"),
    "owner pubkey 'abcd' (short)": _with(1, "abcd"),
    "owner pubkey 'z'*64 (non-hex)": _with(1, "z" * 64),
    "signature 'abcd' (short)": _with(3, "abcd"),
    "signature 'z'*128 (non-hex)": _with(3, "z" * 128),
    "owner pubkey uppercased": _with(1, OWNER_PK.upper()),
    "owner pubkey with first char 'A'": _with(1, "A" + OWNER_PK[1:]),
    "signature 'A'*128 (uppercase)": _with(3, "A" * 128),
    "conditions 'kind=1&'": _with(2, "kind=1&"),
}


@pytest.mark.parametrize("text", STRUCTURE["reject"], ids=STRUCTURE["reject"])
def test_parse_auth_tag_rejects(text: str) -> None:
    with pytest.raises(nip_oa.InvalidAuthTag):
        nip_oa.parse_auth_tag(STRUCTURE_REJECT[text])


def test_parse_auth_tag_accept_structure_only() -> None:
    tag = STRUCTURE["accept_structure_only"]["tag"]
    parsed = nip_oa.parse_auth_tag(tag)
    assert parsed.to_list() == tag
    assert nip_oa.parse_auth_tag(json.dumps(tag)) == parsed
    with pytest.raises(nip_oa.InvalidAuthTag, match="signature"):
        nip_oa.verify_auth_tag(tag, AGENT_PK)


VERIFY_REJECT: dict[str, Callable[[], tuple[list[str], str]]] = {
    "signature '0'*128 (well-formed but wrong)": lambda: (_with(3, "0" * 128), AGENT_PK),
    "conditions 'kind=01'": lambda: (_raw_tag(OWNER_SK, AGENT_PK, "kind=01"), AGENT_PK),
    "self-attestation (owner == agent)": lambda: (_raw_tag(OWNER_SK, OWNER_PK, ""), OWNER_PK),
}


@pytest.mark.parametrize("text", STRUCTURE["verify_rejects"], ids=STRUCTURE["verify_rejects"])
def test_verify_auth_tag_rejects(text: str) -> None:
    tag, agent = VERIFY_REJECT[text]()
    with pytest.raises(nip_oa.InvalidAuthTag):
        nip_oa.verify_auth_tag(tag, agent)


def test_build_refuses_self_attestation_and_bad_agent() -> None:
    with pytest.raises(nip_oa.InvalidAuthTag, match="self-attestation"):
        nip_oa.build_auth_tag(OWNER_SK, OWNER_PK)
    with pytest.raises(nip_oa.InvalidAuthTag):
        nip_oa.build_auth_tag(OWNER_SK, "00" * 31 + "05")  # not a curve point


def test_owner_not_on_curve_is_rejected() -> None:
    with pytest.raises(nip_oa.InvalidAuthTag, match="point"):
        nip_oa.verify_auth_tag(_with(1, "00" * 31 + "05"), AGENT_PK)


def test_event_without_auth_tag_has_no_owner() -> None:
    assert nip_oa.owner_of(_agent_event([])) is None


# -- cli_auth_tag_input_normalization -----------------------------------------------------------
CLI = OA["cli_auth_tag_input_normalization"]


@pytest.mark.parametrize("case", CLI["cases"], ids=[f"case-{i}" for i in range(len(CLI["cases"]))])
def test_cli_input_normalization(case: dict[str, Any]) -> None:
    normalized = nip_oa.normalize_auth_tag_input(case["input"])
    assert json.loads(normalized) == case["output"]
    assert nip_oa.parse_auth_tag(normalized).to_list() == case["output"]


@pytest.mark.parametrize("raw", CLI["unchanged_except_trim"], ids=CLI["unchanged_except_trim"])
def test_cli_input_unchanged_except_trim(raw: str) -> None:
    assert nip_oa.normalize_auth_tag_input(f"  {raw}\n") == raw
    with pytest.raises(nip_oa.InvalidAuthTag):
        nip_oa.parse_auth_tag(nip_oa.normalize_auth_tag_input(raw))


def test_cli_input_json_is_used_unchanged() -> None:
    text = json.dumps(SPEC_TAG)
    assert nip_oa.normalize_auth_tag_input(f" {text} ") == text
    assert nip_oa.verify_auth_tag(nip_oa.normalize_auth_tag_input(text), AGENT_PK) == OWNER_PK
