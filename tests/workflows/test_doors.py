"""Approvals, doors, trigger contexts, wire parsers and capacity (spec/workflows.md §7, §9, §13)."""

from __future__ import annotations

import hashlib
import json

import pytest

from buzz.core.errors import Invalid, Restricted
from buzz.core.event import Event
from buzz.core.nip19 import npub
from buzz.workflows import capacity as cap
from buzz.workflows import context as cx
from buzz.workflows import events as ev
from buzz.workflows.approvals import (
    Approval,
    ApprovalStatus,
    DeciderFacts,
    Decision,
    approval_reference,
    decide,
    expire,
    parse_approver_spec,
)
from buzz.workflows.validate import parse_definition
from tests.workflows.support import ALICE, BOB, CHANNEL, NOW, OWNER, RUN, WORKFLOW, definition

MEMBER = DeciderFacts(can_write=True, role="member")
ADMIN = DeciderFacts(can_write=True, role="admin")


def event(kind: int, content: str = "", tags: tuple = (), pubkey: str = ALICE) -> Event:
    return Event("e" * 64, pubkey, NOW, kind, tuple(tuple(t) for t in tags), content, "0" * 128)


def approval(spec: str) -> Approval:
    return Approval("f" * 64, WORKFLOW, RUN, "ok", 0, CHANNEL, parse_approver_spec(spec), NOW + 100, NOW)


# -- approvals (§9) ---------------------------------------------------------------------------
def test_approver_specs() -> None:
    assert parse_approver_spec("any").anyone and parse_approver_spec("").anyone
    spec = parse_approver_spec(f"{ALICE}, {npub(BOB)}, role:owner")
    assert spec.pubkeys == {ALICE, BOB} and spec.roles == {"owner"}
    assert parse_approver_spec("role:admin").roles == {"owner", "admin"}
    for bad in ("@release-manager", "role:member", ALICE[:-1], ",".join([ALICE] * 51)):
        with pytest.raises(ValueError):
            parse_approver_spec(bad)
    assert spec.designated({OWNER: "owner", "c" * 64: "admin"}) == [ALICE, BOB, OWNER]


def test_checklist_62_to_65_decisions() -> None:
    grant = Decision(ApprovalStatus.GRANTED, NOW + 1, BOB, "ok", "8" * 64)
    with pytest.raises(Invalid, match="approval not found"):
        decide(None, grant, MEMBER)
    with pytest.raises(Restricted, match="not a channel member"):
        decide(approval("any"), grant, DeciderFacts(False, None))
    with pytest.raises(Restricted, match="not the designated approver"):
        decide(approval(ALICE), grant, MEMBER)
    with pytest.raises(Restricted, match="not the designated approver"):
        decide(approval("role:admin"), grant, MEMBER)
    granted = decide(approval("role:admin"), grant, ADMIN)
    assert (
        granted.status is ApprovalStatus.GRANTED and granted.approver == BOB and granted.decided_at == NOW + 1
    )
    with pytest.raises(Invalid, match="approval already granted"):  # a double grant
        decide(granted, grant, ADMIN)
    with pytest.raises(Invalid, match="approval token has expired"):
        decide(approval("any"), Decision(ApprovalStatus.GRANTED, NOW + 100, BOB), MEMBER)
    with pytest.raises(Invalid, match="note exceeds 4096"):
        decide(approval("any"), Decision(ApprovalStatus.GRANTED, NOW, BOB, "x" * 4097), MEMBER)
    assert decide(approval(f"{ALICE},{BOB}"), grant, MEMBER).approver == BOB


def test_expiry_sweep() -> None:
    assert expire(approval("any"), NOW + 99) is None
    gone = expire(approval("any"), NOW + 100)
    assert gone is not None and gone.status is ApprovalStatus.EXPIRED
    assert expire(gone, NOW + 200) is None
    with pytest.raises(Invalid, match="approval already expired"):
        decide(gone, Decision(ApprovalStatus.GRANTED, NOW, BOB), MEMBER)


