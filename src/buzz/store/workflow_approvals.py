"""The approval rows of the workflow engine (workflows.md §9): their columns and the three
reads — by reference or request event, a run's approvals, and the expired ones the sweeper
takes. The write that changes them is the run's one `WorkflowWrite` (`store/workflows.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from buzz.store.dialect import Conn, Params
from buzz.store.workflow_rows import ApprovalRow

_APPROVAL_COLUMNS = ("reference", "workflow_id", "run_id", "channel_id", "status", "expires_at", "data",
                     "request_event_id")  # fmt: skip


# every read of approvals selects the whole row, in this order
_SELECT = f"SELECT {', '.join(_APPROVAL_COLUMNS)} FROM workflow_approvals"


def _approval(values: Sequence[Any]) -> ApprovalRow:
    return ApprovalRow(**dict(zip(_APPROVAL_COLUMNS, values, strict=True)))


async def get_approval_txn(
    conn: Conn, reference: str | None, request_event_id: str | None
) -> ApprovalRow | None:
    p = Params(conn.dialect)
    where = (
        f"reference = {p.add(reference)}"
        if reference is not None
        else f"request_event_id = {p.add(request_event_id)}"
    )
    rows = await conn.fetch(f"{_SELECT} WHERE {where}", p.values)
    return _approval(rows[0]) if rows else None


async def run_approvals_txn(conn: Conn, run_id: str) -> list[ApprovalRow]:
    p = Params(conn.dialect)
    rows = await conn.fetch(
        f"{_SELECT} WHERE run_id = {p.add(run_id)} ORDER BY expires_at, reference",
        p.values,
    )
    return [_approval(r) for r in rows]


async def due_approvals_txn(conn: Conn, now: int, limit: int) -> list[ApprovalRow]:
    """Pending approvals whose expiry passed (the sweeper, §9.5)."""
    p = Params(conn.dialect)
    rows = await conn.fetch(
        f"{_SELECT} WHERE status = 'pending'"
        f" AND expires_at <= {p.add(now)} ORDER BY expires_at LIMIT {p.add(limit)}",
        p.values,
    )
    return [_approval(r) for r in rows]
