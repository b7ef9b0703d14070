"""Every number of the workflow engine in one table (spec/workflows.md §20, docs/limits.md).

The validator, the condition evaluator, the template renderer, the scheduler and the run
state machine read these names; nothing else in `buzz.workflows` writes a literal limit.
Durations are seconds, sizes UTF-8 bytes, unless the name says otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

# -- kinds (§2.1) ------------------------------------------------------------------------------
KIND_WORKFLOW_DEF = 30620
KIND_WORKFLOW_TRIGGER = 46020
KIND_APPROVAL_GRANT = 46030
KIND_APPROVAL_DENY = 46031
KIND_RUN_TRIGGERED = 46001
KIND_STEP_STARTED = 46002
KIND_STEP_COMPLETED = 46003
KIND_STEP_FAILED = 46004
KIND_RUN_COMPLETED = 46005
KIND_RUN_FAILED = 46006
KIND_RUN_CANCELLED = 46007
KIND_APPROVAL_REQUESTED = 46010
KIND_APPROVAL_GRANTED = 46011
KIND_APPROVAL_DENIED = 46012
KINDS_RUN_LIFECYCLE = frozenset(range(46001, 46008))

# -- the definition (§3) -----------------------------------------------------------------------
DEFINITION_MAX_BYTES = 65_536
YAML_MAX_DEPTH = 32  # nesting of mappings/sequences (decision 180): deeper trees are refused
NAME_MAX_CHARS = 256
DESCRIPTION_MAX_BYTES = 4096
MAX_STEPS = 100
STEP_ID_MAX_CHARS = 64
DEFAULT_STEP_TIMEOUT_S = 300
STEP_TIMEOUT_MAX_S = 86_400
MAX_CONCURRENT_PER_WORKFLOW = 100  # the optional `max_concurrent` key (decision 184)
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

# -- conditions (§4.5) -------------------------------------------------------------------------
CONDITION_MAX_BYTES = 4096
CONDITION_MAX_NODES = 10_000  # evaluated nodes
CONDITION_TIMEOUT_MS = 100
CONDITION_MAX_STRING_BYTES = 65_536
CONDITION_MAX_DEPTH = 100  # AST nesting (decision 181): bounds the evaluator's recursion

# -- templates (§5) ----------------------------------------------------------------------------
TRUNCATE_MAX = 100_000
TEMPLATE_OUTPUT_MAX_BYTES = 1_048_576  # one rendered field (decision 182)

# -- schedules (§3.4) --------------------------------------------------------------------------
INTERVAL_MIN_S = 60
INTERVAL_MAX_S = 31_536_000
CRON_YEAR_MIN = 1970
CRON_YEAR_MAX = 2100
CRON_HORIZON_YEARS = 5  # "cron never fires" when no instant falls in this window
SCHEDULE_TICK_S = 10
SCHEDULE_GRACE_S = 60
MISSED_COUNT_MAX = 10_000  # `due` stops counting missed instants here (a log line, not a replay)

# -- actions (§3.5, §8) ------------------------------------------------------------------------
DELAY_MAX_S = 2_592_000
APPROVAL_TIMEOUT_DEFAULT_S = 86_400
APPROVAL_TIMEOUT_MAX_S = 2_592_000
ASK_AGENT_TIMEOUT_DEFAULT_S = 3600
ASK_AGENT_TIMEOUT_MAX_S = 604_800
REQUESTED_OUTCOME_MAX_BYTES = 8192
MESSAGE_TEXT_MAX_BYTES = 65_536
TOPIC_MAX_BYTES = 4096
EMOJI_MAX_CHARS = 64
MAX_MENTIONS = 50
MAX_APPROVERS = 50
APPROVAL_NOTE_MAX_BYTES = 4096
APPROVAL_SWEEP_S = 30
WEBHOOK_CALL_TIMEOUT_S = 10
WEBHOOK_RESPONSE_MAX_BYTES = 1_048_576
WEBHOOK_RETRY_MAX = 5
WEBHOOK_BACKOFF_DEFAULT_S = 1
WEBHOOK_BACKOFF_MAX_S = 300
WEBHOOK_URL_MAX_BYTES = 2048
WEBHOOK_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD")
WEBHOOK_FORBIDDEN_HEADERS = frozenset(
    {"host", "content-length", "transfer-encoding", "connection", "idempotency-key"}
)

# -- doors and runs (§7, §13, §14) ---------------------------------------------------------------
INPUT_MAX_KEYS = 100
INPUT_KEY_MAX_CHARS = 64
MANUAL_INPUT_MAX_BYTES = 65_536
MAX_CONCURRENT_RUNS = 100  # per replica (BUZZ_WORKFLOW_MAX_CONCURRENT)
RUN_QUEUE_MAX = 10_000  # pending runs per workspace (BUZZ_WORKFLOW_QUEUE_MAX)
WORKFLOW_RUN_RATE = 120  # runs created per workflow per RUN_RATE_WINDOW_S
RUN_RATE_WINDOW_S = 60
RUN_LEASE_S = 30
LEASE_RENEW_S = 10
RESUME_SCAN_S = 10
STEP_OUTPUT_MAX_BYTES = 1_048_576
EVENT_OUTPUT_MAX_BYTES = 8192
ERROR_MESSAGE_MAX_BYTES = 1024


@dataclass(frozen=True)
class DurationRange:
    """A duration field (§3.5): its default (None = required) and its inclusive bounds."""

    default: int | None
    minimum: int
    maximum: int


DURATIONS: dict[str, DurationRange] = {
    "trigger.interval": DurationRange(None, INTERVAL_MIN_S, INTERVAL_MAX_S),
    "delay.duration": DurationRange(None, 1, DELAY_MAX_S),
    "request_approval.timeout": DurationRange(APPROVAL_TIMEOUT_DEFAULT_S, 1, APPROVAL_TIMEOUT_MAX_S),
    "ask_agent.timeout": DurationRange(ASK_AGENT_TIMEOUT_DEFAULT_S, 1, ASK_AGENT_TIMEOUT_MAX_S),
    "call_webhook.retry.backoff": DurationRange(WEBHOOK_BACKOFF_DEFAULT_S, 1, WEBHOOK_BACKOFF_MAX_S),
}
RETENTION_DAYS_DEFAULT = 30  # §11.5: terminal runs and their events; 0 keeps them forever
PRUNE_EVERY_S = 3600  # how often a replica prunes (decision 323)
PRUNE_PAGE = 500  # runs looked at per page; a prune pass reads at most PRUNE_PAGES pages
PRUNE_PAGES = 20
CLAIM_RETENTION_S = 7 * 86400  # schedule claims, except each workflow's newest (§11.5)
WEBHOOK_KEY_RETENTION_S = 86400  # webhook idempotency keys (§11.5)