def test_checklist_90_token_reference() -> None:
    token = "123e4567-e89b-42d3-a456-426614174000"
    assert approval_reference(token) == hashlib.sha256(token.encode()).hexdigest()


def test_approval_answers_by_d_or_e() -> None:
    by_d = ev.parse_approval_answer(event(46030, "fine", (("d", "f" * 64), ("e", "9" * 64), ("h", CHANNEL))))
    assert (by_d.grant, by_d.candidate, by_d.by_reference, by_d.channel_id, by_d.note) == (
        True,
        "f" * 64,
        True,
        CHANNEL,
        "fine",
    )
    by_e = ev.parse_approval_answer(event(46031, "", (("e", "9" * 64),)))
    assert (by_e.grant, by_e.candidate, by_e.by_reference) == (False, "9" * 64, False)
    with pytest.raises(Invalid, match="approval not found"):
        ev.parse_approval_answer(event(46030))
    with pytest.raises(Invalid, match="note exceeds"):
        ev.parse_approval_answer(event(46030, "x" * 4097, (("d", "f" * 64),)))


# -- manual trigger (§13) and contexts (§7.2) ---------------------------------------------------
def test_manual_trigger_shape_and_inputs() -> None:
    m = ev.parse_manual_trigger(event(46020, '{"env": "prod"}', (("d", WORKFLOW), ("h", CHANNEL))))
    assert (m.workflow_id, m.channel_id) == (WORKFLOW, CHANNEL)
    assert (
        ev.parse_manual_trigger(event(46020, "", (("e", "x" * 64), ("e", WORKFLOW)))).workflow_id == WORKFLOW
    )
    with pytest.raises(Invalid, match="workflow not found"):
        ev.parse_manual_trigger(event(46020, "", (("e", "x" * 64),)))
    for bad in ("[1]", "1", "{", '"s"'):
        with pytest.raises(Invalid, match="trigger inputs must be a JSON object"):
            cx.parse_manual_inputs(bad)
    inputs = cx.parse_manual_inputs(
        '{"env": "prod", "n": 2, "deep": {"a": [1]}, "author": "x", "trigger_x": 1, "steps_y": 2}'
    )
    ctx = cx.manual_context(CHANNEL, NOW, OWNER, inputs)
    assert (ctx["author"], ctx["env"], ctx["n"], ctx["deep"]) == (OWNER, "prod", "2", '{"a":[1]}')
    assert "trigger_x" not in ctx and "steps_y" not in ctx
    env = cx.condition_variables(ctx, {})
    assert (
        env["trigger_env"] == "prod" and env["trigger_author"] == OWNER and env["trigger_is_reply"] is False
    )


def test_webhook_inputs_are_bounded_and_standard_fields_win() -> None:
    body = {"timestamp": "0", "author": "someone", "x" * 65: 1} | {f"k{i}": i for i in range(150)}
    ctx = cx.webhook_context(CHANNEL, NOW, body)
    assert ctx["timestamp"] == str(NOW) and ctx["author"] == "someone"  # a webhook sets no author
    assert len([k for k in ctx if k.startswith("k")]) == 100 - 1 and "x" * 65 not in ctx


def test_checklist_42_43_channel_event_contexts() -> None:
    reply = event(9, "bug!", (("e", "r" * 64, "", "root"), ("e", "p" * 64, "", "reply"), ("actor", BOB)))
    ctx = cx.channel_event_context(reply, CHANNEL)
    assert (ctx["author"], ctx["is_reply"], ctx["message_id"], ctx["event_id"]) == (
        ALICE,
        True,
        "e" * 64,
        "e" * 64,
    )
    assert cx.channel_event_context(event(9, "x", (("e", "r" * 64),)), CHANNEL)["is_reply"] is False
    reaction = event(7, "👍", (("e", "1" * 64), ("p", BOB), ("e", "2" * 64)))
    rctx = cx.channel_event_context(reaction, CHANNEL)
    assert (rctx["emoji"], rctx["text"], rctx["message_id"]) == ("👍", "👍", "2" * 64)


