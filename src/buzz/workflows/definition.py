"""The typed form of a validated workflow definition (spec/workflows.md §3).

Values only: `validate.parse_definition` builds them, the runner reads them. Template fields
(marked T in §3.7) stay as their source text and are rendered at step time
(`templates.render`); conditions are compiled once (`conditions.Condition`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from buzz.workflows.conditions import Condition
from buzz.workflows.schedule import Schedule

# -- triggers (§3.3) ---------------------------------------------------------------------------


@dataclass(frozen=True)
class MessagePosted:
    on: ClassVar[str] = "message_posted"
    kind: ClassVar[int] = 9
    filter: Condition | None = None


@dataclass(frozen=True)
class ReactionAdded:
    on: ClassVar[str] = "reaction_added"
    kind: ClassVar[int] = 7
    emoji: str | None = None
    filter: Condition | None = None


@dataclass(frozen=True)
class DiffPosted:
    on: ClassVar[str] = "diff_posted"
    kind: ClassVar[int] = 40008
    filter: Condition | None = None


@dataclass(frozen=True)
class ScheduleTrigger:
    on: ClassVar[str] = "schedule"
    schedule: Schedule


@dataclass(frozen=True)
class Webhook:
    on: ClassVar[str] = "webhook"


Trigger = MessagePosted | ReactionAdded | DiffPosted | ScheduleTrigger | Webhook
TRIGGERS: dict[str, type] = {
    t.on: t for t in (MessagePosted, ReactionAdded, DiffPosted, ScheduleTrigger, Webhook)
}
MESSAGE_BASED = frozenset({"message_posted", "reaction_added", "diff_posted"})
TRIGGER_KINDS = {9: "message_posted", 7: "reaction_added", 40008: "diff_posted"}

# -- actions (§3.7); str fields marked T are template sources ------------------------------------


@dataclass(frozen=True)
class SendMessage:
    text: str  # T
    channel: str | None = None  # T
    reply_in_thread: bool = False


@dataclass(frozen=True)
class SendDm:
    to: str  # T: hex or npub
    text: str  # T


@dataclass(frozen=True)
class SetChannelTopic:
    topic: str  # T; "" clears


@dataclass(frozen=True)
class AddReaction:
    emoji: str  # T


@dataclass(frozen=True)
class Retry:
    max: int
    backoff: int  # seconds before retry 1; doubled per retry, at most WEBHOOK_BACKOFF_MAX_S


@dataclass(frozen=True)
class CallWebhook:
    url: str  # T
    method: str = "POST"
    headers: tuple[tuple[str, str], ...] = ()  # values T, names as written
    body: str | None = None  # T
    retry: Retry | None = None


@dataclass(frozen=True)
class RequestApproval:
    approvers: str  # T: `from`, a YAML list already joined with ","
    message: str = ""  # T
    timeout: int = 86_400


@dataclass(frozen=True)
class Delay:
    duration: int


@dataclass(frozen=True)
class AskAgent:
    agent: str  # T: hex, npub or @Name
    prompt: str  # T
    timeout: int = 3600


Action = (
    SendMessage | SendDm | SetChannelTopic | AddReaction | CallWebhook | RequestApproval | Delay | AskAgent
)

# `action:` value → class; the order is the spec's table.
ACTIONS: dict[str, type] = {
    "send_message": SendMessage,
    "send_dm": SendDm,
    "set_channel_topic": SetChannelTopic,
    "add_reaction": AddReaction,
    "call_webhook": CallWebhook,
    "request_approval": RequestApproval,
    "delay": Delay,
    "ask_agent": AskAgent,
}
ACTION_NAMES = {cls: name for name, cls in ACTIONS.items()}

# Actions whose dispatch sets up a wait instead of finishing (§7.5 item 5), and what it waits for.
WAITS = {"delay": "delay", "ask_agent": "job", "request_approval": "approval"}


@dataclass(frozen=True)
class Step:
    id: str
    action: Action
    name: str | None = None
    condition: Condition | None = None  # the step's `if`
    timeout_secs: int = 300

    @property
    def action_name(self) -> str:
        return ACTION_NAMES[type(self.action)]


@dataclass(frozen=True)
class Problem:
    """One validation finding: where (`steps[2].timeout_secs`, line, column) and what."""

    path: str
    message: str
    line: int | None = None
    column: int | None = None

    def __str__(self) -> str:
        where = f" (line {self.line}, column {self.column})" if self.line is not None else ""
        return f"{self.path}: {self.message}{where}" if self.path else f"{self.message}{where}"

    def as_json(self) -> dict[str, object]:
        return {"path": self.path, "line": self.line, "column": self.column, "message": self.message}


@dataclass(frozen=True)
class Definition:
    """A valid workflow (§3.1). `canonical` and `definition_hash` are those of §3.9."""

    name: str
    trigger: Trigger
    steps: tuple[Step, ...]
    description: str | None = None
    enabled: bool = True
    max_concurrent: int | None = None  # this project's addition (decision 184)
    canonical: str = ""
    definition_hash: str = ""
    warnings: tuple[Problem, ...] = field(default=(), compare=False)

    @property
    def elevated(self) -> bool:
        """A definition with a `call_webhook` step needs an owner or admin (§6.5 item 1)."""
        return any(isinstance(s.action, CallWebhook) for s in self.steps)

    def step_index(self, step_id: str) -> int:
        for i, step in enumerate(self.steps):
            if step.id == step_id:
                return i
        raise KeyError(step_id)
