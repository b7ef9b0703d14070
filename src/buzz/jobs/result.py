"""The NIP-AJ result document, version 1 (jobs spec §4): the content of a 43004.

`check_result` is the one validator: the relay refuses what it refuses (`invalid: job result:
<reason>`), and the CLI, the MCP tool and the harness run it before signing. Artifacts are
references, never uploads; a reference must not point into the producer's machine.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

import orjson

from buzz.core.errors import Invalid
from buzz.jobs import limits as L
from buzz.jobs.text import is_hex64, is_int, is_line, json_object, nbytes, string, text

PREFIX = "job result"
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_DRIVE = re.compile(r"^[A-Za-z]:")
ALLOWED_SCHEMES = frozenset({"http", "https", "buzz", "nostr"})
_COMMIT = re.compile(r"[0-9a-fA-F]{40}|[0-9a-fA-F]{64}")


def _bad(reason: str) -> Invalid:
    return Invalid(f"{PREFIX}: {reason}")


def local_path_problem(reference: str) -> str | None:
    """Why `reference` names a place on the producer's machine (§4.3 items 1–2), or None."""
    if reference.startswith(("/", "\\")) or _DRIVE.match(reference):
        return "is a local path"
    if reference.startswith("~"):
        return "is a local path"
    if ".." in re.split(r"[\\/]", reference):
        return "has a .. segment"
    if reference.lower().startswith("file:"):
        return "is a file: URL"
    return None


def reference_problem(kind: str, reference: str) -> str | None:
    """Why an artifact's `reference` is not allowed (§4.3), or None."""
    problem = local_path_problem(reference)
    if problem is not None:
        return problem
    scheme = _SCHEME.match(reference)
    if scheme is not None:
        name = scheme.group(0)[:-1].lower()
        if name not in ALLOWED_SCHEMES:
            return f"uses the {name}: scheme (allowed: http, https, buzz, nostr)"
        if name in ("http", "https"):
            try:
                parts = urlsplit(reference)
            except ValueError:
                return "is not a valid URL"
            if not parts.hostname:
                return "has no host"
            if "@" in parts.netloc:
                return "embeds credentials"
        if kind in ("file", "media") and name not in ("http", "https"):
            return "must be an uploaded URL or a repository-relative path"
        return None
    if kind == "commit" and not _COMMIT.fullmatch(reference):
        return "must be a 40- or 64-character hex object id or a URL"
    return None


def check_result(
    content: str | dict[str, Any], job_id: str, disposition_tag: str | None = None
) -> dict[str, Any]:
    """Validate a result document (a JSON text, or an object a producer is about to send)
    against §4.1–§4.3 for the job `job_id`; `disposition_tag` is the event's `disposition` tag
    (None: not yet tagged, a producer's manifest). Returns the object. Raises Invalid."""
    if isinstance(content, dict):
        body = content
        size = len(orjson.dumps(body))
        if size > L.RESULT_MAX_BYTES:
            raise _bad(f"content too large ({size} bytes, max {L.RESULT_MAX_BYTES})")
    else:
        body = json_object(content, PREFIX, L.RESULT_MAX_BYTES)
    version = body.get("schemaVersion")
    if not is_int(version):
        raise _bad("schemaVersion is required")
    if version != L.JOB_SCHEMA_VERSION:
        raise _bad("unsupported schemaVersion")
    if not is_hex64(body.get("jobRequest")):
        raise _bad("jobRequest must be the job's event id")
    if body["jobRequest"] != job_id:
        raise _bad("jobRequest does not match the e tag")
    text(body, "requestedOutcome", PREFIX, L.REQUESTED_OUTCOME_MAX_BYTES, required=True)
    text(body, "outcome", PREFIX, L.OUTCOME_MAX_BYTES, required=True)
    disposition = body.get("disposition")
    if disposition not in L.DISPOSITIONS:
        raise _bad(f"disposition must be one of {', '.join(L.DISPOSITIONS)}")
    if disposition_tag is not None and disposition != disposition_tag:
        raise _bad("disposition does not match the disposition tag")
    text(body, "lastProgress", PREFIX, L.PROGRESS_TEXT_MAX_BYTES, required=False)
    blocker = text(body, "blocker", PREFIX, L.BLOCKER_MAX_BYTES, required=False)
    artifacts = _array(body, "artifacts", L.MAX_ARTIFACTS)
    for i, artifact in enumerate(artifacts, 1):
        _check_artifact(i, artifact)
    verification = _array(body, "verification", L.MAX_VERIFICATIONS)
    for i, item in enumerate(verification, 1):
        _check_verification(i, item)
    if disposition == "completed" and not artifacts:
        raise _bad("disposition completed requires at least one artifact")
    if disposition == "no_artifact" and artifacts:
        raise _bad("disposition no_artifact requires an empty artifact list")
    if disposition == "blocked" and blocker is None:
        raise _bad("disposition blocked requires a blocker")
    return body


def _array(body: dict[str, Any], name: str, most: int) -> list[Any]:
    value = body.get(name)
    if value is None:
        return []
    if not isinstance(value, list):
        raise _bad(f"{name} must be an array")
    if len(value) > most:
        raise _bad(f"too many {name} ({len(value)}, max {most})")
    return value


def _line(obj: dict[str, Any], name: str, where: str, most: int, *, required: bool) -> str | None:
    value = obj.get(name)
    if value is None:
        if required:
            raise _bad(f"{where} {name} is required")
        return None
    if not is_line(value):
        raise _bad(f"{where} {name} must be a line of text")
    if nbytes(value) > most:
        raise _bad(f"{where} {name} too long ({nbytes(value)} bytes, max {most})")
    return value


def _check_artifact(i: int, artifact: Any) -> None:
    where = f"artifact {i}"
    if not isinstance(artifact, dict):
        raise _bad(f"{where} must be an object")
    kind = artifact.get("kind")
    if kind not in L.ARTIFACT_KINDS:
        raise _bad(f"{where} kind must be one of {', '.join(L.ARTIFACT_KINDS)}")
    _line(artifact, "label", where, L.LABEL_MAX_BYTES, required=True)
    reference = _line(artifact, "reference", where, L.REFERENCE_MAX_BYTES, required=True)
    assert reference is not None
    _line(artifact, "sourceState", where, L.SOURCE_STATE_MAX_BYTES, required=False)
    problem = reference_problem(kind, reference)
    if problem is not None:
        raise _bad(f"{where} reference {problem}")


def _check_verification(i: int, item: Any) -> None:
    where = f"verification {i}"
    if not isinstance(item, dict):
        raise _bad(f"{where} must be an object")
    _line(item, "label", where, L.LABEL_MAX_BYTES, required=True)
    if item.get("status") not in L.VERIFICATION_STATUSES:
        raise _bad(f"{where} status must be one of {', '.join(L.VERIFICATION_STATUSES)}")
    string(item, "evidence", f"{PREFIX}: {where}", L.EVIDENCE_MAX_BYTES)
