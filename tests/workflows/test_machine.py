"""The run state machine, fed inputs the way the runner will (spec/workflows.md §7, §9, §10, §11)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from buzz.workflows import machine as m
from buzz.workflows.approvals import Approval, ApprovalStatus, Decision, parse_approver_spec, transition
from buzz.workflows.machine import RunStatus, StepStatus
from buzz.workflows.validate import parse_definition
from tests.workflows.support import ALICE, CHANNEL, NOW, OWNER, REVISION, RUN, WORKFLOW, definition


def make(steps: str, trigger: str = "{on: webhook}", context: dict | None = None) -> m.Transition:
    df = parse_definition(definition(trigger, steps), now=NOW)
    ctx = {"text": "hello", "author": ALICE, "channel_id": CHANNEL, "timestamp": str(NOW), "emoji": "",
           "message_id": "", "is_reply": False, **(context or {})}  # fmt: skip
    return m.create(run_id=RUN, workflow_id=WORKFLOW, owner=OWNER, channel_id=CHANNEL, revision=REVISION,
                    definition=df, trigger=ctx, now=NOW, trigger_event_id="e" * 64)  # fmt: skip


def content(t: m.Transition) -> list[tuple[int, dict]]:
    return [(e.kind, json.loads(e.content)) for e in t.emitted]


def go(run: m.Run, now: int = NOW, authorized: bool = True) -> m.Transition:
    return m.advance(run, m.Proceed(now, authorized))


THREE = "".join(
    f"  - {{id: s{i}, action: send_message, text: 'm{i} {{{{trigger.text}}}}'}}\n" for i in range(3)
)


def test_a_three_step_run_emits_the_whole_lifecycle_in_seq_order() -> None:
    t = make(THREE)
    assert t.run.status is RunStatus.PENDING
    ((kind, first),) = content(t)
    assert kind == 46001 and first["seq"] == 1 and first["revision"] == REVISION
    assert first["trigger"] == {"on": "webhook", "event_id": "e" * 64, "author": ALICE}
    events = list(t.emitted)
    run = t.run
    for i in range(3):
        t = go(run)
        (dispatch,) = [e for e in t.effects if isinstance(e, m.Dispatch)]
        assert dispatch.resolved.fields == {"text": f"m{i} hello", "reply_in_thread": False}
        assert (dispatch.attempt, dispatch.effect_at, dispatch.resume) == (1, NOW, False)
        assert t.run.record is not None and t.run.record.status is StepStatus.RUNNING
        events += t.emitted
        t = m.advance(
            t.run, m.StepSucceeded(NOW + 1, {"sent": True, "event_id": f"{i}" * 64, "channel_id": CHANNEL})
        )
        assert any(isinstance(e, m.Continue) for e in t.effects)
        events += t.emitted
        run = t.run
    t = go(run, NOW + 2)
    events += t.emitted
    assert t.run.status is RunStatus.COMPLETED and t.run.completed_at == NOW + 2
    kinds = [e.kind for e in events]
    assert kinds == [46001, 46002, 46003, 46002, 46003, 46002, 46003, 46005]
    seqs = [json.loads(e.content)["seq"] for e in events]
    assert seqs == list(range(1, 9))
    for e in events:
        tags = dict((t[0], t[1]) for t in e.tags)
        assert tags["h"] == CHANNEL and tags["d"] == WORKFLOW and tags["run"] == RUN
        assert tags["buzz:workflow"] == "true" and tags["a"] == f"30620:{OWNER}:{WORKFLOW}"
    done = json.loads(events[-1].content)
    assert (done["steps_completed"], done["steps_skipped"], done["started_at"]) == (3, 0, NOW)
    assert [r.trace()["status"] for r in t.run.steps] == ["completed"] * 3
    with pytest.raises(m.IllegalTransition):  # terminal runs take no input
        go(t.run)


def test_resume_after_kill_redispatches_the_recorded_effect_once_more() -> None:
    """kill -9 after step 2's effect was recorded but before it completed: the restarted
    runner feeds Proceed and gets the same recorded effect, one attempt later; step 1 is
    not touched again."""
    run = go(make(THREE).run).run
    run = m.advance(run, m.StepSucceeded(NOW, {"sent": True})).run
    started = go(run, NOW + 5)
    recorded = started.run  # what the store holds when the process dies
    resumed = go(recorded, NOW + 60)
    (dispatch,) = [e for e in resumed.effects if isinstance(e, m.Dispatch)]
    assert (dispatch.step_index, dispatch.attempt, dispatch.effect_at, dispatch.resume) == (
        1,
        2,
        NOW + 5,
        True,
    )
    assert dispatch.resolved == next(e for e in started.effects if isinstance(e, m.Dispatch)).resolved
    assert [(k, c["attempt"]) for k, c in content(resumed)] == [(46002, 2)]
    assert resumed.run.steps[0] == recorded.steps[0]


def test_webhook_idempotency_key_is_run_and_step() -> None:
    t = go(
        make(
            "  - {id: hook, action: call_webhook, url: 'https://example.com/x', body: '{{trigger.text}}'}\n"
        ).run
    )
    (dispatch,) = [e for e in t.effects if isinstance(e, m.Dispatch)]
    assert dispatch.resolved.fields["idempotency_key"] == f"{RUN}:hook"
    assert dispatch.resolved.fields["body"] == "hello" and dispatch.deadline == NOW + 300


def test_a_false_if_skips_and_an_erroring_if_fails() -> None:
    steps = "  - {id: a, if: 'trigger_text == \"nope\"', action: send_message, text: x}\n" \
            "  - {id: b, if: 'steps_a_output_sent', action: send_message, text: y}\n"  # fmt: skip
    t = go(make(steps).run)
    assert content(t) == [(46003, {"v": 1, "workflow_id": WORKFLOW, "run_id": RUN, "seq": 2, "step_id": "a",
                                   "step_index": 0, "action": "send_message", "status": "skipped", "output": None})]  # fmt: skip
    assert t.run.steps[0].status is StepStatus.SKIPPED
    t = go(t.run)  # checklist 20: a skipped step's output is undefined
    assert t.run.status is RunStatus.FAILED and t.run.error_code == "condition_evaluation_failed"
    assert [k for k, _ in content(t)] == [46004, 46006]
    failed = content(t)[1][1]
    assert (
        failed["failed_step"] == "b" and "undefined variable steps_a_output_sent" in failed["error_message"]
    )
    assert ("p", OWNER) in t.emitted[1].tags


@pytest.mark.parametrize(
    ("step", "code"),
    [
        ("{id: a, action: send_message, text: '{{trigger.text | npub}}'}", "template_resolution_failed"),
        ("{id: a, action: send_message, text: '{{trigger.blank}}'}", "action_failed"),
        ("{id: a, action: send_message, text: x, channel: '{{trigger.other}}'}", "action_failed"),
        ("{id: a, action: send_dm, to: '{{trigger.text}}', text: x}", "invalid_definition"),
        ("{id: a, action: send_dm, to: '{{trigger.owner}}', text: x}", "action_failed"),
        ("{id: a, action: request_approval, from: '{{trigger.text}}'}", "invalid_definition"),
        ("{id: a, action: set_channel_topic, topic: '{{trigger.long}}'}", "action_failed"),
    ],
)
def test_run_time_failures_have_the_spec_codes(step: str, code: str) -> None:
    t = go(make(f"  - {step}\n", context={"blank": " ", "other": "x", "owner": OWNER, "long": "t" * 251}).run)
    assert (t.run.status, t.run.error_code) == (RunStatus.FAILED, code)


def test_owner_authority_is_checked_before_every_step() -> None:
    t = go(make(THREE).run, authorized=False)
    assert (t.run.status, t.run.error_code) == (RunStatus.FAILED, "owner_unauthorized")


def test_step_failure_and_timeout_fail_the_run() -> None:
    t = go(make(THREE).run)
    t = m.advance(t.run, m.StepFailed(NOW + 300, "step_timeout", "x" * 5000))
    assert t.run.error_code == "step_timeout" and len(t.run.error_message or "") == 1024
    assert [k for k, _ in content(t)] == [46004, 46006]


def test_big_outputs_fail_and_medium_ones_are_truncated_in_46003() -> None:
    t = go(make(THREE).run)
    ok = m.advance(t.run, m.StepSucceeded(NOW, {"body": "x" * 9000}))
    ((kind, body),) = content(ok)
    assert kind == 46003 and body["output"] is None and body["output_truncated"] is True
    assert ok.run.steps[0].output == {"body": "x" * 9000}  # the trace keeps it
    too_big = m.advance(t.run, m.StepSucceeded(NOW, {"body": "x" * (1 << 20)}))
    assert (too_big.run.status, too_big.run.error_code) == (RunStatus.FAILED, "action_failed")


def test_delay_waits_durably_and_wakes_with_its_output() -> None:
    t = go(make("  - {id: nap, action: delay, duration: 2h}\n").run)
    assert t.run.status is RunStatus.WAITING and t.run.waiting == {"for": "delay", "until": NOW + 7200}
    assert m.WakeAt(NOW + 7200) in t.effects and [k for k, _ in content(t)] == [46002]
    early = m.advance(t.run, m.Wake(NOW + 100))
    assert early.run == t.run and early.effects == (m.WakeAt(NOW + 7200),)
    woke = m.advance(t.run, m.Wake(NOW + 7205))  # a restart after the instant: applied at once
    assert woke.run.steps[0].output == {"slept_secs": 7200, "woke_at": NOW + 7205}
    assert go(woke.run).run.status is RunStatus.COMPLETED


def test_ask_agent_waits_for_the_job() -> None:
    steps = "  - {id: ask, action: ask_agent, agent: '@Helper', prompt: 'look at {{trigger.text}}', timeout: 10m}\n"
    t = go(make(steps).run)
    (dispatch,) = [e for e in t.effects if isinstance(e, m.Dispatch)]
    assert dispatch.resolved.fields == {"agent_name": "Helper", "prompt": "look at hello", "timeout": 600}
    waiting = m.advance(t.run, m.StepWaits(NOW, "j" * 64, ALICE, NOW + 600)).run
    assert waiting.status is RunStatus.WAITING and waiting.waiting == {"for": "job", "until": NOW + 600}
    out = {"text": "ok", "disposition": "no_artifact", "artifacts": [], "job_id": "j" * 64}
    done = m.advance(waiting, m.JobFinished(NOW + 10, output=out))
    assert done.run.outputs == {"ask": out}
    failed = m.advance(waiting, m.JobFinished(NOW + 10, failure="declined: busy"))
    assert (failed.run.error_code, failed.run.error_message) == ("job_failed", "declined: busy")
    assert m.advance(waiting, m.JobFinished(NOW, cancelled=True)).run.error_code == "job_cancelled"
    late = m.advance(waiting, m.Wake(NOW + 600))
    assert late.run.error_code == "job_timeout"
    cancel = [e for e in late.emitted if e.kind == 43005]
    assert len(cancel) == 1 and json.loads(cancel[0].content) == {"schemaVersion": 1, "reason": "timeout"}
    assert ("e", "j" * 64, "", "reply") in cancel[0].tags and ("p", ALICE) in cancel[0].tags


def approval_run() -> tuple[m.Run, Approval]:
    steps = (
        "  - {id: ok, action: request_approval, from: 'role:admin', message: 'ship {{trigger.text}}?'}\n"
        + THREE
    )
    t = go(make(steps).run)
    (dispatch,) = [e for e in t.effects if isinstance(e, m.Dispatch)]
    fields = dispatch.resolved.fields
    approval = Approval("f" * 64, WORKFLOW, RUN, "ok", 0, CHANNEL, parse_approver_spec(fields["approver_spec"]),
                        NOW + fields["timeout"], NOW, request_event_id="9" * 64)  # fmt: skip
    opened = m.advance(t.run, m.ApprovalOpened(NOW, approval, (ALICE,)))
    assert opened.run.status is RunStatus.WAITING_APPROVAL
    (request,) = opened.emitted
    body = json.loads(request.content)
    assert request.kind == 46010 and ("d", "f" * 64) in request.tags and ("p", ALICE) in request.tags
    assert body["message"] == "ship hello?" and body["approver_spec"] == "role:admin" and body["seq"] == 3
    assert body["expires_at"] == NOW + 86_400
    return opened.run, approval


def test_approval_granted_resumes_with_outputs() -> None:
    run, approval = approval_run()
    granted = transition(approval, Decision(ApprovalStatus.GRANTED, NOW + 5, ALICE, "lgtm", "8" * 64))
    t = m.advance(run, m.ApprovalDecided(NOW + 5, granted))
    assert [k for k, _ in content(t)] == [46011, 46003]
    decided = content(t)[0][1]
    assert (
        decided["decision"] == "granted"
        and decided["approver"] == ALICE
        and decided["decision_event_id"] == "8" * 64
    )
    assert ("e", "9" * 64) in t.emitted[0].tags and ("p", ALICE) in t.emitted[0].tags
    assert t.run.outputs["ok"] == {"approved": True, "approver": ALICE, "note": "lgtm"}
    assert t.run.status is RunStatus.RUNNING and t.run.current_step == 1


def test_approval_denied_cancels_and_expired_fails() -> None:
    run, approval = approval_run()
    denied = m.advance(
        run, m.ApprovalDecided(NOW + 5, transition(approval, Decision(ApprovalStatus.DENIED, NOW + 5, ALICE)))
    )
    assert (denied.run.status, denied.run.error_code) == (RunStatus.CANCELLED, "approval_denied")
    assert [k for k, _ in content(denied)] == [46012, 46007]
    assert (
        content(denied)[1][1]["reason"] == "approval_denied"
        and denied.run.steps[0].status is StepStatus.CANCELLED
    )
    expired = m.advance(
        run,
        m.ApprovalDecided(NOW + 86_400, transition(approval, Decision(ApprovalStatus.EXPIRED, NOW + 86_400))),
    )
    assert (expired.run.status, expired.run.error_code) == (RunStatus.FAILED, "approval_expired")
    assert [k for k, _ in content(expired)] == [46012, 46004, 46006]
    assert content(expired)[0][1]["decision"] == "expired"
    other = replace(approval, reference="0" * 64, status=ApprovalStatus.GRANTED)
    with pytest.raises(m.IllegalTransition):
        m.advance(run, m.ApprovalDecided(NOW, other))


def test_deleting_the_workflow_cancels_a_waiting_run_and_its_job() -> None:
    steps = f"  - {{id: ask, action: ask_agent, agent: '{ALICE}', prompt: hi}}\n"
    t = go(make(steps).run)
    waiting = m.advance(t.run, m.StepWaits(NOW, "j" * 64, ALICE, NOW + 3600)).run
    c = m.advance(waiting, m.Cancel(NOW + 1, by=OWNER))
    assert (c.run.status, c.run.error_code) == (RunStatus.CANCELLED, "workflow_deleted")
    assert [e.kind for e in c.emitted] == [43005, 46007]
    assert json.loads(c.emitted[0].content)["reason"] == "workflow cancelled"
    pending = make(THREE).run
    assert m.advance(pending, m.Cancel(NOW)).run.status is RunStatus.CANCELLED


def test_illegal_inputs_change_nothing() -> None:
    run = make(THREE).run
    for inp in (
        m.StepSucceeded(NOW, {}),
        m.Wake(NOW),
        m.JobFinished(NOW, output={}),
        m.StepWaits(NOW, "j", ALICE, 1),
    ):
        with pytest.raises(m.IllegalTransition):
            m.advance(run, inp)
    assert run.status is RunStatus.PENDING and run.seq == 1


def test_the_transition_table_is_closed() -> None:
    assert set(m.RUN_TRANSITIONS) == set(RunStatus)
    for status in m.TERMINAL:
        assert m.RUN_TRANSITIONS[status] == frozenset()
    assert {RunStatus.RUNNING} == m.HOLDS_PERMIT


def test_a_queue_refusal_is_a_failed_run_without_events() -> None:
    df = parse_definition(definition("{on: webhook}", THREE), now=NOW)
    run = m.refused(run_id=RUN, workflow_id=WORKFLOW, owner=OWNER, channel_id=CHANNEL, revision=REVISION,
                    definition=df, trigger={}, now=NOW)  # fmt: skip
    assert (run.status, run.error_code, run.seq) == (RunStatus.FAILED, "capacity_exceeded", 0)
