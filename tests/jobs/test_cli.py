"""`buzz jobs` as a newcomer runs it (jobs spec §7, checklist items 39–40): the real executable
against a real relay; JSON on stdout, one error line and the exit-code table on failure."""

from __future__ import annotations

import asyncio
import json

from buzz.core.event import Event
from buzz.core.nip_oa import build_auth_tag
from tests.cli.helpers import Result, buzz
from tests.support.deadline import scaled
from tests.support.relay import Identity, RunningRelay
from tests.workspace.helpers import create_channel, put_user


async def _setup(running: RunningRelay) -> tuple[str, Identity, Identity, dict[str, str]]:
    asker, owner, agent = Identity.new(), Identity.new(), Identity.new()
    tag = build_auth_tag(owner.secret, agent.pubkey)
    async with running.client(asker) as c, running.client(agent, auth_tags=[tag]) as a:
        await a.count([{"kinds": [1], "authors": [agent.pubkey]}])  # AUTH done: owner registered
        channel = await create_channel(c, asker)
        await put_user(c, asker, channel, agent.pubkey)
    return channel, asker, agent, {"BUZZ_AUTH_TAG": json.dumps(list(tag))}


def _manifest(job_id: str, reference: str = "src/fix.py") -> bytes:
    return json.dumps(
        {
            "schemaVersion": 1,
            "jobRequest": job_id,
            "requestedOutcome": "a fix",
            "outcome": "fixed the flaky test",
            "disposition": "completed",
            "artifacts": [{"kind": "file", "label": "the fix", "reference": reference}],
            "verification": [{"label": "pytest", "status": "passed", "evidence": "12 passed"}],
        }
    ).encode()


async def _request(url: str, asker: Identity, channel: str, agent: str, prompt: str, *more: str) -> Result:
    """`buzz jobs request` from the asker to `agent` in `channel`, `more` options after."""
    return await buzz(
        url, asker, "jobs", "request", "--channel", channel, "--agent", agent, "--prompt", prompt, *more
    )


async def _handoff(
    url: str, agent: Identity, channel: str, job: str, manifest: bytes, env: dict[str, str]
) -> Result:
    """`buzz jobs handoff` as the agent, the manifest on stdin."""
    return await buzz(
        url,
        agent,
        "jobs",
        "handoff",
        "--channel",
        channel,
        "--job",
        job,
        "--manifest",
        "-",
        stdin=manifest,
        env=env,
    )


async def test_request_handoff_show_list_cancel(sqlite_relay: RunningRelay) -> None:
    url = sqlite_relay.url
    channel, asker, agent, agent_env = await _setup(sqlite_relay)
    asked = (await _request(url, asker, channel, agent.pubkey, "fix it")).json
    job = asked["job_id"]
    assert asked == {"job_id": job, "event_id": job, "channel_id": channel, "assignee": agent.pubkey}

    local = await _handoff(url, agent, channel, job, _manifest(job, "/home/me/fix.py"), agent_env)
    assert local.code == 1
    assert local.error["message"] == "job result: artifact 1 reference is a local path"
    assert (await buzz(url, asker, "jobs", "show", "--job", job)).json["job"][
        "state"
    ] == "requested"  # nothing signed

    done = (await _handoff(url, agent, channel, job, _manifest(job), agent_env)).json
    assert done["disposition"] == "completed" and done["job_id"] == job
    shown = (await buzz(url, asker, "jobs", "show", "--job", job)).json
    assert shown["job"]["state"] == "completed" and shown["result"]["outcome"] == "fixed the flaky test"
    assert [e["kind"] for e in shown["events"]] == [43004]

    second = (await _request(url, asker, channel, agent.pubkey, "another")).json["job_id"]
    assert (await buzz(url, asker, "jobs", "cancel", "--job", second, "--reason", "changed my mind")).json[
        "job_id"
    ] == second
    listed = (await buzz(url, asker, "jobs", "list", "--channel", channel)).json["jobs"]
    assert {(j["id"], j["state"]) for j in listed} == {(job, "completed"), (second, "cancelled")}
    completed = (await buzz(url, asker, "jobs", "list", "--channel", channel, "--state", "completed")).json[
        "jobs"
    ]
    assert [j["id"] for j in completed] == [job]

    unknown = await buzz(url, asker, "jobs", "show", "--job", "ab" * 32)
    assert (unknown.code, unknown.error["error"]) == (1, "not_found")
    human = await _request(url, asker, channel, asker.pubkey, "x")
    assert human.code == 1 and "target is not an agent member" in human.error["message"]


