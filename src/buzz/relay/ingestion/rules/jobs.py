"""Job kinds 43001–43006 at ingest (jobs spec §5.3), after the write gate and the archived
check: thin glue over the pure core `buzz.jobs` (tags, contents, signers, transitions).

In order, the first failure wins:

1. tag shape: `invalid: job <what>: <reason>`;
2. a lifecycle event names a job opened by a 43001 in this channel (deleted or not), else
   `invalid: job not found`; a 43001 names an agent member of the channel (an active member
   with a registered owner), a parent job in the channel and a chain of at most 8 jobs;
3. the signer (§5.1): `restricted:` for updates and cancels, `invalid:` for a self-request;
4. the content (§3.3, §4) and the `p` of 43004/43006 (the requester) and 43005 (the assignee);
5. the state (§5.2), checked here and again under the job row's lock in the insert
   (`AdvanceJob`), so concurrent events cannot both pass;
6. at most one 43003 per second per job: `rate-limited:`.

Lifecycle events are stored as depth-1 replies of their 43001 (its thread position is recorded
here, in place of the generic thread rule, since the 43001 may be deleted).
"""

from __future__ import annotations

import weakref

from buzz.core.channel_id import is_channel_id
from buzz.core.errors import Invalid, RateLimited, Refusal
from buzz.core.stored import StoredEvent
from buzz.jobs import limits as L
from buzz.jobs import machine
from buzz.jobs.wire import P_NAMES, check_content, parse_tags, prefix
from buzz.relay.auth.session import Session
from buzz.relay.ingestion.ratelimit import SlidingWindow
from buzz.relay.ingestion.rules.base import KindRules, Plan, Validator
from buzz.relay.ingestion.rules.membership import active_member, is_elevated
from buzz.store.base import AdvanceJob, JobRow, OpenJob, RecordThread

JOB_NOT_FOUND = Refusal(Invalid, "job not found")
NOT_AN_AGENT = Refusal(Invalid, "job request: target is not an agent member of this channel")
PROGRESS_RATE = Refusal(RateLimited, "job progress rate exceeded (1/sec per job)")
# The lifecycle kinds place themselves in their job's thread (the generic rule would refuse a
# deleted 43001 as parent): `buzz.relay.ingestion.rules` does not wrap them.
OWN_THREAD_KINDS = L.LIFECYCLE_KINDS

_WINDOWS: weakref.WeakKeyDictionary[KindRules, SlidingWindow] = weakref.WeakKeyDictionary()


def _progress_window(rules: KindRules) -> SlidingWindow:
    window = _WINDOWS.get(rules)
    if window is None:
        window = _WINDOWS[rules] = SlidingWindow(L.PROGRESS_RELAY_RATE, 1.0)
    return window


async def request(rules: KindRules, plan: Plan, session: Session) -> None:
    """43001."""
    event, channel_id = plan.stored.event, plan.stored.channel_id
    assert channel_id is not None  # needs-h: derivation refused an event without h
    relay_signed = event.pubkey == rules.relay_pubkey
    tags = parse_tags(event, relay_signed=relay_signed)
    assert tags.p is not None
    if await active_member(rules, channel_id, tags.p) is None or await rules.registered_owner(tags.p) is None:
        raise NOT_AN_AGENT()
    if tags.parent is not None:
        parent = await rules.store.get_job(tags.parent)
        if parent is None or parent.channel_id != channel_id:
            raise Invalid("job request: parent job not found")
        if await rules.store.job_chain_depth(tags.parent, L.JOB_MAX_DEPTH) + 1 > L.JOB_MAX_DEPTH:
            raise Invalid("job request: delegation too deep")
    requester = machine.requester_of(event, rules.relay_pubkey)
    if requester == tags.p or event.pubkey == tags.p:
        raise Invalid(machine.SELF_REQUEST)
    check_content(event, tags)
    plan.effects.append(OpenJob(event.id, channel_id, requester, tags.p, tags.parent, event.created_at))


