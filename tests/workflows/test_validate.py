"""Definition validation (spec/workflows.md §3; checklist items 1–7, 11, 12, 14, 25)."""

from __future__ import annotations

import hashlib
import json

import pytest

from buzz.workflows import definition as d
from buzz.workflows.limits import DEFINITION_MAX_BYTES
from buzz.workflows.validate import DefinitionError, parse_definition, parse_duration, validate
from tests.workflows.support import ALICE, CHANNEL, NOW, definition

DELAY = "  - {id: a, action: delay, duration: 5}\n"


def refused(text: str, **kw: object) -> DefinitionError:
    with pytest.raises(DefinitionError) as err:
        parse_definition(text, now=NOW, **kw)  # type: ignore[arg-type]
    assert err.value.reason.startswith("invalid: ")
    return err.value


FULL = """name: Triage
description: bugs go to the helper
max_concurrent: 2
trigger:
  on: message_posted
  filter: str_contains(str::to_lowercase(trigger_text), "bug")
steps:
  - id: ask
    action: ask_agent
    agent: "@Helper"
    prompt: "Triage: {{trigger.text}}"
    timeout: 2h
  - id: reply
    name: Reply in thread
    if: steps_ask_output_disposition != "failed"
    action: send_message
    text: "{{steps.ask.output.text | truncate(2000)}}"
    reply_in_thread: true
  - id: react
    action: add_reaction
    emoji: "👀"
  - id: topic
    action: set_channel_topic
    topic: ""
  - id: dm
    action: send_dm
    to: ALICE
    text: done
  - id: hook
    action: call_webhook
    url: https://example.com/deploy
    method: put
    headers: {X-Trace: "{{trigger.event_id}}"}
    body: '{"text": "{{trigger.text}}"}'
    retry: {max: 2, backoff: 1s}
  - id: ok
    action: request_approval
    from: [role:admin, ALICE]
    message: Ship it?
  - id: wait
    action: delay
    duration: 720h
""".replace("ALICE", ALICE)


def test_a_full_definition_parses_into_typed_values() -> None:
    df = parse_definition(FULL, now=NOW, channel_id=CHANNEL)
    assert df.name == "Triage" and df.max_concurrent == 2 and df.enabled is True
    assert isinstance(df.trigger, d.MessagePosted) and df.trigger.filter is not None
    assert [s.action_name for s in df.steps] == [
        "ask_agent", "send_message", "add_reaction", "set_channel_topic", "send_dm", "call_webhook",
        "request_approval", "delay",
    ]  # fmt: skip
    assert df.steps[0].action == d.AskAgent("@Helper", "Triage: {{trigger.text}}", 7200)
    assert df.steps[1].condition is not None and df.steps[1].timeout_secs == 300
    hook = df.steps[5].action
    assert isinstance(hook, d.CallWebhook) and hook.method == "PUT" and hook.retry == d.Retry(2, 1)
    assert df.steps[6].action == d.RequestApproval(f"role:admin,{ALICE}", "Ship it?", 86_400)
    assert df.steps[7].action == d.Delay(720 * 3600)
    assert df.elevated


def test_canonical_form_and_hash() -> None:
    df = parse_definition(definition("{on: webhook}", DELAY, "description: é\n"), now=NOW)
    tree = {"name": "Test", "description": "é", "trigger": {"on": "webhook"},
            "steps": [{"id": "a", "action": "delay", "duration": 5}]}  # fmt: skip
    canonical = json.dumps(tree, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert df.canonical == canonical
    assert df.definition_hash == hashlib.sha256(canonical.encode()).hexdigest()
    assert not df.elevated


def test_checklist_1_on_is_a_string_and_enabled_yes_is_refused() -> None:
    assert parse_definition(definition("\n  on: webhook", DELAY), now=NOW).trigger.on == "webhook"
    err = refused(definition("{on: webhook}", DELAY, "enabled: yes\n"))
    assert (
        err.reason == "invalid: workflow YAML parse error: enabled: must be true or false (line 2, column 10)"
    )


@pytest.mark.parametrize(
    ("text", "detail"),
    [
        ("name: x\na: &y 1\n", "anchors are not allowed (line 2, column 4)"),
        ("name: !t x\n", "explicit tags are not allowed"),
        ("name: x\nname: y\n", "duplicate key 'name' (line 2, column 1)"),
        ("name: x\n---\nname: y\n", "more than one YAML document (line 2, column 1)"),
    ],
)
def test_checklist_2_yaml_refusals_name_line_and_column(text: str, detail: str) -> None:
    err = refused(text)
    assert err.reason.startswith("invalid: workflow YAML parse error: ")
    assert detail in err.reason


def test_checklist_3_size() -> None:
    text = "name: x\n#" + "x" * (DEFINITION_MAX_BYTES - 8)
    assert len(text.encode()) == DEFINITION_MAX_BYTES + 1
    assert refused(text).reason == "invalid: workflow definition exceeds 65536 bytes"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("trigger: {on: webhook}\nsteps:\n" + DELAY, "name: is required (line 1, column 1)"),
        (
            definition("{on: webhook}", "  []\n").replace("steps:\n  []", "steps: []"),
            "steps: must list 1 to 100 steps",
        ),
        (
            definition("{on: webhook}", DELAY.replace("{id: a,", "{id: 'a{n}',") * 101),
            "steps: must list 1 to 100 steps",
        ),
        (definition("{on: manual}", DELAY), "trigger.on: unknown trigger 'manual'"),
        (
            definition("{on: webhook}", "  - {id: a, action: launch}\n"),
            "steps[0].action: unknown action 'launch'",
        ),
        (definition("{on: webhook}", "  - {id: a, action: delay}\n"), "steps[0].duration: is required"),
        (
            definition("{on: webhook}", "  - {id: a, action: send_message, text: 5}\n"),
            "steps[0].text: must be a string",
        ),
        (
            definition("{on: webhook}", "  - {id: a, timeout_secs: 0, action: delay, duration: 1}\n"),
            "steps[0].timeout_secs: must be between 1 and 86400",
        ),
        (definition("{on: webhook}", DELAY, "name: y\n"), "duplicate key 'name'"),
        (
            definition("{on: webhook}", DELAY, "max_concurrent: 0\n"),
            "max_concurrent: must be between 1 and 100",
        ),
    ],
)
def test_checklist_4_structure(text: str, reason: str) -> None:
    assert reason in refused(text).reason


