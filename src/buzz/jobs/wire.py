"""Tags (jobs spec §3.2) and contents (§3.3) of the six job kinds, checked without I/O.

Every refusal is `Invalid("job <what>: <reason>")` with `<what>` the kind's word below; the
relay sends it as is, producers show it before signing. The result document (43004 content)
is `buzz.jobs.result`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from buzz.core.errors import Invalid
from buzz.core.event import Event
from buzz.jobs import limits as L
from buzz.jobs.result import check_result
from buzz.jobs.text import is_hex64, is_int, json_object, schema_version, string, text

WHAT: dict[int, str] = {
    L.KIND_JOB_REQUEST: "request",
    L.KIND_JOB_ACCEPTED: "accept",
    L.KIND_JOB_PROGRESS: "progress",
    L.KIND_JOB_RESULT: "result",
    L.KIND_JOB_CANCEL: "cancel",
    L.KIND_JOB_FAILED: "failure",
}
# Lifecycle kinds whose `p` names a party, and which party (§3.2).
P_NAMES: dict[int, str] = {
    L.KIND_JOB_RESULT: "requester",
    L.KIND_JOB_FAILED: "requester",
    L.KIND_JOB_CANCEL: "assignee",
}
# Tags the spec lists per kind: each is an exact two-element array (the `e` and `schema` tags
# have their own shapes).
_PAIR_TAGS: dict[int, frozenset[str]] = {
    L.KIND_JOB_REQUEST: frozenset({"p", "parent-job", "actor"}),
    L.KIND_JOB_ACCEPTED: frozenset(),
    L.KIND_JOB_PROGRESS: frozenset(),
    L.KIND_JOB_RESULT: frozenset({"p", "disposition"}),
    L.KIND_JOB_CANCEL: frozenset({"p"}),
    L.KIND_JOB_FAILED: frozenset({"p"}),
}


@dataclass(frozen=True, slots=True)
class JobTags:
    """What the tags of one job event say. `job_id` is the 43001 a lifecycle event names (the
    request's own id is its event id); `p` the assignee (43001), requester (43004, 43006) or
    assignee (43005)."""

    kind: int
    job_id: str | None
    p: str | None
    parent: str | None = None
    actor: str | None = None
    disposition: str | None = None


def prefix(kind: int) -> str:
    return f"job {WHAT[kind]}"


def parse_tags(event: Event, *, relay_signed: bool = False) -> JobTags:
    """The tag shape of §3.2 for `event` (a job kind). Raises Invalid."""
    kind, pre = event.kind, prefix(event.kind)
    if sum(1 for t in event.tags if t[0] == "auth") > 1:
        raise Invalid(f"{pre}: more than one auth tag")
    for t in event.tags:
        if t[0] in _PAIR_TAGS[kind] and len(t) != 2:
            raise Invalid(f"{pre}: {t[0]} tag must have exactly two elements")
    values = {
        name: [t[1] for t in event.tags if t[0] == name]
        for name in ("p", "parent-job", "actor", "disposition")
    }
    if kind == L.KIND_JOB_REQUEST:
        if len(values["p"]) != 1:
            raise Invalid(
                f"{pre}: exactly one p tag naming the assignee is required (got {len(values['p'])})"
            )
        if not is_hex64(values["p"][0]):
            raise Invalid(f"{pre}: p tag must be 64 lowercase hex characters")
        parent = _at_most_one(values["parent-job"], "parent-job", pre)
        if parent is not None and not is_hex64(parent):
            raise Invalid(f"{pre}: parent-job tag must be an event id")
        actor = _at_most_one(values["actor"], "actor", pre)
        if actor is not None and (not relay_signed or not is_hex64(actor)):
            raise Invalid(f"{pre}: only a relay-signed request carries an actor tag")
        return JobTags(kind, None, values["p"][0], parent=parent, actor=actor)
    e_tags = [t for t in event.tags if t[0] == "e"]
    if len(e_tags) != 1:
        raise Invalid(f"{pre}: exactly one e tag naming the job is required (got {len(e_tags)})")
    e = e_tags[0]
    if len(e) != 4 or e[3] != "reply" or not is_hex64(e[1]):
        raise Invalid(f'{pre}: the e tag must be ["e", <job id>, <relay hint or "">, "reply"]')
    p = None
    if kind in P_NAMES:
        if len(values["p"]) != 1 or not is_hex64(values["p"][0]):
            raise Invalid(f"{pre}: exactly one p tag naming the {P_NAMES[kind]} is required")
        p = values["p"][0]
    disposition = None
    if kind == L.KIND_JOB_RESULT:
        schema = [t for t in event.tags if t[0] == "schema"]
        if len(schema) != 1 or tuple(schema[0]) != L.JOB_RESULT_SCHEMA_TAG:
            raise Invalid(f'{pre}: one ["schema","buzz.job-result","1"] tag is required')
        disposition = _at_most_one(values["disposition"], "disposition", pre)
        if disposition not in L.DISPOSITIONS:
            raise Invalid(f"{pre}: a disposition tag of {', '.join(L.DISPOSITIONS)} is required")
    return JobTags(kind, e[1], p, disposition=disposition)


def _at_most_one(values: list[str], name: str, pre: str) -> str | None:
    if len(values) > 1:
        raise Invalid(f"{pre}: at most one {name} tag")
    return values[0] if values else None


# -- contents (§3.3) ------------------------------------------------------------------------------
def check_request(content: str, created_at: int, tags: JobTags) -> dict[str, Any]:
    """43001 content; returns the parsed object."""
    pre = "job request"
    body = json_object(content, pre, L.JOB_REQUEST_MAX_BYTES)
    schema_version(body, pre)
    text(body, "requestedOutcome", pre, L.REQUESTED_OUTCOME_MAX_BYTES, required=True)
    string(body, "prompt", pre, L.PROMPT_MAX_BYTES)
    if "deadline" in body and body["deadline"] is not None:
        deadline = body["deadline"]
        if not is_int(deadline) or deadline <= created_at:
            raise Invalid(f"{pre}: deadline must be an integer after created_at")
        if deadline > created_at + L.DEADLINE_MAX_S:
            raise Invalid(f"{pre}: deadline more than {L.DEADLINE_MAX_S} s after created_at")
    if "parentJob" in body and body["parentJob"] is not None:
        if not is_hex64(body["parentJob"]) or body["parentJob"] != tags.parent:
            raise Invalid(f"{pre}: parentJob must equal the parent-job tag")
    if "source" in body and body["source"] is not None:
        source = body["source"]
        if not isinstance(source, dict):
            raise Invalid(f"{pre}: source must be an object")
        if len(orjson.dumps(source)) > L.SOURCE_MAX_BYTES:
            raise Invalid(f"{pre}: source too large (max {L.SOURCE_MAX_BYTES} bytes)")
    return body


def check_accept(content: str) -> dict[str, Any]:
    pre = "job accept"
    body = json_object(content, pre, L.ACCEPT_MAX_BYTES)
    schema_version(body, pre, required=False)
    if "etaSecs" in body and body["etaSecs"] is not None:
        if not is_int(body["etaSecs"]) or body["etaSecs"] < 0:
            raise Invalid(f"{pre}: etaSecs must be an integer >= 0")
    string(body, "message", pre, L.PROGRESS_TEXT_MAX_BYTES)
    return body


def check_progress(content: str) -> dict[str, Any]:
    pre = "job progress"
    body = json_object(content, pre, L.PROGRESS_MAX_BYTES)
    schema_version(body, pre, required=False)
    seq = body.get("seq")
    if not is_int(seq) or seq < 1:
        raise Invalid(f"{pre}: seq must be an integer >= 1")
    text(body, "message", pre, L.PROGRESS_TEXT_MAX_BYTES, required=True)
    plan = body.get("plan")
    if plan is not None:
        if not isinstance(plan, list) or len(plan) > L.PLAN_MAX_ITEMS:
            raise Invalid(f"{pre}: plan must be an array of at most {L.PLAN_MAX_ITEMS} entries")
        for i, entry in enumerate(plan, 1):
            if not isinstance(entry, dict):
                raise Invalid(f"{pre}: plan entry {i} must be an object")
            text(entry, "title", f"{pre}: plan entry {i}", L.PLAN_TITLE_MAX_BYTES, required=True, line=True)
            if entry.get("status") not in L.PLAN_STATUSES:
                raise Invalid(f"{pre}: plan entry {i} status must be one of {', '.join(L.PLAN_STATUSES)}")
    if "percent" in body and body["percent"] is not None:
        if not is_int(body["percent"]) or not 0 <= body["percent"] <= 100:
            raise Invalid(f"{pre}: percent must be an integer 0-100")
    return body


def check_cancel(content: str) -> dict[str, Any]:
    pre = "job cancel"
    body = json_object(content, pre, L.CANCEL_MAX_BYTES)
    schema_version(body, pre, required=False)
    string(body, "reason", pre, L.CANCEL_REASON_MAX_BYTES)
    return body


def check_failure(content: str) -> dict[str, Any]:
    pre = "job failure"
    body = json_object(content, pre, L.FAILURE_MAX_BYTES)
    schema_version(body, pre, required=False)
    if body.get("code") not in L.FAILURE_CODES:
        raise Invalid(f"{pre}: code must be one of {', '.join(L.FAILURE_CODES)}")
    text(body, "message", pre, L.PROGRESS_TEXT_MAX_BYTES, required=True)
    if "retryable" in body and not isinstance(body["retryable"], bool):
        raise Invalid(f"{pre}: retryable must be a boolean")
    return body


def check_content(event: Event, tags: JobTags) -> dict[str, Any]:
    """The content of `event` per §3.3 / §4 (43004: `result.check_result`). Raises Invalid."""
    kind = event.kind
    if kind == L.KIND_JOB_REQUEST:
        return check_request(event.content, event.created_at, tags)
    if kind == L.KIND_JOB_ACCEPTED:
        return check_accept(event.content)
    if kind == L.KIND_JOB_PROGRESS:
        return check_progress(event.content)
    if kind == L.KIND_JOB_RESULT:
        assert tags.job_id is not None
        return check_result(event.content, tags.job_id, tags.disposition)
    if kind == L.KIND_JOB_CANCEL:
        return check_cancel(event.content)
    return check_failure(event.content)
