"""Event templates of the six job kinds (jobs spec §3): kind, tags and content that a producer
signs. Each runs the validator the relay runs, so nothing invalid is ever signed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from buzz.core.errors import Invalid
from buzz.jobs import limits as L
from buzz.jobs.result import check_result
from buzz.jobs.wire import JobTags, check_accept, check_cancel, check_failure, check_progress, check_request

Tags = tuple[tuple[str, ...], ...]


@dataclass(frozen=True, slots=True)
class Template:
    kind: int
    tags: Tags
    content: str


def _json(body: dict[str, Any]) -> str:
    return orjson.dumps(body).decode()


def cut_utf8(text: str, max_bytes: int) -> str:
    """`text` cut to at most `max_bytes` UTF-8 bytes at a code point boundary."""
    raw = text.encode("utf-8")
    if len(raw) <= max_bytes:
        return text
    return raw[:max_bytes].decode("utf-8", errors="ignore")


def request(
    channel_id: str,
    assignee: str,
    *,
    prompt: str,
    requested_outcome: str | None = None,
    created_at: int,
    deadline: int | None = None,
    parent: str | None = None,
    source: dict[str, Any] | None = None,
) -> Template:
    """A 43001. `requested_outcome` defaults to the prompt cut to 8192 bytes (§7 item 1)."""
    outcome = requested_outcome if requested_outcome and requested_outcome.strip() else prompt
    body: dict[str, Any] = {
        "schemaVersion": L.JOB_SCHEMA_VERSION,
        "requestedOutcome": cut_utf8(outcome.strip(), L.REQUESTED_OUTCOME_MAX_BYTES),
        "prompt": prompt,
    }
    if deadline is not None:
        body["deadline"] = deadline
    tags: list[tuple[str, ...]] = [("h", channel_id), ("p", assignee)]
    if parent is not None:
        body["parentJob"] = parent
        tags.append(("parent-job", parent))
    if source is not None:
        body["source"] = source
    content = _json(body)
    check_request(content, created_at, JobTags(L.KIND_JOB_REQUEST, None, assignee, parent=parent))
    return Template(L.KIND_JOB_REQUEST, tuple(tags), content)


def _reply(channel_id: str, job_id: str) -> list[tuple[str, ...]]:
    return [("h", channel_id), ("e", job_id, "", "reply")]


def accepted(channel_id: str, job_id: str, *, message: str | None = None) -> Template:
    body: dict[str, Any] = {"schemaVersion": L.JOB_SCHEMA_VERSION}
    if message:
        body["message"] = message
    content = _json(body)
    check_accept(content)
    return Template(L.KIND_JOB_ACCEPTED, tuple(_reply(channel_id, job_id)), content)


def progress(
    channel_id: str,
    job_id: str,
    *,
    seq: int,
    message: str,
    plan: list[dict[str, str]] | None = None,
    percent: int | None = None,
) -> Template:
    body: dict[str, Any] = {
        "schemaVersion": L.JOB_SCHEMA_VERSION,
        "seq": seq,
        "message": cut_utf8(message, L.PROGRESS_TEXT_MAX_BYTES),
    }
    if plan:
        body["plan"] = plan[: L.PLAN_MAX_ITEMS]
    if percent is not None:
        body["percent"] = percent
    content = _json(body)
    check_progress(content)
    return Template(L.KIND_JOB_PROGRESS, tuple(_reply(channel_id, job_id)), content)


def result(channel_id: str, job_id: str, requester: str, manifest: dict[str, Any]) -> Template:
    """A 43004 carrying `manifest` (a NIP-AJ document for `job_id`). Raises Invalid."""
    check_result(manifest, job_id)
    tags = [
        *_reply(channel_id, job_id),
        ("p", requester),
        L.JOB_RESULT_SCHEMA_TAG,
        ("disposition", str(manifest["disposition"])),
    ]
    return Template(L.KIND_JOB_RESULT, tuple(tags), _json(manifest))


def text_result(
    job_id: str, requested_outcome: str, outcome: str, last_progress: str | None
) -> dict[str, Any]:
    """The manifest of a turn that ended with plain text (§6.6 item 2.2): `no_artifact`."""
    manifest: dict[str, Any] = {
        "schemaVersion": L.JOB_SCHEMA_VERSION,
        "jobRequest": job_id,
        "requestedOutcome": cut_utf8(requested_outcome or outcome, L.REQUESTED_OUTCOME_MAX_BYTES),
        "outcome": cut_utf8(outcome, L.OUTCOME_MAX_BYTES),
        "disposition": "no_artifact",
        "artifacts": [],
    }
    if last_progress and last_progress.strip():
        manifest["lastProgress"] = cut_utf8(last_progress, L.PROGRESS_TEXT_MAX_BYTES)
    return manifest


def cancel(channel_id: str, job_id: str, assignee: str, *, reason: str | None = None) -> Template:
    body: dict[str, Any] = {"schemaVersion": L.JOB_SCHEMA_VERSION}
    if reason:
        body["reason"] = cut_utf8(reason, L.CANCEL_REASON_MAX_BYTES)
    content = _json(body)
    check_cancel(content)
    return Template(L.KIND_JOB_CANCEL, tuple([*_reply(channel_id, job_id), ("p", assignee)]), content)


def failed(
    channel_id: str, job_id: str, requester: str, *, code: str, message: str, retryable: bool = False
) -> Template:
    if code not in L.FAILURE_CODES:
        raise Invalid(f"job failure: code must be one of {', '.join(L.FAILURE_CODES)}")
    body = {
        "schemaVersion": L.JOB_SCHEMA_VERSION,
        "code": code,
        "message": cut_utf8(message, L.PROGRESS_TEXT_MAX_BYTES),
        "retryable": retryable,
    }
    content = _json(body)
    check_failure(content)
    return Template(L.KIND_JOB_FAILED, tuple([*_reply(channel_id, job_id), ("p", requester)]), content)
