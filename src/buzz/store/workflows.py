"""The workflow engine's tables (workflows.md §11.1), shared by both backends: the `_txn`
functions and `WorkflowStoreMixin`, the `SqlStore` methods over them.

Exactly-once across replicas rests on three row-level rules, the same on both backends:
a schedule instant or webhook key is a unique row inserted `ON CONFLICT DO NOTHING` in the
transaction that creates its run (`Claim`); a replica drives a run only while it holds the
run's lease, taken by compare-and-set (`take_runs_txn`: PostgreSQL picks candidates `FOR
UPDATE SKIP LOCKED`, SQLite has one writer) and checked by every later write of that run
(`WorkflowWrite.lease`); an approval leaves `pending` by compare-and-set (`ApprovalSwap`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from buzz.store.dialect import Conn, Params
from buzz.store.workflow_approvals import (
    _APPROVAL_COLUMNS,
    due_approvals_txn,
    get_approval_txn,
    run_approvals_txn,
)
from buzz.store.workflow_rows import (
    ActiveRun,
    ApprovalRaced,
    ApprovalRow,
    Claim,
    DeleteWorkflow,
    LeaseLost,
    RunLease,
    RunRow,
    StepRow,
    WorkflowRow,
    WorkflowWrite,
)

_WF_COLUMNS = ("id", "channel_id", "owner", "name", "head_event_id", "definition", "definition_hash",
               "trigger_on", "elevated", "enabled", "status", "accepted_at", "created_at", "updated_at",
               "secret_hash")  # fmt: skip
_RUN_COLUMNS = (
    "id",
    "workflow_id",
    "status",
    "created_at",
    "current_step",
    "seq",
    "data",
    "wake_at",
    "error_code",
)
_CLAIM_TABLES = {
    "schedule": ("workflow_schedule_claims", "scheduled_for", "claimed_at"),
    "webhook": ("workflow_webhook_keys", "idempotency_key", "created_at"),
}
WAITING = ("waiting", "waiting_approval")
TERMINAL = "('completed', 'failed', 'cancelled')"


def _lock(conn: Conn) -> str:
    return " FOR UPDATE SKIP LOCKED" if conn.dialect.name == "postgres" else ""


def _workflow(values: Sequence[Any]) -> WorkflowRow:
    row = dict(zip(_WF_COLUMNS, values, strict=True))
    row["elevated"], row["enabled"] = bool(row["elevated"]), bool(row["enabled"])
    return WorkflowRow(**row)


def _run(values: Sequence[Any]) -> RunRow:
    return RunRow(**dict(zip(_RUN_COLUMNS, values, strict=True)))


async def _upsert(conn: Conn, table: str, columns: Sequence[str], values: Sequence[Any], key: str,
                  where: str = "", where_values: Sequence[Any] = ()) -> bool:  # fmt: skip
    """INSERT, or UPDATE every other column on a key clash (only `where` holds). True when a row
    was written."""
    p = Params(conn.dialect)
    marks = ", ".join(p.add(v) for v in values)
    keys = {k.strip() for k in key.split(",")}
    updates = ", ".join(f"{c} = excluded.{c}" for c in columns if c not in keys)
    condition = ""
    if where:
        condition = " WHERE " + where.format(*(p.add(v) for v in where_values))
    rows = await conn.fetch(
        f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})"
        f" ON CONFLICT ({key}) DO UPDATE SET {updates}{condition} RETURNING 1",
        p.values,
    )
    return bool(rows)


async def workflow_write_txn(conn: Conn, w: WorkflowWrite, now: int) -> bool:
    """Apply one engine transition (`WorkflowWrite`). False, writing nothing, when its claim was
    taken already; raises ApprovalRaced for a lost approval swap and LeaseLost when a run it
    updates is leased by another replica (both roll the transaction back)."""
    from buzz.store.jobs import relay_job_effects
    from buzz.store.writes import insert_txn  # writes applies WorkflowWrite: a cycle at import

    if not await _rows_txn(conn, w, now):
        return False
    for stored in w.events:  # a job request or cancel moves its job row too (jobs spec §5.3)
        await insert_txn(conn, stored, relay_job_effects(stored), now)
    for stored, effects in w.published:
        await insert_txn(conn, stored, effects, now)
    return True


async def _rows_txn(conn: Conn, w: WorkflowWrite, now: int) -> bool:
    """Everything of `w` but its events; False when its claim was taken already."""
    if w.claim is not None and not await _claim_txn(conn, w.claim, now):
        return False
    if w.swap is not None:
        row = w.swap.row
        p = Params(conn.dialect)
        done = await conn.fetch(
            f"UPDATE workflow_approvals SET status = {p.add(row.status)}, data = {p.add(row.data)}"
            f" WHERE reference = {p.add(row.reference)} AND status = {p.add(w.swap.expected)} RETURNING 1",
            p.values,
        )
        if not done:
            raise ApprovalRaced()
    if w.workflow is not None:
        wf = w.workflow
        await _upsert(conn, "workflows", _WF_COLUMNS, [getattr(wf, c) for c in _WF_COLUMNS], "id")
    for run in w.runs:
        values = [getattr(run, c) for c in _RUN_COLUMNS]
        if w.lease is None:
            written = await _upsert(conn, "workflow_runs", _RUN_COLUMNS, values, "id")
        else:
            written = await _upsert(conn, "workflow_runs", _RUN_COLUMNS, values, "id",
                                    "workflow_runs.lease_owner = {0}", [w.lease])  # fmt: skip
        if not written:
            raise LeaseLost(run.id)
        if w.release or w.take is not None:  # without `lease`: whoever drives the run loses it
            p = Params(conn.dialect)
            owner, until = (f"{p.add(w.take[0])}", f"{p.add(w.take[1])}") if w.take else ("NULL", "NULL")
            mine = f" AND lease_owner = {p.add(w.lease)}" if w.lease is not None else ""
            await conn.execute(f"UPDATE workflow_runs SET lease_owner = {owner}, lease_until = {until}"
                               f" WHERE id = {p.add(run.id)}{mine}", p.values)  # fmt: skip
    for step in w.steps:
        await _upsert(conn, "workflow_steps", ("run_id", "idx", "data"), (step.run_id, step.idx, step.data),
                      "run_id, idx")  # fmt: skip
    if w.approval is not None:
        a = w.approval
        p = Params(conn.dialect)
        marks = ", ".join(p.add(getattr(a, c)) for c in _APPROVAL_COLUMNS)
        await conn.execute(
            f"INSERT INTO workflow_approvals ({', '.join(_APPROVAL_COLUMNS)}) VALUES ({marks})"
            " ON CONFLICT (reference) DO NOTHING",
            p.values,
        )
    for row in w.cancel_approvals:  # a decision that committed first keeps its outcome
        p = Params(conn.dialect)
        await conn.execute(
            f"UPDATE workflow_approvals SET status = {p.add(row.status)}, data = {p.add(row.data)}"
            f" WHERE reference = {p.add(row.reference)} AND status = 'pending'",
            p.values,
        )
    return True


async def delete_workflow_txn(conn: Conn, effect: DeleteWorkflow, now: int) -> None:
    """§6.6 item 4 inside the deletion's transaction. On PostgreSQL the unfinished runs are
    locked (`FOR UPDATE`, waiting rather than skipping): a replica's write of one of them either
    committed before (and is read here) or runs after and finds its lease gone (LeaseLost)."""
    wf = await get_workflow_txn(conn, effect.workflow_id)
    if wf is None or wf.status == "deleted" or wf.owner != effect.owner:
        return
    p = Params(conn.dialect)
    head = await conn.fetch(f"SELECT deleted_at FROM events WHERE id = {p.add(wf.head_event_id)}", p.values)
    if head and head[0][0] is None and not effect.whatever_the_head:  # an older version, an earlier `a`
        return
    p = Params(conn.dialect)
    lock = " FOR UPDATE" if conn.dialect.name == "postgres" else ""
    rows = await conn.fetch(
        f"SELECT {', '.join(_RUN_COLUMNS)} FROM workflow_runs WHERE workflow_id = {p.add(wf.id)}"
        f" AND status NOT IN {TERMINAL} ORDER BY created_at, id{lock}",
        p.values,
    )
    active: list[ActiveRun] = []
    for values in rows:
        run = _run(values)
        p = Params(conn.dialect)
        steps = await conn.fetch(
            f"SELECT run_id, idx, data FROM workflow_steps WHERE run_id = {p.add(run.id)} ORDER BY idx",
            p.values,
        )
        active.append((run, [StepRow(str(s[0]), int(s[1]), str(s[2])) for s in steps],
                       await run_approvals_txn(conn, run.id)))  # fmt: skip
    await workflow_write_txn(conn, effect.cancel(wf, active, now), now)


async def holds_lease_txn(conn: Conn, run_id: str, owner: str) -> bool:
    p = Params(conn.dialect)
    rows = await conn.fetch(
        f"SELECT 1 FROM workflow_runs WHERE id = {p.add(run_id)} AND lease_owner = {p.add(owner)}"
        f" AND status NOT IN {TERMINAL}",
        p.values,
    )
    return bool(rows)


async def run_lease_txn(conn: Conn, effect: RunLease) -> None:
    p = Params(conn.dialect)
    lock = " FOR UPDATE" if conn.dialect.name == "postgres" else ""
    rows = await conn.fetch(
        f"SELECT 1 FROM workflow_runs WHERE id = {p.add(effect.run_id)} AND lease_owner = {p.add(effect.owner)}"
        f" AND status NOT IN {TERMINAL}{lock}",
        p.values,
    )
    if not rows:
        raise LeaseLost(effect.run_id)


async def _claim_txn(conn: Conn, claim: Claim, now: int) -> bool:
    table, key_column, time_column = _CLAIM_TABLES[claim.table]
    key: object = int(claim.key) if claim.table == "schedule" else claim.key
    p = Params(conn.dialect)
    rows = await conn.fetch(
        f"INSERT INTO {table} (workflow_id, {key_column}, {time_column}, run_id)"
        f" VALUES ({p.add(claim.workflow_id)}, {p.add(key)}, {p.add(now)}, {p.add(claim.run_id)})"
        f" ON CONFLICT (workflow_id, {key_column}) DO NOTHING RETURNING 1",
        p.values,
    )
    return bool(rows)


async def claimed_run_txn(conn: Conn, table: str, workflow_id: str, key: str) -> str | None:
    """The run of an existing claim (a repeated webhook `Idempotency-Key`), or None."""
    name, key_column, _ = _CLAIM_TABLES[table]
    value: object = int(key) if table == "schedule" else key
    p = Params(conn.dialect)
    rows = await conn.fetch(
        f"SELECT run_id FROM {name} WHERE workflow_id = {p.add(workflow_id)} AND {key_column} = {p.add(value)}",
        p.values,
    )
    return str(rows[0][0]) if rows else None


async def last_claim_txn(conn: Conn, workflow_id: str) -> int | None:
    p = Params(conn.dialect)
    rows = await conn.fetch(
        f"SELECT MAX(scheduled_for) FROM workflow_schedule_claims WHERE workflow_id = {p.add(workflow_id)}",
        p.values,
    )
    return None if not rows or rows[0][0] is None else int(rows[0][0])


async def last_claims_txn(conn: Conn, workflow_ids: list[str]) -> dict[str, int]:
    p = Params(conn.dialect)
    rows = await conn.fetch(
        "SELECT workflow_id, MAX(scheduled_for) FROM workflow_schedule_claims"
        f" WHERE {p.in_list('workflow_id', workflow_ids, 'text')} GROUP BY workflow_id",
        p.values,
    )
    return {str(r[0]): int(r[1]) for r in rows}


async def claimed_among_txn(conn: Conn, workflow_ids: list[str], instant: int) -> set[str]:
    p = Params(conn.dialect)
    rows = await conn.fetch(
        f"SELECT workflow_id FROM workflow_schedule_claims WHERE scheduled_for = {p.add(instant)}"
        f" AND {p.in_list('workflow_id', workflow_ids, 'text')}",
        p.values,
    )
    return {str(r[0]) for r in rows}


async def workflows_by_id_txn(conn: Conn, workflow_ids: list[str]) -> list[WorkflowRow]:
    p = Params(conn.dialect)
    rows = await conn.fetch(
        f"SELECT {', '.join(_WF_COLUMNS)} FROM workflows WHERE {p.in_list('id', workflow_ids, 'text')}",
        p.values,
    )
    return [_workflow(r) for r in rows]


async def write_many_txn(conn: Conn, writes: list[WorkflowWrite], now: int) -> list[bool]:
    """Several new runs in one transaction; a write whose claim was taken is skipped alone. The
    events of the rest are inserted as one bulk run (a statement per table, not per event)."""
    from buzz.store.bulk import insert_many_txn  # bulk imports writes, which imports this module
    from buzz.store.jobs import relay_job_effects

    simple = all(w.claim is not None and w.claim.table == "schedule" and len(w.runs) == 1 and not w.steps
                 and w.workflow is None and w.swap is None and w.approval is None and w.lease is None
                 and not w.cancel_approvals for w in writes)  # fmt: skip
    done = (
        await _new_runs_txn(conn, writes, now) if simple else [await _rows_txn(conn, w, now) for w in writes]
    )
    events = [stored for w, ok in zip(writes, done, strict=True) if ok for stored in w.events]
    if events:
        await insert_many_txn(conn, [(stored, relay_job_effects(stored)) for stored in events], now)
    return done


async def _new_runs_txn(conn: Conn, writes: list[WorkflowWrite], now: int) -> list[bool]:
    """Scheduled runs, each with its claim: one multi-row INSERT of the claims (those another
    replica holds already are skipped, `ON CONFLICT DO NOTHING`), one of the runs claimed."""
    p = Params(conn.dialect)
    rows = ", ".join(
        f"({p.add(w.claim.workflow_id)}, {p.add(int(w.claim.key))}, {p.add(now)}, {p.add(w.claim.run_id)})"  # type: ignore[union-attr]
        for w in writes
    )
    claimed = await conn.fetch(
        "INSERT INTO workflow_schedule_claims (workflow_id, scheduled_for, claimed_at, run_id)"
        f" VALUES {rows} ON CONFLICT (workflow_id, scheduled_for) DO NOTHING RETURNING run_id",
        p.values,
    )
    won = {str(r[0]) for r in claimed}
    runs = [w.runs[0] for w in writes if w.runs[0].id in won]
    if runs:
        p = Params(conn.dialect)
        values = ", ".join("(" + ", ".join(p.add(getattr(r, c)) for c in _RUN_COLUMNS) + ")" for r in runs)
        await conn.execute(f"INSERT INTO workflow_runs ({', '.join(_RUN_COLUMNS)}) VALUES {values}", p.values)
    return [w.runs[0].id in won for w in writes]


async def start_facts_txn(
    conn: Conn, channel_ids: list[str], owners: list[str]
) -> tuple[Any, Any, frozenset[str]]:
    """What `Engine.may_start` reads, for many workflows in three statements (the scheduler's
    batch): {channel id: Channel} (not deleted), {(channel id, pubkey): Member} of `owners`
    in `channel_ids`, and the banned among `owners`."""
    from buzz.store.base import Channel, Member
    from buzz.store.operator import banned_among_txn
    from buzz.store.reads import _CHANNEL_FIELDS, _MEMBER_FIELDS

    p = Params(conn.dialect)
    rows = await conn.fetch(
        f"SELECT {', '.join(_CHANNEL_FIELDS)} FROM channels WHERE {p.in_list('id', channel_ids, 'text')}"
        " AND deleted_at IS NULL",
        p.values,
    )
    channels = {c.id: c for c in (Channel(**dict(zip(_CHANNEL_FIELDS, r, strict=True))) for r in rows)}
    p = Params(conn.dialect)
    rows = await conn.fetch(
        f"SELECT {', '.join(_MEMBER_FIELDS)} FROM channel_members WHERE {p.in_list('channel_id', channel_ids, 'text')}"
        f" AND {p.in_list('pubkey', owners, 'text')}",
        p.values,
    )
    members = {
        (m.channel_id, m.pubkey): m
        for m in (Member(**dict(zip(_MEMBER_FIELDS, r, strict=True))) for r in rows)
    }
    return channels, members, await banned_among_txn(conn, owners)


async def get_workflow_txn(conn: Conn, workflow_id: str) -> WorkflowRow | None:
    p = Params(conn.dialect)
    rows = await conn.fetch(f"SELECT {', '.join(_WF_COLUMNS)} FROM workflows WHERE id = {p.add(workflow_id)}",
                            p.values)  # fmt: skip
    return _workflow(rows[0]) if rows else None


async def workflows_txn(
    conn: Conn, channel_id: str | None, trigger_on: str | None, after_id: str, limit: int
) -> list[WorkflowRow]:
    """Live workflows (not deleted) of a channel and/or a trigger type, by id after `after_id`."""
    p = Params(conn.dialect)
    clauses = ["status <> 'deleted'", f"id > {p.add(after_id)}"]
    if channel_id is not None:
        clauses.append(f"channel_id = {p.add(channel_id)}")
    if trigger_on is not None:
        clauses.append(f"trigger_on = {p.add(trigger_on)}")
    rows = await conn.fetch(
        f"SELECT {', '.join(_WF_COLUMNS)} FROM workflows WHERE {' AND '.join(clauses)}"
        f" ORDER BY id LIMIT {p.add(limit)}",
        p.values,
    )
    return [_workflow(r) for r in rows]


async def get_run_txn(conn: Conn, run_id: str) -> tuple[RunRow, list[StepRow]] | None:
    p = Params(conn.dialect)
    rows = await conn.fetch(f"SELECT {', '.join(_RUN_COLUMNS)} FROM workflow_runs WHERE id = {p.add(run_id)}",
                            p.values)  # fmt: skip
    if not rows:
        return None
    p = Params(conn.dialect)
    steps = await conn.fetch(
        f"SELECT run_id, idx, data FROM workflow_steps WHERE run_id = {p.add(run_id)} ORDER BY idx", p.values
    )
    return _run(rows[0]), [StepRow(str(s[0]), int(s[1]), str(s[2])) for s in steps]


async def list_runs_txn(
    conn: Conn, workflow_id: str, before: tuple[int, str] | None, limit: int
) -> list[RunRow]:
    """Runs of a workflow newest first, keyset `(created_at DESC, id DESC)` (§15 item 3)."""
    p = Params(conn.dialect)
    where = f"workflow_id = {p.add(workflow_id)}"
    if before is not None:
        t, i = p.add(before[0]), p.add(before[1])
        where += f" AND (created_at < {t} OR (created_at = {t} AND id < {i}))"
    rows = await conn.fetch(
        f"SELECT {', '.join(_RUN_COLUMNS)} FROM workflow_runs WHERE {where}"
        f" ORDER BY created_at DESC, id DESC LIMIT {p.add(limit)}",
        p.values,
    )
    return [_run(r) for r in rows]


async def take_runs_txn(conn: Conn, owner: str, now: int, lease_s: int, limit: int,
                        run_id: str | None = None, force: bool = False) -> list[str]:  # fmt: skip
    """Lease up to `limit` runs that need a replica (§11.2 item 2): pending ones in queue order,
    running ones whose lease lapsed, waiting ones whose `wake_at` passed. With `run_id`, only
    that run (`force`: also when it waits for a later time). Returns the ids now leased to `owner` until `now + lease_s`."""
    p = Params(conn.dialect)
    free = f"(lease_until IS NULL OR lease_until < {p.add(now)})"
    due = f"(status IN ('pending', 'running') OR (status IN ('waiting', 'waiting_approval') AND wake_at <= {p.add(now)}))"
    if force:  # an answer arrived for a waiting run (a job result): take it whatever its wake_at
        due = "status NOT IN ('completed', 'failed', 'cancelled')"
    only = f" AND id = {p.add(run_id)}" if run_id is not None else ""
    rows = await conn.fetch(
        f"SELECT id FROM workflow_runs WHERE {free} AND {due}{only}"
        f" ORDER BY created_at, id LIMIT {p.add(limit)}{_lock(conn)}",
        p.values,
    )
    ids = [str(r[0]) for r in rows]
    if ids:
        p = Params(conn.dialect)
        await conn.execute(
            f"UPDATE workflow_runs SET lease_owner = {p.add(owner)}, lease_until = {p.add(now + lease_s)}"
            f" WHERE {p.in_list('id', ids, 'text')}",
            p.values,
        )
    return ids


async def renew_leases_txn(conn: Conn, owner: str, run_ids: list[str], until: int) -> None:
    if not run_ids:
        return
    p = Params(conn.dialect)
    await conn.execute(
        f"UPDATE workflow_runs SET lease_until = {p.add(until)}"
        f" WHERE lease_owner = {p.add(owner)} AND {p.in_list('id', run_ids, 'text')}",
        p.values,
    )


async def release_lease_txn(conn: Conn, owner: str, run_id: str) -> None:
    p = Params(conn.dialect)
    await conn.execute(
        "UPDATE workflow_runs SET lease_owner = NULL, lease_until = NULL"
        f" WHERE id = {p.add(run_id)} AND lease_owner = {p.add(owner)}",
        p.values,
    )


async def release_all_txn(conn: Conn) -> None:
    await conn.execute(
        "UPDATE workflow_runs SET lease_owner = NULL, lease_until = NULL WHERE lease_owner IS NOT NULL"
    )


async def count_runs_txn(conn: Conn, status: str) -> int:
    p = Params(conn.dialect)
    rows = await conn.fetch(f"SELECT COUNT(*) FROM workflow_runs WHERE status = {p.add(status)}", p.values)
    return int(rows[0][0])


async def started_runs_txn(conn: Conn, workflow_id: str) -> int:
    """Runs of the workflow that started and have not ended (a workflow's `max_concurrent`)."""
    p = Params(conn.dialect)
    rows = await conn.fetch(
        f"SELECT COUNT(*) FROM workflow_runs WHERE workflow_id = {p.add(workflow_id)}"
        " AND status IN ('running', 'waiting', 'waiting_approval')",
        p.values,
    )
    return int(rows[0][0])


async def active_runs_txn(conn: Conn, workflow_id: str) -> list[str]:
    """Ids of the workflow's non-terminal runs (cancelled when it is deleted, §6.6 item 4)."""
    p = Params(conn.dialect)
    rows = await conn.fetch(
        f"SELECT id FROM workflow_runs WHERE workflow_id = {p.add(workflow_id)}"
        " AND status NOT IN ('completed', 'failed', 'cancelled') ORDER BY created_at, id",
        p.values,
    )
    return [str(r[0]) for r in rows]


async def suspend_workflows_txn(conn: Conn, owner: str, channel_id: str | None) -> None:
    """workflows.md §6.7 item 1: an owner who stops being an active member (removed, left,
    banned: `channel_id` None) suspends their workflows there, in the same transaction."""
    p = Params(conn.dialect)
    where = f"owner = {p.add(owner)} AND status = 'active'"
    if channel_id is not None:
        where += f" AND channel_id = {p.add(channel_id)}"
    await conn.execute(f"UPDATE workflows SET status = 'suspended' WHERE {where}", p.values)


class WorkflowStoreMixin:
    """The workflow methods of `SqlStore` (the backends' `_write` / `_read` / `_point_read`)."""

    _write: Any
    _read: Any
    _point_read: Any

    async def workflow_write(self, write: WorkflowWrite, now: int) -> bool:
        """Commit one engine transition; see `workflow_write_txn`."""
        return bool(await self._write(workflow_write_txn, write, now))

    async def workflow_write_many(self, writes: list[WorkflowWrite], now: int) -> list[bool]:
        """New runs (the scheduler's batch) in one transaction; see `write_many_txn`."""
        return list(await self._write(write_many_txn, writes, now))

    async def workflow_last_claims(self, workflow_ids: list[str]) -> dict[str, int]:
        return await self._read(last_claims_txn, workflow_ids) if workflow_ids else {}

    async def workflow_claimed_among(self, workflow_ids: list[str], instant: int) -> set[str]:
        return await self._read(claimed_among_txn, workflow_ids, instant) if workflow_ids else set()

    async def workflows_by_id(self, workflow_ids: list[str]) -> list[WorkflowRow]:
        return await self._read(workflows_by_id_txn, workflow_ids) if workflow_ids else []

    async def workflow_start_facts(
        self, channel_ids: list[str], owners: list[str]
    ) -> tuple[Any, Any, frozenset[str]]:
        """See `start_facts_txn`."""
        if not channel_ids or not owners:
            return {}, {}, frozenset()
        return await self._read(start_facts_txn, sorted(set(channel_ids)), sorted(set(owners)))

    async def workflow(self, workflow_id: str) -> WorkflowRow | None:
        return await self._point_read(get_workflow_txn, workflow_id)

    async def workflows(self, *, channel_id: str | None = None, trigger_on: str | None = None,
                        after_id: str = "", limit: int = 500) -> list[WorkflowRow]:  # fmt: skip
        return await self._read(workflows_txn, channel_id, trigger_on, after_id, limit)

    async def workflow_run(self, run_id: str) -> tuple[RunRow, list[StepRow]] | None:
        return await self._read(get_run_txn, run_id)

    async def workflow_runs(
        self, workflow_id: str, before: tuple[int, str] | None, limit: int
    ) -> list[RunRow]:
        return await self._read(list_runs_txn, workflow_id, before, limit)

    async def workflow_take_runs(self, owner: str, now: int, lease_s: int, limit: int,
                                 run_id: str | None = None, force: bool = False) -> list[str]:  # fmt: skip
        return await self._write(take_runs_txn, owner, now, lease_s, limit, run_id, force)

    async def workflow_renew_leases(self, owner: str, run_ids: list[str], until: int) -> None:
        await self._write(renew_leases_txn, owner, sorted(run_ids), until)

    async def workflow_release(self, owner: str, run_id: str) -> None:
        await self._write(release_lease_txn, owner, run_id)

    async def workflow_release_all(self) -> None:
        """Drop every lease: on a database only this process uses (SQLite), leases found at
        start belong to a dead process (§11.2 item 3)."""
        await self._write(release_all_txn)

    async def workflow_count_runs(self, status: str) -> int:
        return await self._read(count_runs_txn, status)

    async def workflow_started_runs(self, workflow_id: str) -> int:
        return await self._read(started_runs_txn, workflow_id)

    async def workflow_active_runs(self, workflow_id: str) -> list[str]:
        return await self._read(active_runs_txn, workflow_id)

    async def workflow_prune_candidates(
        self, before: int, after: tuple[int, str], limit: int
    ) -> list[RunRow]:
        from buzz.store.workflow_retention import prune_candidates_txn  # it reads this module's rows

        return await self._read(prune_candidates_txn, before, after, limit)

    async def workflow_prune(self, run_ids: list[str], claims_before: int, keys_before: int) -> int:
        from buzz.store.workflow_retention import prune_txn

        return int(await self._write(prune_txn, run_ids, claims_before, keys_before))

    async def workflow_holds_lease(self, run_id: str, owner: str) -> bool:
        return await self._read(holds_lease_txn, run_id, owner)

    async def workflow_claimed_run(self, table: str, workflow_id: str, key: str) -> str | None:
        return await self._read(claimed_run_txn, table, workflow_id, key)

    async def workflow_last_claim(self, workflow_id: str) -> int | None:
        return await self._read(last_claim_txn, workflow_id)

    async def workflow_approval(self, reference: str | None = None,
                                request_event_id: str | None = None) -> ApprovalRow | None:  # fmt: skip
        return await self._read(get_approval_txn, reference, request_event_id)

    async def workflow_run_approvals(self, run_id: str) -> list[ApprovalRow]:
        return await self._read(run_approvals_txn, run_id)

    async def workflow_due_approvals(self, now: int, limit: int = 100) -> list[ApprovalRow]:
        return await self._read(due_approvals_txn, now, limit)


__all__ = ["LeaseLost", "WorkflowStoreMixin", "workflow_write_txn"]
