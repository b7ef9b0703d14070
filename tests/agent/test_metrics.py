"""Turn-metric payloads and events (agents.md §5.1; §9.2 item 35), and permission answers
(§4.10 item 7)."""

from __future__ import annotations

import orjson
import pytest
from acp.schema import PermissionOption

from buzz.agent.acp_client import choose_permission
from buzz.agent.metrics import TurnUsage, build_metric_event, build_payload, is_all_null, map_stop_reason
from buzz.agent.reports import summarize_usage
from buzz.core import nip44
from buzz.core.keys import generate_secret_key, public_key

AGENT_SK, OWNER_SK = generate_secret_key(), generate_secret_key()


def usage(tokens: dict[str, int] | None = None, cost: float | None = None) -> TurnUsage:
    u = TurnUsage()
    if tokens is not None:
        u.add_prompt_usage(tokens)
    if cost is not None:
        u.add_usage_update(
            {
                "sessionUpdate": "usage_update",
                "used": 1,
                "size": 2,
                "cost": {"amount": cost, "currency": "USD"},
            }
        )
    return u


def payload(u: TurnUsage, baseline: dict, stop: str = "end_turn") -> dict:
    return build_payload(
        u,
        baseline,
        timestamp=1_700_000_000.5,
        model=None,
        channel_id="c",
        session_id="s",
        turn_id="t",
        stop_reason=stop,
    )


def test_payload_fields_and_cost_delta() -> None:
    baseline: dict = {}
    first = payload(
        usage({"inputTokens": 10, "outputTokens": 2, "totalTokens": 12, "cachedReadTokens": 4}, 0.5), baseline
    )
    assert first["harness"] == "buzz-agent-harness" and first["timestamp"] == "2023-11-14T22:13:20.500Z"
    assert first["turn"] == {
        "inputTokens": 10,
        "outputTokens": 2,
        "totalTokens": 12,
        "costUsd": 0.5,
        "cacheReadTokens": 4,
    }
    assert first["cumulative"] == {
        "inputTokens": None,
        "outputTokens": None,
        "totalTokens": None,
        "costUsd": 0.5,
    }
    assert (first["turnSeq"], first["deltaReliable"], first["sessionId"]) == (1, True, "s")
    second = payload(usage({"inputTokens": 1, "outputTokens": 1}, 0.75), baseline)
    assert second["turnSeq"] == 2 and second["turn"]["costUsd"] == pytest.approx(0.25)
    assert second["turn"]["totalTokens"] is None  # reported, never computed as a sum
    dropped = payload(usage(None, 0.1), baseline)  # a negative delta → null, unreliable
    assert dropped["turn"]["costUsd"] is None and dropped["deltaReliable"] is False


def test_all_null_is_detected() -> None:
    assert is_all_null(payload(usage({}), {}))
    assert not is_all_null(payload(usage({"outputTokens": 0}), {}))


@pytest.mark.parametrize(
    ("reason", "failed", "expected"),
    [
        ("end_turn", False, "end_turn"),
        ("max_tokens", False, "max_tokens"),
        ("cancelled", False, "cancelled"),
        ("refusal", False, "unknown"),
        ("max_turn_requests", False, "unknown"),
        (None, True, "error"),
        ("cancelled", True, "error"),
    ],
)
def test_stop_reason_map(reason: str | None, failed: bool, expected: str) -> None:
    assert map_stop_reason(reason, failed) == expected


def test_event_shape_and_owner_decryption() -> None:
    body = payload(usage({"totalTokens": 3}), {})
    event = build_metric_event(AGENT_SK, public_key(OWNER_SK), body, 1_700_000_000)
    assert event.kind == 44200 and event.created_at == 1_700_000_000
    assert [list(t) for t in event.tags] == [["p", public_key(OWNER_SK)], ["agent", public_key(AGENT_SK)]]
    key = nip44.get_conversation_key(OWNER_SK, public_key(AGENT_SK))
    assert orjson.loads(nip44.decrypt(event.content, key)) == body


def test_usage_sums_costs_without_a_binary_float_tail() -> None:
    """`buzz agent usage` adds the turns' costs (each the delta of the session's cumulative
    cost): cumulative 0.000381, 0.000916, 0.001374 add up to 0.001374, not 0.0013740000000000002."""
    baseline: dict = {}
    events = [
        build_metric_event(
            AGENT_SK, public_key(OWNER_SK), payload(usage(cost=c), baseline), 1_700_000_000 + i
        )
        for i, c in enumerate((0.000381, 0.000916, 0.001374))
    ]
    (agent,) = summarize_usage(OWNER_SK, events, None)["agents"]
    assert (agent["turns"], agent["costUsd"]) == (3, 0.001374)
    assert agent["channels"][0]["costUsd"] == 0.001374


def _opts(*kinds: str) -> list[PermissionOption]:
    return [PermissionOption(option_id=f"o-{k}", name=k, kind=k) for k in kinds]  # type: ignore[arg-type]


def test_permission_answers() -> None:
    both = _opts("reject_always", "allow_always", "allow_once", "reject_once")
    assert choose_permission("bypass-permissions", both).outcome.option_id == "o-allow_once"  # type: ignore[union-attr]
    assert choose_permission("dont-ask", _opts("allow_always")).outcome.option_id == "o-allow_always"  # type: ignore[union-attr]
    assert choose_permission("default", both).outcome.option_id == "o-reject_once"  # type: ignore[union-attr]
    assert choose_permission("plan", _opts("reject_always")).outcome.option_id == "o-reject_always"  # type: ignore[union-attr]
    assert choose_permission("auto", _opts("reject_once")).outcome.outcome == "cancelled"
