"""The harness takes jobs (jobs spec §6, checklist items 27–38): a real relay, a real harness
and the rules agent as a real ACP subprocess. Each job is claimed like a mention, accepted at
once, reported as it progresses, and ends with exactly one result or failure."""

from __future__ import annotations

import asyncio
import json
import os
import signal

from buzz.agent.claims import DONE
from buzz.core.event import Event
from buzz.core.nip19 import npub
from buzz.jobs import build
from tests.agent.support import EYES, SPEECH, Workspace, add_member, publish
from tests.agent.test_harness_claim_lease import LEASE, _claim, _harness_process, _until_done
from tests.support.deadline import scaled
from tests.support.relay import Identity


async def _ask(ws: Workspace, who: Identity, instructions: str, **kw: object) -> Event:
    import time

    t = build.request(ws.channel, ws.agent.pubkey, prompt=instructions, created_at=int(time.time()), **kw)  # type: ignore[arg-type]
    event = Event.create(who.secret, t.kind, t.content, t.tags)
    if who == ws.owner:
        return await publish(ws.owner_client, event)
    async with ws.relay.client(who) as c:
        return await publish(c, event)


def _of(ws: Workspace, job: Event, kind: int) -> list[Event]:
    return [e for e in ws.watcher.of(kind, ws.agent.pubkey) if job.id in e.tag_values("e")]


def _ended(ws: Workspace, job: Event):
    return lambda e: e.kind in (43004, 43006) and e.pubkey == ws.agent.pubkey and job.id in e.tag_values("e")


async def test_a_job_is_accepted_reported_and_answered(ws: Workspace) -> None:
    async with ws.harness(job_progress_interval=1.0):
        job = await _ask(ws, ws.owner, "summarise the week")
        end = await ws.watcher.wait_for(_ended(ws, job), timeout=30, what="the job's end")
        await _until_done(ws, job)
    assert end.kind == 43004
    result = json.loads(end.content)
    assert (result["disposition"], result["outcome"], result["artifacts"]) == (
        "no_artifact",
        "done: summarise the week",
        [],
    )
    assert end.tag_values("p") == [ws.owner.pubkey] and end.first_tag("disposition") == "no_artifact"
    assert len(_of(ws, job, 43002)) == 1
    progress = [json.loads(e.content) for e in _of(ws, job, 43003)]
    assert progress and [p["seq"] for p in progress] == list(range(1, len(progress) + 1))
    assert any(p.get("plan") for p in progress)
    assert all(
        "/notes/secret.txt" not in json.dumps(p) and os.path.expanduser("~") not in p["message"]
        for p in progress
    )
    # 👀 while queued, 💬 while working, both removed at the end
    reactions = [e for e in ws.watcher.of(7, ws.agent.pubkey) if e.tag_values("e") == [job.id]]
    assert {r.content for r in reactions} == {EYES, SPEECH}
    removed = {t for e in ws.watcher.of(5, ws.agent.pubkey) for t in e.tag_values("e")}
    assert {r.id for r in reactions} <= removed
    # its own session, never the channel's
    prompts = [r for r in ws.records("prompt") if any("[Buzz job]" in b for b in r["blocks"])]
    assert len(prompts) == 1 and all("[Buzz event" not in b for b in prompts[0]["blocks"])


async def test_an_agent_that_hands_off_leaves_one_result(ws: Workspace) -> None:
    async with ws.harness():
        job = await _ask(ws, ws.owner, "handoff")
        end = await ws.watcher.wait_for(_ended(ws, job), timeout=30, what="the handoff")
        await _until_done(ws, job)
    assert end.kind == 43004 and json.loads(end.content)["artifacts"][0]["reference"] == "OUTBOX/result.txt"
    assert len(_of(ws, job, 43004)) == 1 and _of(ws, job, 43006) == []


async def test_silence_and_failures_end_in_agent_error(ws: Workspace) -> None:
    async with ws.harness(max_attempts=2, retry_backoff=0.2):
        silent = await _ask(ws, ws.owner, "silent")
        failing = await _ask(ws, ws.owner, "fail")
        for job in (silent, failing):
            await ws.watcher.wait_for(_ended(ws, job), timeout=40, what="the job's failure")
            await _until_done(ws, job)
    (no_result,) = _of(ws, silent, 43006)
    assert json.loads(no_result.content)["code"] == "agent_error"
    assert json.loads(no_result.content)["message"] == "the agent produced no result"
    (failed,) = _of(ws, failing, 43006)
    assert json.loads(failed.content)["message"] == "the agent failed on every attempt"
    assert any("retrying, attempt 2" in e.content for e in _of(ws, failing, 43003))
    assert _of(ws, failing, 43004) == []


async def test_a_stranger_is_declined_with_a_reason(ws: Workspace, bob: Identity) -> None:
    await add_member(ws.owner_client, ws.owner, ws.channel, bob.pubkey)
    async with ws.harness():
        job = await _ask(ws, bob, "do my homework")
        end = await ws.watcher.wait_for(_ended(ws, job), timeout=30, what="the decline")
        await _until_done(ws, job)
    body = json.loads(end.content)
    assert end.kind == 43006 and body["code"] == "declined"
    assert (
        body["message"].startswith("this agent does not take jobs from you") and "Olivia" in body["message"]
    )
    # the owner's one command that lets this requester in (issue 27 item 3)
    assert f"--respond-to allowlist --allow {npub(bob.pubkey)}`" in body["message"], body["message"]
    assert _of(ws, job, 43002) == [] and not [r for r in ws.records("job")]


