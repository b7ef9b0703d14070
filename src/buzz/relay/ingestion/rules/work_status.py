"""Agent work status, kind 30181, at ingest (jobs spec §12.2): after the write gate and the
archived check of its channel (needs-h in the kind table), the `d` and content rules of the
pure core (`buzz.jobs.work_status.check`). Reads are the channel's: the kind has no gate set
of its own, so every read path shows it exactly to the channel's readers."""

from __future__ import annotations

from buzz.jobs import work_status
from buzz.jobs.limits import KIND_AGENT_WORK_STATUS
from buzz.relay.auth.session import Session
from buzz.relay.ingestion.rules.base import KindRules, Plan, Validator


async def agent_work_status(rules: KindRules, plan: Plan, session: Session) -> None:
    work_status.check(plan.stored.event)


VALIDATORS: dict[int, Validator] = {KIND_AGENT_WORK_STATUS: agent_work_status}
