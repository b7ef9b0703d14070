"""The job rows (jobs spec §5.3 item 6): one row per 43001, moved by its lifecycle events in
the same transaction as their insert, on both backends.

The store knows nothing of the job state machine. An `AdvanceJob` effect carries, as data,
the states its event is refused in (with the reason) and whether its `seq` must increase; the
row is read under a lock (PostgreSQL `FOR UPDATE`; SQLite has one writer) and checked against
that table before it changes. So two racing 43002 for one job commit one acceptance, and the
loser is refused with the reason the relay would have given (`JobConflict`).
"""

from __future__ import annotations

from buzz.core.stored import StoredEvent
from buzz.store.base import AdvanceJob, Effect, JobConflict, JobRow, OpenJob
from buzz.store.dialect import Conn, Params

_COLUMNS = "id, channel_id, requester, assignee, state, last_seq, disposition, parent, created_at, updated_at"


def _row(values: object) -> JobRow:
    r = list(values)  # type: ignore[call-overload]
    return JobRow(
        id=r[0],
        channel_id=r[1],
        requester=r[2],
        assignee=r[3],
        state=r[4],
        last_seq=int(r[5]),
        disposition=r[6],
        parent=r[7],
        created_at=int(r[8]),
        updated_at=int(r[9]),
    )


async def open_job_txn(conn: Conn, effect: OpenJob) -> None:
    p = Params(conn.dialect)
    values = ", ".join(
        p.add(v)
        for v in (
            effect.job_id,
            effect.channel_id,
            effect.requester,
            effect.assignee,
            "requested",
            0,
            None,
            effect.parent,
            effect.created_at,
            effect.created_at,
        )
    )
    await conn.execute(
        f"INSERT INTO jobs ({_COLUMNS}) VALUES ({values}) ON CONFLICT (id) DO NOTHING", p.values
    )


async def advance_job_txn(conn: Conn, effect: AdvanceJob, now: int) -> None:
    p = Params(conn.dialect)
    lock = " FOR UPDATE" if conn.dialect.name == "postgres" else ""
    rows = await conn.fetch(
        f"SELECT state, last_seq FROM jobs WHERE id = {p.add(effect.job_id)}{lock}", p.values
    )
    if not rows:
        if effect.lenient:
            return
        raise JobConflict("job not found")
    state, last_seq = rows[0][0], int(rows[0][1])
    reason = dict(effect.refusals).get(state)
    if reason is not None:
        if effect.lenient:
            return
        raise JobConflict(reason)
    if effect.seq is not None and effect.seq <= last_seq:
        raise JobConflict(effect.seq_refusal)
    p = Params(conn.dialect)
    sets = [f"state = {p.add(effect.state)}", f"updated_at = {p.add(max(now, effect.at))}"]
    if effect.seq is not None:
        sets.append(f"last_seq = {p.add(effect.seq)}")
    if effect.disposition is not None:
        sets.append(f"disposition = {p.add(effect.disposition)}")
    await conn.execute(f"UPDATE jobs SET {', '.join(sets)} WHERE id = {p.add(effect.job_id)}", p.values)


# jobs spec §5.2: the states a job ends in (the one fact of the state machine the relay's own
# writes need here: a workflow's cancel of a job that already ended changes nothing).
ENDED_STATES = ("completed", "failed", "cancelled")


def relay_job_effects(stored: StoredEvent) -> tuple[Effect, ...]:
    """The job-row effects of a job event the relay writes itself, outside the ingest rules (a
    workflow's `ask_agent` 43001 opens its job, its 43005 cancels a job still open; decision
    212). Other events: none."""
    event = stored.event
    channel = stored.channel_id or event.first_tag("h")
    if event.kind == 43001 and channel is not None:
        assignee = event.first_tag("p")
        if assignee is None:
            return ()
        requester = event.first_tag("actor") or event.pubkey
        return (
            OpenJob(
                event.id,
                channel,
                requester,
                assignee,
                event.first_tag("parent-job"),
                event.created_at,
            ),
        )
    if event.kind == 43005:
        job = next((t[1] for t in event.tags if t[0] == "e" and len(t) >= 4 and t[3] == "reply"), None)
        if job is not None:
            refusals = tuple((state, f"job is {state}") for state in ENDED_STATES)
            return (AdvanceJob(job, "cancelled", refusals, event.created_at, lenient=True),)
    return ()


async def job_txn(conn: Conn, job_id: str) -> JobRow | None:
    p = Params(conn.dialect)
    rows = await conn.fetch(f"SELECT {_COLUMNS} FROM jobs WHERE id = {p.add(job_id)}", p.values)
    return _row(rows[0]) if rows else None


async def parent_depth_txn(conn: Conn, job_id: str, most: int) -> int:
    """How many jobs the parent chain starting at `job_id` holds (itself included), counting
    at most `most` + 1 (enough to tell "too deep")."""
    depth, current = 0, job_id
    while current is not None and depth <= most:
        p = Params(conn.dialect)
        rows = await conn.fetch(f"SELECT parent FROM jobs WHERE id = {p.add(current)}", p.values)
        if not rows:
            break
        depth += 1
        current = rows[0][0]
    return depth
