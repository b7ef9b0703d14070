"""The numbers of the job protocol and the directory records (jobs spec §14), in one place:
the relay enforces them, producers check them before signing, docs/limits.md lists them."""

from __future__ import annotations

KIND_JOB_REQUEST = 43001
KIND_JOB_ACCEPTED = 43002
KIND_JOB_PROGRESS = 43003
KIND_JOB_RESULT = 43004
KIND_JOB_CANCEL = 43005
KIND_JOB_FAILED = 43006
JOB_KINDS = frozenset(range(KIND_JOB_REQUEST, KIND_JOB_FAILED + 1))
LIFECYCLE_KINDS = JOB_KINDS - {KIND_JOB_REQUEST}

KIND_PERSONA = 30175
KIND_TEAM = 30176
KIND_MANAGED_AGENT = 30177
KIND_TEAM_CATALOG = 30178
RECORD_KINDS = frozenset({KIND_PERSONA, KIND_TEAM, KIND_MANAGED_AGENT, KIND_TEAM_CATALOG})
KIND_AGENT_WORK_STATUS = 30181  # NIP-AW (§12)

JOB_SCHEMA_VERSION = 1
JOB_RESULT_SCHEMA_TAG = ("schema", "buzz.job-result", "1")

DISPOSITIONS = ("completed", "partial", "blocked", "failed", "no_artifact")
ARTIFACT_KINDS = (
    "file",
    "media",
    "branch",
    "commit",
    "pull_request",
    "canvas",
    "workflow_output",
    "build",
    "deployment",
    "link",
    "other",
)
VERIFICATION_STATUSES = ("passed", "failed", "not_run")
FAILURE_CODES = ("declined", "agent_error", "timeout", "unavailable", "invalid_request")
PLAN_STATUSES = ("pending", "in_progress", "completed")

JOB_REQUEST_MAX_BYTES = 131_072
PROMPT_MAX_BYTES = 65_536
REQUESTED_OUTCOME_MAX_BYTES = 8192
OUTCOME_MAX_BYTES = 8192
SOURCE_MAX_BYTES = 4096
ACCEPT_MAX_BYTES = 8192
PROGRESS_MAX_BYTES = 65_536
RESULT_MAX_BYTES = 65_536
CANCEL_MAX_BYTES = 4096
FAILURE_MAX_BYTES = 8192
MAX_ARTIFACTS = 50
MAX_VERIFICATIONS = 50
PROGRESS_TEXT_MAX_BYTES = 4096  # message, lastProgress, blocker, 43002/43006 message
BLOCKER_MAX_BYTES = 4096
LABEL_MAX_BYTES = 512
REFERENCE_MAX_BYTES = 2048
SOURCE_STATE_MAX_BYTES = 512
EVIDENCE_MAX_BYTES = 2048
PLAN_MAX_ITEMS = 50
PLAN_TITLE_MAX_BYTES = 512
CANCEL_REASON_MAX_BYTES = 1024
DEADLINE_MAX_S = 604_800
JOB_MAX_DEPTH = 8
PROGRESS_RELAY_RATE = 1  # per second per job, at the relay
PROGRESS_MIN_INTERVAL_S = 5.0  # harness pacing
CANCEL_STOP_S = 10
JOB_CATCH_UP_S = 604_800
TITLE_MAX_CHARS = 160

PERSONA_MAX_BYTES = 65_535
DISPLAY_NAME_MAX_BYTES = 256
RECORD_ID_MAX_CHARS = 64
PARALLELISM_MIN = 1
PARALLELISM_MAX = 32
ALLOWLIST_MAX = 256
POLICY_APPLY_S = 5
WORK_STATUS_MAX_BYTES = 16_384
WORK_STATUS_MIN_INTERVAL_S = 5.0
WORK_STATUS_REFRESH_S = 300.0
WORK_STATUS_STALE_S = 600
WORK_STATUS_MAX_ACTIVITY = 20
WORK_STATUSES = ("working", "complete", "error", "idle")
WORK_STATUS_SOURCE = "buzz-agent-harness"
RESPOND_TO_MODES = ("owner-only", "allowlist", "members", "anyone", "nobody")
FORBIDDEN_MEMBERS = frozenset(
    {
        "nsec",
        "privatekey",
        "secretkey",
        "env",
        "envvars",
        "environment",
        "authtag",
        "apikey",
        "accesstoken",
        "password",
        "backend",
        "pid",
        "pids",
    }
)
