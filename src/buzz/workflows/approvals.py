"""Approvals: approver specs, the approval's states, and the checks on a grant or deny (§9).

Pure rules over facts the runner looks up: `decide(approval, decision, facts)` returns the
new approval or raises the exact refusal of §9.4 item 2, in the spec's order, so a double
grant, an outsider or a late grant is refused the same way on every path.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, replace
from enum import StrEnum

from buzz.core.errors import Invalid, Restricted
from buzz.core.nip19 import parse_key_text
from buzz.workflows.limits import APPROVAL_NOTE_MAX_BYTES, MAX_APPROVERS

_ITEM_ROLE = {"role:owner": frozenset({"owner"}), "role:admin": frozenset({"owner", "admin"})}


@dataclass(frozen=True)
class ApproverSpec:
    """Who may decide (§9.2): anyone who may write (`any`), listed pubkeys, channel roles."""

    text: str  # the resolved spec as written (recorded in 46010 `approver_spec`)
    anyone: bool
    pubkeys: frozenset[str]
    roles: frozenset[str]  # channel roles that qualify: "owner", "admin"

    def designated(self, role_holders: dict[str, str]) -> list[str]:
        """The pubkeys named in 46010 `p` tags: listed keys, then holders of a named role (§9.3 item 2)."""
        if self.anyone:
            return []
        out = sorted(self.pubkeys)
        out += sorted(
            pk for pk, role in role_holders.items() if role in self.roles and pk not in self.pubkeys
        )
        return out[:MAX_APPROVERS]

    def allows(self, signer: str, signer_role: str | None, can_write: bool) -> bool:
        """Whether `signer` satisfies the spec; `signer_role` is their active channel role."""
        if self.anyone:
            return can_write
        return signer in self.pubkeys or (signer_role is not None and signer_role in self.roles)


def parse_approver_spec(spec: str) -> ApproverSpec:
    """Parse a resolved `from` (a YAML list is joined with "," first). Raises ValueError."""
    if spec.strip() in ("", "any"):
        return ApproverSpec(spec, True, frozenset(), frozenset())
    items = [item.strip() for item in spec.split(",")]
    if len(items) > MAX_APPROVERS:
        raise ValueError(f"approver spec lists more than {MAX_APPROVERS} items")
    pubkeys: set[str] = set()
    roles: set[str] = set()
    for item in items:
        if item in _ITEM_ROLE:
            roles |= _ITEM_ROLE[item]
            continue
        try:
            pubkeys.add(parse_key_text(item, "npub"))
        except ValueError:
            raise ValueError(f"approver spec '{item}' is not supported") from None
    return ApproverSpec(spec, False, frozenset(pubkeys), frozenset(roles))


def approval_reference(token_uuid: str) -> str:
    """The public reference of an approval: hex SHA-256 of the UUID string (§9.3 item 1, §16)."""
    return hashlib.sha256(token_uuid.encode("utf-8")).hexdigest()


class ApprovalStatus(StrEnum):
    PENDING = "pending"
    GRANTED = "granted"
    DENIED = "denied"
    EXPIRED = "expired"
    CANCELLED = "cancelled"  # the workflow was deleted while the approval waited (§6.6)


# status → the statuses it may move to; every move is out of `pending` (one compare-and-set).
APPROVAL_TRANSITIONS: dict[ApprovalStatus, frozenset[ApprovalStatus]] = {
    ApprovalStatus.PENDING: frozenset(
        {ApprovalStatus.GRANTED, ApprovalStatus.DENIED, ApprovalStatus.EXPIRED, ApprovalStatus.CANCELLED}
    ),
    ApprovalStatus.GRANTED: frozenset(),
    ApprovalStatus.DENIED: frozenset(),
    ApprovalStatus.EXPIRED: frozenset(),
    ApprovalStatus.CANCELLED: frozenset(),
}


@dataclass(frozen=True)
class Approval:
    """One row of `workflow_approvals` (§11.1)."""

    reference: str
    workflow_id: str
    run_id: str
    step_id: str
    step_index: int
    channel_id: str
    spec: ApproverSpec
    expires_at: int
    created_at: int
    request_event_id: str | None = None
    status: ApprovalStatus = ApprovalStatus.PENDING
    approver: str | None = None
    note: str | None = None
    decision_event_id: str | None = None
    decided_at: int | None = None


@dataclass(frozen=True)
class Decision:
    """A 46030 (grant) or 46031 (deny), or the sweeper's expiry."""

    status: ApprovalStatus  # GRANTED, DENIED or EXPIRED
    at: int
    approver: str | None = None
    note: str | None = None
    event_id: str | None = None


@dataclass(frozen=True)
class DeciderFacts:
    """What the runner knows about the signer when a decision arrives."""

    can_write: bool  # passes the write gate of the approval's channel
    role: str | None  # "owner", "admin", "member" or None (not an active member)


def transition(approval: Approval, decision: Decision) -> Approval:
    """Move an approval out of `pending`; raises Invalid for any other move."""
    if decision.status not in APPROVAL_TRANSITIONS[approval.status]:
        raise Invalid(f"approval already {approval.status.value}")
    return replace(
        approval,
        status=decision.status,
        approver=decision.approver,
        note=decision.note,
        decision_event_id=decision.event_id,
        decided_at=decision.at,
    )


def check_note(note: str) -> None:
    if len(note.encode("utf-8", "surrogatepass")) > APPROVAL_NOTE_MAX_BYTES:
        raise Invalid(f"approval note exceeds {APPROVAL_NOTE_MAX_BYTES} bytes")


def decide(approval: Approval | None, decision: Decision, facts: DeciderFacts) -> Approval:
    """Apply a grant or deny after the checks of §9.4 item 2, in order. Raises the refusal.

    Item 2.6 (the compare-and-set in the store) is the runner's: it writes the returned row
    only `WHERE status = 'pending'` and answers `invalid: approval already acted on (race)`
    when no row matched.
    """
    if approval is None:
        raise Invalid("approval not found")
    if not facts.can_write:
        raise Restricted("not a channel member")
    if approval.status is not ApprovalStatus.PENDING:
        raise Invalid(f"approval already {approval.status.value}")
    if decision.at >= approval.expires_at:
        raise Invalid("approval token has expired")
    assert decision.approver is not None
    if not approval.spec.allows(decision.approver, facts.role, facts.can_write):
        raise Restricted("not the designated approver")
    if decision.note:
        check_note(decision.note)
    return transition(approval, decision)


def expire(approval: Approval, now: int) -> Approval | None:
    """The sweeper's step (§9.5): the expired approval, or None when it is not due."""
    if approval.status is not ApprovalStatus.PENDING or approval.expires_at > now:
        return None
    return transition(approval, Decision(ApprovalStatus.EXPIRED, now))


_HEX64 = re.compile(r"[0-9a-f]{64}\Z")


def is_reference(value: str) -> bool:
    return bool(_HEX64.match(value))
