"""What the jobs tests share."""

from __future__ import annotations


def result_manifest(job_id: str, **over: object) -> dict:
    """A valid completed result manifest (jobs spec §5) for `job_id`, fields replaced by `over`."""
    body = {
        "schemaVersion": 1,
        "jobRequest": job_id,
        "requestedOutcome": "fix the bug",
        "outcome": "fixed",
        "disposition": "completed",
        "artifacts": [{"kind": "file", "label": "fix", "reference": "src/fix.py"}],
        "verification": [{"label": "tests", "status": "passed"}],
    }
    body.update(over)
    return body
