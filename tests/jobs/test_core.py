"""The jobs core without I/O: tag shapes, contents, the NIP-AJ result document, the state
machine and its fold, the directory records and title redaction (jobs spec §3–§5, §11)."""

from __future__ import annotations

import json

import pytest

from buzz.core.errors import Invalid, Restricted
from buzz.core.event import Event
from buzz.core.keys import generate_secret_key, public_key
from buzz.core.nip19 import nsec
from buzz.jobs import build, machine, records
from buzz.jobs import limits as L
from buzz.jobs.redact import redact_title
from buzz.jobs.result import check_result
from buzz.jobs.wire import check_content, parse_tags

C = "0b5c6a3e-8f1d-4c4a-9b35-1f0c2d3e4f50"
ASKER, AGENT, OTHER = (generate_secret_key() for _ in range(3))
J = "ab" * 32


def sign(secret: str, template: build.Template, at: int = 1_700_000_000) -> Event:
    return Event.create(secret, template.kind, template.content, template.tags, created_at=at)


def manifest(**over: object) -> dict:
    body = {
        "schemaVersion": 1,
        "jobRequest": J,
        "requestedOutcome": "a fix",
        "outcome": "fixed it",
        "disposition": "completed",
        "artifacts": [{"kind": "file", "label": "the fix", "reference": "src/x.py"}],
        "verification": [{"label": "tests", "status": "passed"}],
    }
    body.update(over)
    return body


def reason(exc: pytest.ExceptionInfo) -> str:
    return str(exc.value)


# -- tags and contents ----------------------------------------------------------------------------
def test_request_template_validates_and_parses() -> None:
    t = build.request(C, public_key(AGENT), prompt="fix the bug", created_at=100, deadline=200)
    event = sign(ASKER, t, at=100)
    tags = parse_tags(event)
    assert tags.p == public_key(AGENT)
    body = check_content(event, tags)
    assert body["requestedOutcome"] == "fix the bug"


def test_request_needs_exactly_one_p() -> None:
    event = Event.create(ASKER, 43001, '{"schemaVersion":1,"requestedOutcome":"x"}', [("h", C)])
    with pytest.raises(Invalid, match=r"^invalid: job request: exactly one p tag"):
        parse_tags(event)
    two = Event.create(ASKER, 43001, "{}", [("h", C), ("p", public_key(AGENT)), ("p", public_key(OTHER))])
    with pytest.raises(Invalid, match=r"^invalid: job request:"):
        parse_tags(two)


@pytest.mark.parametrize(
    "body, created",
    [
        ({"schemaVersion": 1, "prompt": "x"}, 100),
        ({"schemaVersion": 1, "requestedOutcome": "x", "prompt": "p" * 65_537}, 100),
        ({"schemaVersion": 1, "requestedOutcome": "x", "deadline": 99}, 100),
        ({"schemaVersion": 1, "requestedOutcome": "x", "deadline": 100 + L.DEADLINE_MAX_S + 1}, 100),
        ({"schemaVersion": 1, "requestedOutcome": "   "}, 100),
    ],
)
def test_request_content_refusals(body: dict, created: int) -> None:
    event = Event.create(
        ASKER, 43001, json.dumps(body), [("h", C), ("p", public_key(AGENT))], created_at=created
    )
    with pytest.raises(Invalid, match=r"^invalid: job request:"):
        check_content(event, parse_tags(event))


def test_lifecycle_needs_one_reply_e_tag() -> None:
    none = Event.create(AGENT, 43002, "{}", [("h", C)])
    two = Event.create(AGENT, 43002, "{}", [("h", C), ("e", J, "", "reply"), ("e", J, "", "reply")])
    unmarked = Event.create(AGENT, 43002, "{}", [("h", C), ("e", J)])
    for event in (none, two, unmarked):
        with pytest.raises(Invalid, match=r"^invalid: job accept:"):
            parse_tags(event)
    assert parse_tags(Event.create(AGENT, 43002, "{}", [("h", C), ("e", J, "", "reply")])).job_id == J


def test_progress_failure_and_cancel_contents() -> None:
    plan = [{"title": "read", "status": "completed"}, {"title": "write", "status": "in_progress"}]
    ok = sign(AGENT, build.progress(C, J, seq=1, message="Working: read", plan=plan))
    check_content(ok, parse_tags(ok))
    bad_seq = Event.create(AGENT, 43003, '{"seq":0,"message":"x"}', [("h", C), ("e", J, "", "reply")])
    with pytest.raises(Invalid, match="seq must be"):
        check_content(bad_seq, parse_tags(bad_seq))
    unknown = Event.create(
        AGENT,
        43006,
        '{"code":"oops","message":"x"}',
        [("h", C), ("e", J, "", "reply"), ("p", public_key(ASKER))],
    )
    with pytest.raises(Invalid, match=r"^invalid: job failure: code"):
        check_content(unknown, parse_tags(unknown))
    declined = sign(AGENT, build.failed(C, J, public_key(ASKER), code="declined", message="not for you"))
    assert check_content(declined, parse_tags(declined))["code"] == "declined"
    cancel = sign(ASKER, build.cancel(C, J, public_key(AGENT), reason="changed my mind"))
    assert parse_tags(cancel).p == public_key(AGENT)