async def test_a_cancel_stops_the_running_job_and_nothing_follows(ws: Workspace) -> None:
    async with ws.harness():
        job = await _ask(ws, ws.owner, "sleep 30")
        await ws.watcher.wait_for(
            lambda e: e.kind == 7 and e.content == SPEECH and e.tag_values("e") == [job.id], what="💬"
        )
        cancel = build.cancel(ws.channel, job.id, ws.agent.pubkey, reason="not needed")
        await publish(
            ws.owner_client, Event.create(ws.owner.secret, cancel.kind, cancel.content, cancel.tags)
        )
        await _until_done(ws, job)
    assert [r["type"] for r in ws.records() if r.get("job") == job.id] == ["job", "cancelled"]
    assert _of(ws, job, 43004) == [] and _of(ws, job, 43006) == []


async def test_a_deadline_ends_the_job_with_timeout(ws: Workspace) -> None:
    async with ws.harness():
        job = await _ask(ws, ws.owner, "sleep 30", deadline=int(__import__("time").time()) + 2)
        end = await ws.watcher.wait_for(_ended(ws, job), timeout=30, what="the timeout")
        await _until_done(ws, job)
    assert end.kind == 43006 and json.loads(end.content)["code"] == "timeout"


async def test_two_harnesses_take_a_job_once(ws: Workspace) -> None:
    async with ws.harness(claim_lease=LEASE), ws.harness(claim_lease=LEASE):
        jobs = [await _ask(ws, ws.owner, f"job number {i}") for i in range(3)]
        for job in jobs:
            await ws.watcher.wait_for(_ended(ws, job), timeout=40, what="the job's end")
            await _until_done(ws, job)
    for job in jobs:
        assert (len(_of(ws, job, 43002)), len(_of(ws, job, 43004)), len(_of(ws, job, 43006))) == (1, 1, 0)
    assert len(ws.records("job")) == 3


async def test_a_harness_killed_mid_job_is_replaced_and_the_job_ends_once(ws: Workspace) -> None:
    log = ws.tmp / "harness.log"
    async with _harness_process(ws, log) as first:
        await ws.next_second()
        job = await _ask(ws, ws.owner, "sleep 3")
        for _ in range(400):
            if any(r.get("job") == job.id for r in ws.records("job")):
                break
            await asyncio.sleep(0.05)
        os.killpg(first.pid, signal.SIGKILL)  # the harness and its agent die mid-job
        await first.wait()
    async with _harness_process(ws, log) as second:
        end = await ws.watcher.wait_for(_ended(ws, job), timeout=60, what="the job's end after the restart")
        await _until_done(ws, job)
        second.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(second.wait(), scaled(30)) == 0, log.read_text()
    assert end.kind == 43004 and json.loads(end.content)["outcome"] == "slept 3"
    assert (len(_of(ws, job, 43002)), len(_of(ws, job, 43004)), len(_of(ws, job, 43006))) == (1, 1, 0), (
        log.read_text()
    )
    assert (
        len([r for r in ws.records("job") if r["job"] == job.id]) == 2
    )  # killed once, finished by the restart
    assert (await _claim(ws, job) or ("", 0))[0] == DONE


async def test_a_job_claimed_and_never_accepted_is_seized_without_waiting_a_lease(ws: Workspace) -> None:
    """A harness killed between its claim and its 43002 leaves a claim with no acceptance: a
    standby seizes it after the accept grace (decision 371), not a lease later (600 s here)."""
    import time

    from buzz.agent.claims import CLAIMED, claim_event

    async with ws.harness(claim_lease=600):
        now = int(time.time())
        t = build.request(ws.channel, ws.agent.pubkey, prompt="echo seized", created_at=now)
        job = Event.create(ws.owner.secret, t.kind, t.content, t.tags, created_at=now)
        async with ws.relay.client(ws.agent, auth_tags=[ws.auth_tag]) as agent:  # the dead holder's
            await publish(agent, claim_event(ws.agent.secret, job.id, job.created_at, CLAIMED))
        await publish(ws.owner_client, job)  # live: the standby's own claim is the same event
        end = await ws.watcher.wait_for(_ended(ws, job), timeout=90, what="the seized job's end")
        await _until_done(ws, job)
    assert end.kind == 43004
    assert (len(_of(ws, job, 43002)), len(_of(ws, job, 43004)), len(_of(ws, job, 43006))) == (1, 1, 0)


async def test_a_failing_job_does_not_hold_its_channel_and_gives_up_after_three_attempts(
    ws: Workspace,
) -> None:
    """Decision 372: a job waits out its retry backoff aside (the next job of the channel runs
    meanwhile), and fails after JOB_MAX_ATTEMPTS in all whatever `--max-attempts` allows."""
    async with ws.harness(retry_backoff=20):  # --max-attempts stays 10
        failing = await _ask(ws, ws.owner, "fail")
        await ws.watcher.wait_for(
            lambda e: e.kind == 43003 and failing.id in e.tag_values("e") and "retrying" in e.content,
            timeout=60,
            what="the first retry notice",
        )
        other = await _ask(ws, ws.owner, "echo meanwhile")
        await ws.watcher.wait_for(_ended(ws, other), timeout=60, what="the other job's end")
        assert _of(ws, failing, 43006) == []  # still waiting on its backoff: not holding the channel
        await ws.watcher.wait_for(_ended(ws, failing), timeout=180, what="the failing job's end")
        await _until_done(ws, failing)
    assert len(_of(ws, other, 43004)) == 1
    (failed,) = _of(ws, failing, 43006)
    assert json.loads(failed.content)["message"] == "the agent failed on every attempt"
    retries = [e for e in _of(ws, failing, 43003) if "retrying" in e.content]
    assert len(retries) == 2, [e.content for e in retries]  # attempts 2 and 3, then the failure