def test_checklist_39_to_41_the_channel_event_door() -> None:
    posted = parse_definition(definition("{on: message_posted, filter: 'str_contains(trigger_text, \"bug\")'}",
                                         "  - {id: a, action: delay, duration: 1}\n"), now=NOW).trigger  # fmt: skip
    msg = event(9, "a bug")
    assert cx.fires(posted, msg, cx.channel_event_context(msg, CHANNEL)) == (True, None)
    assert cx.fires(posted, event(9, "fine"), cx.channel_event_context(event(9, "fine"), CHANNEL)) == (
        False,
        None,
    )
    for other in (
        event(40002, "a bug"),
        event(40003, "a bug"),
        event(9, "a bug", (("buzz:workflow", "true"),)),
    ):
        assert cx.fires(posted, other, cx.channel_event_context(other, CHANNEL)) == (False, None)
    react = parse_definition(definition("{on: reaction_added, emoji: '👍'}", "  - {id: a, action: delay, duration: 1}\n"),
                             now=NOW).trigger  # fmt: skip
    assert cx.fires(react, event(7, "👍"), {})[0] and not cx.fires(react, event(7, "👎"), {})[0]
    diff = parse_definition(
        definition("{on: diff_posted}", "  - {id: a, action: delay, duration: 1}\n"), now=NOW
    ).trigger
    assert cx.fires(diff, event(40008, "diff"), {})[0]
    broken = parse_definition(definition("{on: message_posted, filter: 'trigger_nope == 1'}",
                                         "  - {id: a, action: delay, duration: 1}\n"), now=NOW).trigger  # fmt: skip
    fired, error = cx.fires(broken, msg, cx.channel_event_context(msg, CHANNEL))
    assert not fired and error == "undefined variable trigger_nope"


def test_never_trigger_kinds() -> None:
    for kind in (46001, 46012, 30620, 41010, 46020, 46030, 46031, 1059):
        assert cx.is_engine_event(event(kind))
    assert not cx.is_engine_event(event(9))


def test_job_request_shape() -> None:
    ref = ev.RunRef(WORKFLOW, OWNER, CHANNEL, RUN)
    req = ev.job_request(ref, NOW, agent=ALICE, prompt="é" * 5000, deadline=NOW + 3600, step_id="ask")
    body = json.loads(req.content)
    assert req.kind == 43001 and req.tags[:3] == (("h", CHANNEL), ("p", ALICE), ("actor", OWNER))
    assert len(body["requestedOutcome"].encode()) <= 8192 and body["prompt"] == "é" * 5000
    assert body["source"] == {"type": "workflow", "workflow_id": WORKFLOW, "run_id": RUN, "step_id": "ask"}


# -- capacity (§7.1, §7.4) -----------------------------------------------------------------------
def test_checklist_44_run_rate() -> None:
    rate = cap.RunRate()
    assert sum(rate.allow(WORKFLOW, NOW + i * 0.1) for i in range(200)) == 120
    assert rate.allow(WORKFLOW, NOW + 60.1)  # the window moved
    rate.forget(NOW + 1000)
    assert rate._seen == {}


def test_checklist_45_46_queue_permits_and_refusals() -> None:
    assert cap.admit(2, queue_max=3) is cap.Verdict.ADMIT
    assert cap.admit(3, queue_max=3) is cap.Verdict.QUEUE_FULL
    assert cap.admit(0, rate_ok=False) is cap.Verdict.RATE_LIMITED
    assert {door for door, _ in cap.REFUSALS} == set(cap.Door)
    assert cap.REFUSALS[(cap.Door.CHANNEL_EVENT, cap.Verdict.QUEUE_FULL)].record_failed
    assert cap.REFUSALS[(cap.Door.WEBHOOK, cap.Verdict.QUEUE_FULL)].http_status == 503
    assert (
        cap.REFUSALS[(cap.Door.MANUAL, cap.Verdict.QUEUE_FULL)].relay_message
        == "rate-limited: workflow run queue is full"
    )