# -- the result document --------------------------------------------------------------------------
def test_valid_result_and_its_tags() -> None:
    t = build.result(C, J, public_key(ASKER), manifest())
    event = sign(AGENT, t)
    tags = parse_tags(event)
    assert tags.disposition == "completed" and tags.p == public_key(ASKER)
    check_content(event, tags)


@pytest.mark.parametrize(
    "over, text",
    [
        ({"artifacts": []}, "disposition completed requires at least one artifact"),
        ({"disposition": "no_artifact"}, "disposition no_artifact requires an empty artifact list"),
        ({"disposition": "blocked"}, "disposition blocked requires a blocker"),
        ({"jobRequest": "cd" * 32}, "jobRequest does not match the e tag"),
        ({"schemaVersion": 2}, "unsupported schemaVersion"),
        ({"outcome": "o" * 8193}, "outcome too long"),
        (
            {"artifacts": [{"kind": "file", "label": "x" * 513, "reference": "a"}]},
            "artifact 1 label too long",
        ),
        ({"artifacts": [{"kind": "file", "label": "x", "reference": "a"}] * 51}, "too many artifacts"),
        ({"verification": [{"label": "t", "status": "ok"}]}, "verification 1 status"),
    ],
)
def test_result_invariants(over: dict, text: str) -> None:
    with pytest.raises(Invalid) as exc:
        check_result(json.dumps(manifest(**over)), J)
    assert reason(exc).startswith("invalid: job result: ") and text in reason(exc)


def test_result_blocked_with_blocker_and_partial_pass() -> None:
    check_result(json.dumps(manifest(disposition="blocked", blocker="need access", artifacts=[])), J)
    check_result(json.dumps(manifest(disposition="partial", artifacts=[])), J)
    check_result(json.dumps(manifest(disposition="no_artifact", artifacts=[])), J)


def test_result_size_cap() -> None:
    big = manifest(verification=[{"label": "t", "status": "passed", "evidence": "e" * 2000}] * 40)
    with pytest.raises(Invalid, match="content too large"):
        check_result(json.dumps(big), J)


@pytest.mark.parametrize(
    "ref",
    ["/home/u/x", "C:\\x", "../x", "~/x", "file:///x", "https://u:p@host/x", "src/../../etc", "ftp://h/x"],
)
def test_refused_references(ref: str) -> None:
    body = manifest(artifacts=[{"kind": "link", "label": "x", "reference": ref}])
    with pytest.raises(Invalid, match="artifact 1 reference"):
        check_result(json.dumps(body), J)


@pytest.mark.parametrize(
    "kind, ref", [("file", "src/x.py"), ("link", "https://host/x"), ("link", "nostr:note1abc")]
)
def test_accepted_references(kind: str, ref: str) -> None:
    check_result(json.dumps(manifest(artifacts=[{"kind": kind, "label": "x", "reference": ref}])), J)


def test_commit_references() -> None:
    short = manifest(artifacts=[{"kind": "commit", "label": "c", "reference": "a" * 39}])
    with pytest.raises(Invalid, match="hex object id"):
        check_result(json.dumps(short), J)
    check_result(json.dumps(manifest(artifacts=[{"kind": "commit", "label": "c", "reference": "a" * 40}])), J)


def test_disposition_tag_must_match() -> None:
    with pytest.raises(Invalid, match="disposition does not match"):
        check_result(json.dumps(manifest()), J, "partial")


# -- the state machine ----------------------------------------------------------------------------
def _job() -> machine.Job:
    request = sign(ASKER, build.request(C, public_key(AGENT), prompt="do it", created_at=100), at=100)
    return machine.opened(request, C)


def test_transitions_table() -> None:
    S = machine.State
    assert machine.advance(S.REQUESTED, 43002) is S.ACCEPTED
    assert machine.advance(S.ACCEPTED, 43003) is S.RUNNING
    assert machine.advance(S.REQUESTED, 43004) is S.COMPLETED  # a result implies acceptance
    assert machine.advance(S.REQUESTED, 43006) is S.FAILED  # how an assignee declines
    with pytest.raises(Invalid, match=r"^invalid: job already accepted$"):
        machine.advance(S.RUNNING, 43002)
    with pytest.raises(Invalid, match=r"^invalid: job not accepted$"):
        machine.advance(S.REQUESTED, 43003)
    for terminal in machine.TERMINAL_STATES:
        for kind in L.LIFECYCLE_KINDS:
            with pytest.raises(Invalid, match=f"^invalid: job is {terminal.value}$"):
                machine.advance(terminal, kind)
    assert dict(machine.refusals(43002)) == {
        "accepted": "job already accepted",
        "running": "job already accepted",
        "completed": "job is completed",
        "failed": "job is failed",
        "cancelled": "job is cancelled",
    }