@pytest.mark.parametrize(
    ("step_id", "message"),
    [
        ("a-b", "step id must be 1 to 64 characters"),
        ("''", "step id must be 1 to 64 characters"),  # an empty id
        ("x" * 65, "step id must be 1 to 64 characters"),
        ("x_output_y", "must not contain '_output_'"),
    ],
)
def test_checklist_5_step_ids(step_id: str, message: str) -> None:
    step = f"  - {{id: {step_id}, action: delay, duration: 5}}\n"
    assert message in refused(definition("{on: webhook}", step)).reason


def test_checklist_5_duplicate_and_good_ids() -> None:
    assert "duplicate step id 'a'" in refused(definition("{on: webhook}", DELAY * 2)).reason
    df = parse_definition(
        definition("{on: webhook}", "  - {id: fetch_1, action: delay, duration: 5}\n"), now=NOW
    )
    assert df.steps[0].id == "fetch_1"


@pytest.mark.parametrize(
    ("step", "reason"),
    [
        (
            "{id: a, action: send_message, text: hi, reply_in_thread: true}",
            "steps[0].reply_in_thread: reply_in_thread requires a message-based trigger",
        ),
        (
            "{id: a, action: add_reaction, emoji: x}",
            "steps[0].action: add_reaction requires a message-based trigger",
        ),
    ],
)
def test_checklist_6_message_based_actions(step: str, reason: str) -> None:
    assert reason in refused(definition("{on: schedule, interval: 1h}", f"  - {step}\n")).reason
    assert parse_definition(definition("{on: message_posted}", f"  - {step}\n"), now=NOW)


@pytest.mark.parametrize(
    ("trigger", "reason"),
    [
        (
            "{on: schedule, cron: '0 9 * * *', interval: 1h}",
            "schedule needs exactly one of 'cron' and 'interval'",
        ),
        ("{on: schedule}", "schedule needs exactly one of 'cron' and 'interval'"),
        ("{on: schedule, interval: 59}", "trigger.interval: must be between 60 s and 31536000 s"),
        ("{on: schedule, cron: '*/10 * * * * *'}", "trigger.cron: cron fires more than once a minute"),
        ("{on: schedule, cron: '0 9 * * 0'}", "day of week value 0 is outside 1-7"),
        ("{on: schedule, cron: '0 0 0 30 2 *'}", "cron never fires"),
    ],
)
def test_checklist_7_schedules(trigger: str, reason: str) -> None:
    assert reason in refused(definition(trigger, DELAY)).reason


def test_checklist_7_interval_one_minute_and_cron_warnings() -> None:
    df = parse_definition(definition("{on: schedule, interval: 1m}", DELAY), now=NOW)
    assert isinstance(df.trigger, d.ScheduleTrigger) and df.trigger.schedule.seconds == 60  # type: ignore[union-attr]
    report = validate(definition("{on: schedule, cron: '*/5 * * * 2-6'}", DELAY), now=NOW)
    assert report.definition is not None
    assert [w.message.split(" ")[0] for w in report.warnings] == ["day", "this"]


@pytest.mark.parametrize(("value", "seconds"), [(90, 90), ("90", 90), ("90s", 90), ("2m", 120), ("1h", 3600)])
def test_checklist_11_durations(value: object, seconds: int) -> None:
    assert parse_duration(value) == seconds


@pytest.mark.parametrize("value", ["1d", "-5", "1.5h", True, 1.5, None, "12345678901234567890h"])
def test_checklist_11_bad_durations(value: object) -> None:
    with pytest.raises(ValueError):
        parse_duration(value)