def _job(row: JobRow) -> machine.Job:
    return machine.Job(
        id=row.id,
        channel_id=row.channel_id,
        requester=row.requester,
        assignee=row.assignee,
        state=machine.State(row.state),
        created_at=row.created_at,
        updated_at=row.updated_at,
        parent=row.parent,
        last_seq=row.last_seq,
        disposition=row.disposition,
    )


async def lifecycle(rules: KindRules, plan: Plan, session: Session) -> None:
    """43002–43006."""
    event, channel_id = plan.stored.event, plan.stored.channel_id
    assert channel_id is not None
    tags = parse_tags(event)
    assert tags.job_id is not None
    row = await rules.store.get_job(tags.job_id)
    if row is None or row.channel_id != channel_id:
        raise JOB_NOT_FOUND()
    job = _job(row)
    signer = event.pubkey
    if event.kind == L.KIND_JOB_CANCEL:
        relay_signed = False
        if signer == rules.relay_pubkey:
            request_event = await rules.store.get(job.id, include_deleted=True)
            relay_signed = request_event is not None and request_event.event.pubkey == rules.relay_pubkey
        job = machine.Job(**{**_fields(job), "relay_signed": relay_signed})
        machine.check_signer(
            job,
            event.kind,
            signer,
            assignee_owner=await rules.registered_owner(job.assignee),
            channel_elevated=is_elevated(await active_member(rules, channel_id, signer)),
            relay_pubkey=rules.relay_pubkey,
        )
    else:
        machine.check_signer(job, event.kind, signer)
    body = check_content(event, tags)
    party = P_NAMES.get(event.kind)
    if party is not None and tags.p != (job.requester if party == "requester" else job.assignee):
        raise Invalid(f"{prefix(event.kind)}: p tag must name the {party}")
    machine.apply(job, event, body)  # the state, as it stands now (raises Invalid)
    if event.kind == L.KIND_JOB_PROGRESS and not _progress_window(rules).allow(job.id):
        raise PROGRESS_RATE()
    _, new_state = machine.TRANSITIONS[event.kind]
    plan.effects.append(
        AdvanceJob(
            job.id,
            new_state.value,
            machine.refusals(event.kind),
            event.created_at,
            seq=body["seq"] if event.kind == L.KIND_JOB_PROGRESS else None,
            seq_refusal=machine.SEQ_REFUSAL,
            disposition=tags.disposition,
        )
    )
    plan.effects.append(RecordThread(event.id, job.id, job.id, 1))


async def relay_signed(rules: KindRules, stored: StoredEvent) -> Plan:
    """The plan of a job event the relay itself signs (a workflow's `ask_agent` 43001 with its
    `actor`, or its 43005; jobs spec §3.1, workflows.md §8.8): the job rules of this module,
    without the client write gate (the relay is no member). Insert `plan.stored` with
    `plan.effects` (the job row is opened or moved in the same transaction), then fan it out.
    Raises the refusal a client would get (Invalid / Restricted)."""
    if stored.event.pubkey != rules.relay_pubkey or stored.event.kind not in VALIDATORS:
        raise ValueError("relay_signed takes the relay's own job events")
    channel = next((h for h in stored.event.tag_values("h") if is_channel_id(h)), None)
    if channel is None:
        raise Invalid("channel-scoped events must include an h tag")
    plan = Plan(stored.with_channel(channel))
    await VALIDATORS[stored.event.kind](rules, plan, RELAY_SESSION)
    return plan


def _fields(job: machine.Job) -> dict[str, object]:
    return {name: getattr(job, name) for name in machine.Job.__slots__}  # type: ignore[attr-defined]


RELAY_SESSION: Session = None  # type: ignore[assignment]  # the job rules never read the session

VALIDATORS: dict[int, Validator] = {
    L.KIND_JOB_REQUEST: request,
    **dict.fromkeys(L.LIFECYCLE_KINDS, lifecycle),
}