def test_signers() -> None:
    job = _job()
    machine.check_signer(job, 43002, public_key(AGENT))
    with pytest.raises(Restricted, match="only the assigned agent may update this job"):
        machine.check_signer(job, 43002, public_key(OTHER))
    machine.check_signer(job, 43005, public_key(ASKER))
    machine.check_signer(job, 43005, public_key(OTHER), assignee_owner=public_key(OTHER))
    machine.check_signer(job, 43005, public_key(OTHER), channel_elevated=True)
    with pytest.raises(Restricted, match="not allowed to cancel this job"):
        machine.check_signer(job, 43005, public_key(OTHER))


def test_fold_follows_the_relay_rules() -> None:
    request = sign(ASKER, build.request(C, public_key(AGENT), prompt="do it", created_at=100), at=100)
    events = [
        sign(AGENT, build.accepted(C, request.id), at=101),
        sign(OTHER, build.accepted(C, request.id), at=101),  # not the assignee: skipped
        sign(AGENT, build.progress(C, request.id, seq=1, message="one"), at=102),
        sign(AGENT, build.progress(C, request.id, seq=1, message="again"), at=103),  # seq must increase
        sign(ASKER, build.cancel(C, request.id, public_key(AGENT)), at=104),
        sign(AGENT, build.failed(C, request.id, public_key(ASKER), code="agent_error", message="x"), at=105),
    ]
    job = machine.fold(request, C, reversed(events))
    assert job.state is machine.State.CANCELLED
    assert job.last_progress == "one" and job.last_seq == 1 and job.updated_at == 104
    assert job.summary()["state"] == "cancelled"


def test_relay_signed_request_names_its_actor() -> None:
    relay = generate_secret_key()
    t = build.request(C, public_key(AGENT), prompt="p", created_at=100)
    event = Event.create(relay, 43001, t.content, (*t.tags, ("actor", public_key(ASKER))), created_at=100)
    with pytest.raises(Invalid, match="actor"):
        parse_tags(event)
    parse_tags(event, relay_signed=True)
    job = machine.opened(event, C, public_key(relay))
    assert job.requester == public_key(ASKER) and job.relay_signed


# -- records and redaction --------------------------------------------------------------------------
@pytest.mark.parametrize(
    "body, found",
    [
        ({"display_name": "R", "apiKey": "x"}, "apiKey"),
        ({"display_name": "R", "ENV_VARS": {}}, "ENV_VARS"),
        ({"display_name": "R", "nested": {"private_key": "x"}}, "private_key"),
        ({"display_name": "R", "system_prompt": None, "x": [nsec("11" * 32)]}, "nsec1 key"),
    ],
)
def test_records_refuse_secrets(body: dict, found: str) -> None:
    for kind in (30175, 30176, 30177, 30178):
        name = records.RECORD_NAMES[kind]
        with pytest.raises(Invalid, match=rf"^invalid: {name} content must not carry secrets \({found}\)$"):
            records.check_record(kind, json.dumps(body))


def test_record_contents() -> None:
    records.check_record(30175, json.dumps({"display_name": "Reviewer", "system_prompt": "Be kind."}))
    with pytest.raises(Invalid, match="display_name"):
        records.check_record(30175, "{}")
    with pytest.raises(Invalid, match="persona content too large"):
        records.check_record(30175, json.dumps({"display_name": "R", "system_prompt": "x" * 65_535}))
    for p in (0, 33):
        with pytest.raises(Invalid, match="parallelism"):
            records.check_record(30177, json.dumps({"parallelism": p}))
    records.check_record(30177, json.dumps({"respond_to": "anyone", "parallelism": 3}))
    records.check_record(
        30176, json.dumps({"name": "Core", "instructions": None, "persona_ids": ["reviewer"]})
    )
    assert records.record_id_problem("builtin-team:welcome") is None
    assert records.record_id_problem("has space") is not None


def test_redact_title() -> None:
    assert redact_title("Read /home/user/secret.txt now") == "Read … now"
    assert redact_title("Open ~/notes and C:\\x\\y") == "Open … and …"
    assert redact_title("Fetch https://bob:pw@host/x") == "Fetch https://host/x"
    assert len(redact_title("x" * 400)) == L.TITLE_MAX_CHARS
