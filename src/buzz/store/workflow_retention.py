"""Run retention (workflows.md §11.5) on both backends: which terminal runs are old enough to
go, and their deletion with their rows and their lifecycle and approval events."""

from __future__ import annotations

import json

from buzz.store.dialect import Conn, Params
from buzz.store.workflow_rows import RunRow
from buzz.store.workflows import _RUN_COLUMNS, TERMINAL, _run


async def prune_candidates_txn(conn: Conn, before: int, after: tuple[int, str], limit: int) -> list[RunRow]:
    """Terminal runs created before `before`, keyset after `after` (the runner decides from
    their data which ended long enough ago)."""
    p = Params(conn.dialect)
    t, i = p.add(after[0]), p.add(after[1])
    rows = await conn.fetch(
        f"SELECT {', '.join(_RUN_COLUMNS)} FROM workflow_runs WHERE status IN {TERMINAL}"
        f" AND created_at < {p.add(before)} AND (created_at > {t} OR (created_at = {t} AND id > {i}))"
        f" ORDER BY created_at, id LIMIT {p.add(limit)}",
        p.values,
    )
    return [_run(r) for r in rows]


async def prune_txn(conn: Conn, run_ids: list[str], claims_before: int, keys_before: int) -> int:
    """§11.5: delete these (terminal) runs with their steps and approvals, their lifecycle
    events (46001–46007: `d` = the workflow, `run` = the run; only single-letter tags are
    indexed, so the `run` tag is read from the workflow's events since the run began) and their
    approval events (46010–46012: `d` = the approval's reference); old schedule claims but each
    workflow's newest, and old webhook keys. Returns the runs deleted."""
    runs: dict[str, tuple[str, int]] = {}
    for run_id in run_ids:
        p = Params(conn.dialect)
        gone = await conn.fetch(
            f"DELETE FROM workflow_runs WHERE id = {p.add(run_id)} AND status IN {TERMINAL}"
            " RETURNING workflow_id, created_at",
            p.values,
        )
        if gone:
            runs[run_id] = (str(gone[0][0]), int(gone[0][1]))
    events: set[str] = set()
    references: list[str] = []
    for run_id in runs:
        p = Params(conn.dialect)
        references += [str(r[0]) for r in await conn.fetch(
            f"DELETE FROM workflow_approvals WHERE run_id = {p.add(run_id)} RETURNING reference", p.values)]  # fmt: skip
        p = Params(conn.dialect)
        await conn.execute(f"DELETE FROM workflow_steps WHERE run_id = {p.add(run_id)}", p.values)
    by_workflow: dict[str, set[str]] = {}
    for run_id, (workflow_id, _) in runs.items():
        by_workflow.setdefault(workflow_id, set()).add(run_id)
    for workflow_id, ids in by_workflow.items():
        since = min(runs[r][1] for r in ids)
        p = Params(conn.dialect)
        rows = await conn.fetch(
            "SELECT e.id, e.tags FROM event_tags t JOIN events e ON e.id = t.event_id"
            f" WHERE t.name = 'd' AND t.value = {p.add(workflow_id, 'utf8')}"
            f" AND e.kind BETWEEN 46001 AND 46007 AND e.created_at >= {p.add(since)}",
            p.values,
        )
        for event_id, tags in rows:
            parsed = json.loads(tags) if isinstance(tags, str | bytes) else tags
            if any(len(t) >= 2 and t[0] == "run" and t[1] in ids for t in parsed):
                events.add(str(event_id))
    for reference in references:
        p = Params(conn.dialect)
        rows = await conn.fetch(
            "SELECT e.id FROM event_tags t JOIN events e ON e.id = t.event_id"
            f" WHERE t.name = 'd' AND t.value = {p.add(reference, 'utf8')} AND e.kind BETWEEN 46010 AND 46012",
            p.values,
        )
        events.update(str(r[0]) for r in rows)
    if events:
        for table, column in (("event_tags", "event_id"), ("events", "id")):
            p = Params(conn.dialect)
            await conn.execute(f"DELETE FROM {table} WHERE {p.in_list(column, events, 'text')}", p.values)
    p = Params(conn.dialect)
    await conn.execute(
        f"DELETE FROM workflow_schedule_claims WHERE claimed_at < {p.add(claims_before)} AND scheduled_for <"
        " (SELECT MAX(n.scheduled_for) FROM workflow_schedule_claims n"
        "  WHERE n.workflow_id = workflow_schedule_claims.workflow_id)",
        p.values,
    )
    p = Params(conn.dialect)
    await conn.execute(f"DELETE FROM workflow_webhook_keys WHERE created_at < {p.add(keys_before)}", p.values)
    return len(runs)