@pytest.mark.parametrize(
    ("duration", "reason"), [("0", "must be between 1 s"), ("20" + "0" * 18, "duration overflows")]
)
def test_checklist_11_zero_and_huge_durations(duration: str, reason: str) -> None:
    step = f"  - {{id: a, action: delay, duration: '{duration}'}}\n"
    assert reason in refused(definition("{on: webhook}", step)).reason


def test_checklist_12_delay_bounds() -> None:
    assert (
        "duration: must be a duration"
        in refused(definition("{on: webhook}", "  - {id: a, action: delay, duration: 30d}\n")).reason
    )
    assert parse_definition(
        definition("{on: webhook}", "  - {id: a, action: delay, duration: 720h}\n"), now=NOW
    )
    assert (
        "must be between 1 s and 2592000 s"
        in refused(definition("{on: webhook}", "  - {id: a, action: delay, duration: 721h}\n")).reason
    )


@pytest.mark.parametrize(
    "condition",
    ["a = 1", "a; b", "nope(1)", "x" * 4097, "__import__('os')", "trigger_text.upper()"],
)
def test_checklist_14_bad_conditions_are_refused_at_save(condition: str) -> None:
    step = f"  - {{id: a, if: {json.dumps(condition)}, action: delay, duration: 5}}\n"
    assert "steps[0].if: condition:" in refused(definition("{on: webhook}", step)).reason
    assert (
        "trigger.filter: condition:"
        in refused(definition(f"{{on: message_posted, filter: {json.dumps(condition)}}}", DELAY)).reason
    )


@pytest.mark.parametrize(
    ("step", "reason"),
    [
        (
            "{id: a, action: send_message, text: '{{trigger.text | shout}}'}",
            "unknown template filter 'shout'",
        ),
        (
            "{id: a, action: send_message, text: '{{trigger.text | truncate(x)}}'}",
            "malformed truncate filter",
        ),
        ("{id: a, action: send_message, text: '   '}", "send_message text is empty"),
        (
            "{id: a, action: send_message, text: hi, channel: other}",
            "may only post to the workflow's channel",
        ),
        ("{id: a, action: send_dm, to: bob, text: hi}", "steps[0].to: must be a 64-hex pubkey or npub"),
        ("{id: a, action: ask_agent, agent: helper, prompt: hi}", "must be a 64-hex pubkey or npub or @Name"),
        (
            "{id: a, action: request_approval, from: '@release-manager'}",
            "approver spec '@release-manager' is not supported",
        ),
        ("{id: a, action: call_webhook, url: 'ftp://x/'}", "URL must be https"),
        (
            "{id: a, action: set_channel_topic, topic: " + "t" * 251 + "}",
            "channel topic too long (251 characters, max 250)",
        ),
        ("{id: a, action: call_webhook, url: 'https://u:p@x/'}", "must not carry user info"),
        ("{id: a, action: call_webhook, url: 'https://x/', method: TRACE}", "must be one of GET, POST"),
        (
            "{id: a, action: call_webhook, url: 'https://x/', headers: {Host: x}}",
            "header Host is set by the engine",
        ),
        ("{id: a, action: call_webhook, url: 'https://x/', headers: {'a b': x}}", "is not a valid token"),
        (
            "{id: a, action: call_webhook, url: 'https://x/', retry: {max: 6}}",
            "retry.max: must be between 0 and 5",
        ),
        (
            "{id: a, action: call_webhook, url: 'https://x/', retry: {backoff: 301}}",
            "retry.backoff: must be between 1 s",
        ),
    ],
)
def test_literal_fields_are_checked_as_at_run_time(step: str, reason: str) -> None:
    assert reason in refused(definition("{on: webhook}", f"  - {step}\n"), channel_id=CHANNEL).reason


def test_templated_fields_are_left_to_run_time() -> None:
    steps = (
        "  - {id: a, action: send_dm, to: '{{trigger.author}}', text: hi}\n"
        "  - {id: b, action: request_approval, from: '{{trigger.approver}}'}\n"
        "  - {id: c, action: call_webhook, url: '{{trigger.url}}'}\n"
    )
    assert parse_definition(definition("{on: webhook}", steps), now=NOW)


def test_all_errors_are_reported_with_positions_and_unknown_keys_warn() -> None:
    text = definition(
        "{on: webhook, filter: x}", "  - {id: a-b, action: delay, duration: 0, colour: red}\n", "extra: 1\n"
    )
    report = validate(text, now=NOW)
    assert report.definition is None
    assert [(e.path, e.line) for e in report.errors] == [("steps[0].id", 5), ("steps[0].duration", 5)]
    assert sorted(w.path for w in report.warnings) == ["extra", "steps[0].colour", "trigger.filter"]
    assert report.reason == f"invalid: workflow YAML parse error: {report.errors[0]}"


def test_credential_like_headers_warn() -> None:
    step = "  - {id: a, action: call_webhook, url: 'https://x/', headers: {Authorization: x, X-Api-Key: y, Accept: z}}\n"
    report = validate(definition("{on: webhook}", step), now=NOW)
    assert sorted(w.path for w in report.warnings) == [
        "steps[0].headers.Authorization",
        "steps[0].headers.X-Api-Key",
    ]