async def _waiting_request(
    running: RunningRelay, asker: Identity, channel: str, agent: Identity, prompt: str
) -> tuple[asyncio.Task[Result], Event]:
    """`buzz jobs request --wait` running, and its 43001 as the agent received it."""
    waiting = asyncio.create_task(
        _request(running.url, asker, channel, agent.pubkey, prompt, "--wait", "--timeout", "60")
    )
    async with running.client(agent) as c:
        sub = await c.subscribe([{"kinds": [43001], "#h": [channel], "#p": [agent.pubkey]}])
        return waiting, await sub.next(30)


async def test_request_wait_prints_the_result(sqlite_relay: RunningRelay) -> None:
    url = sqlite_relay.url
    channel, asker, agent, agent_env = await _setup(sqlite_relay)
    waiting, request = await _waiting_request(sqlite_relay, asker, channel, agent, "wait for me")
    done = await _handoff(url, agent, channel, request.id, _manifest(request.id), agent_env)
    assert done.code == 0, done.stderr
    printed = (await waiting).json
    assert printed["job"]["state"] == "completed" and printed["failure"] is None
    assert printed["result"]["jobRequest"] == request.id
    # one shape: --wait adds the job's end to what a request without it prints
    asked = {"job_id": request.id, "event_id": request.id, "channel_id": channel, "assignee": agent.pubkey}
    assert printed.items() >= asked.items() and printed["job"]["id"] == request.id

    timed_out = await _request(url, asker, channel, agent.pubkey, "nobody", "--wait", "--timeout", "0.5")
    assert timed_out.code == 4 and "had not ended" in timed_out.error["message"]
    assert "buzz jobs cancel --job" in timed_out.error["message"]  # it goes on: how to stop it


async def test_request_wait_exits_7_when_the_job_is_cancelled(sqlite_relay: RunningRelay) -> None:
    """The document still comes on stdout; the exit code tells a script the job did not
    complete (a `&&` chain stops there), and a cancel (7, `job_cancelled`) from a failure (6)."""
    url = sqlite_relay.url
    channel, asker, agent, _ = await _setup(sqlite_relay)
    waiting, request = await _waiting_request(sqlite_relay, asker, channel, agent, "stop me")
    cancelled = await buzz(url, asker, "jobs", "cancel", "--job", request.id, "--reason", "not needed")
    assert cancelled.code == 0, cancelled.stderr
    ended = await waiting
    assert ended.code == 7, ended.stderr
    assert json.loads(ended.stdout)["job"]["state"] == "cancelled"
    (line,) = ended.stderr.splitlines()
    error = json.loads(line)
    assert error["error"] == "job_cancelled" and error["message"] == f"job {request.id} cancelled"
    again = await buzz(url, asker, "jobs", "cancel", "--job", request.id)  # said in words, not `invalid:`
    assert (again.code, again.error["error"]) == (1, "user_error"), again.stderr
    assert again.error["message"] == f"job {request.id} is already cancelled: there is nothing to cancel"


async def test_ctrl_c_while_waiting_names_the_job(sqlite_relay: RunningRelay) -> None:
    """Ctrl-C during `--wait` stops the waiting, not the job: the one error line (exit 130)
    carries the job's id, which `show` and `cancel` need."""
    import signal

    from tests.cli.helpers import BUZZ, _env

    channel, asker, agent, _ = await _setup(sqlite_relay)
    proc = await asyncio.create_subprocess_exec(
        BUZZ,
        *("jobs", "request", "--channel", channel, "--agent", agent.pubkey, "--prompt", "long", "--wait"),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=_env(sqlite_relay.url, asker, None),
    )
    try:
        async with sqlite_relay.client(agent) as c:
            sub = await c.subscribe([{"kinds": [43001], "#h": [channel], "#p": [agent.pubkey]}])
            request = await sub.next(30)  # the command named the job before it sent it
        proc.send_signal(signal.SIGINT)
        out, err = await asyncio.wait_for(proc.communicate(), scaled(60))
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 130 and out == b"", err
    (line,) = err.decode().splitlines()
    error = json.loads(line)
    assert error["error"] == "interrupted" and error["job_id"] == request.id
    assert f"buzz jobs cancel --job {request.id}" in error["hint"]
