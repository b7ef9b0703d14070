"""Browser: jobs, Stop and the Directory (issue 27 items 4, 5, 7; jobs spec §9, §13.1; checklist
items 42 and 60). A real relay, a real `buzz agent run` with the rules agent as its ACP
subprocess, and two people in Chromium: Alice (owner of the channel and of the agents) and Bob
(a member). web/e2e/jobs.mjs drives the pages; this side checks what reached the relay and
plays the parts no page plays (the idle agent's failure, Bob's mention after the policy change).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

from buzz.client import RelayClient
from buzz.core.event import Event
from buzz.core.nip_oa import build_auth_tag
from buzz.jobs import build
from tests.agent.support import RULES_AGENT, add_member, create_channel, message, publish, set_profile
from tests.support.deadline import scaled
from tests.support.relay import Identity, RunningRelay, relay_on
from tests.web.browser import BUZZ, LiveScenario, assert_all_passed, require_browser

BOB_SAYS = "Can someone check the deploy logs from last night?"
HOSTILE = '<img src=x onerror="window.__pwned=1"> **not bold**'
PARTIAL = {
    "schemaVersion": 1,
    "requestedOutcome": "Summarise the incident",
    "outcome": "Half of it: the timeline is written.",
    "disposition": "partial",
    "artifacts": [
        {"kind": "link", "label": "the report", "reference": "https://example.com/report?id=1"},
        {"kind": "commit", "label": "the fix", "reference": "0123456789abcdef0123456789abcdef01234567"},
        {"kind": "branch", "label": "work branch", "reference": "fix/incident"},
    ],
    "verification": [{"label": "unit tests", "status": "not_run"}],
    "blocker": "waiting for the night's logs",
}
EXPECTED = [
    "a result from elsewhere: partial, its links safe, other references as text",
    "Ask agent in the composer opens the dialog and publishes a job card",
    "the card moves through accepted, working and completed live (both members)",
    "the result shows its outcome, artifact and verification",
    "a working job shows its progress; Stop (requester only) publishes 43005 and it ends cancelled",
    "axe: job cards, light and dark",
    "screenshots: job cards at both widths",
    "Ask agent from a message menu; hostile text in the outcome stays text",
    "a refusal of the relay shows on the card",
    "an agent working on a message: Stop for its owner sends !cancel and the turn ends",
    "Directory: agents with owner, persona, answers and status",
    "the owner changes Answers; others see it without the control",
    "the requester stops their own request from the message; the Directory shows it working",
    "working in a private channel shows only to its readers",
    "axe: the Directory, light and dark",
    "screenshots: the Directory at both widths",
    "a snapshot older than 600 s is not shown as working",
    "the owner sets the parallelism and an allowlist with one person",
    "the owner picks the persona among their own; others see its name",
    "the Persona control is a short choice with its hint on a line under it",
]


@contextlib.asynccontextmanager
async def _harness(
    relay: RunningRelay, agent: Identity, auth: list[str], tmp: Path, channels: int = 2
) -> AsyncIterator[Path]:
    """`buzz agent run` with the rules agent in its own process group; yields its log once it
    serves its `channels` channels."""
    log = tmp / "harness.log"
    env = {
        **os.environ,
        "BUZZ_PRIVATE_KEY": agent.secret,
        "BUZZ_AUTH_TAG": json.dumps(auth),
        "RULES_AGENT_RECORD": str(tmp / "record.jsonl"),
    }
    args = ["--relay", relay.url, "--agent-command", sys.executable, "--agent-args", RULES_AGENT]
    with log.open("ab") as out:
        proc = await asyncio.create_subprocess_exec(
            BUZZ, "agent", "run", *args, env=env, cwd=tmp, stdout=out, stderr=out, start_new_session=True
        )
    try:
        await _logged(log, f"serving {channels} channel(s)", proc)
        yield log
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), scaled(30))
            except TimeoutError:
                os.killpg(proc.pid, signal.SIGKILL)
                await proc.wait()


def _rfc3339(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def _logged(log: Path, text: str, proc: asyncio.subprocess.Process | None = None) -> None:
    """Until the harness log holds `text` (the log is the harness's own account of what it did)."""
    async with asyncio.timeout(scaled(60)):
        while text not in log.read_text(errors="replace"):
            assert proc is None or proc.returncode is None, log.read_text()
            await asyncio.sleep(0.05)


async def _until(client: RelayClient, flt: dict[str, object], ok, what: str) -> list[Event]:
    """The events matching `flt` once `ok(events)` holds, read through a live subscription."""
    seen: list[Event] = []
    async with asyncio.timeout(scaled(60)):
        sub = await client.subscribe([flt])
        try:
            async for event in sub:
                seen.append(event)
                if ok(seen):
                    return seen
        finally:
            await sub.close()
    raise AssertionError(what)


async def test_jobs_stop_and_directory_in_the_browser(tmp_path: Path, alice: Identity, bob: Identity) -> None:
    require_browser()
    rules, idle = Identity.new(), Identity.new()
    auths = {a.pubkey: build_auth_tag(alice.secret, a.pubkey) for a in (rules, idle)}
    async with relay_on(tmp_path / "relay") as relay:
        async with relay.client(alice) as client:
            await set_profile(client, alice, "Alice")
            general = await create_channel(client, alice, "general")
            await add_member(client, alice, general, bob.pubkey)
            for agent in (rules, idle):
                await add_member(client, alice, general, agent.pubkey, "bot")
            eng = await create_channel(client, alice, "eng", "private")  # Bob is not in it
            await add_member(client, alice, eng, rules.pubkey, "bot")
            persona = {"display_name": "Code reviewer", "system_prompt": "Review what you are given."}
            await publish(
                client,
                Event.create(
                    alice.secret, 30175, json.dumps(persona), [["d", "reviewer"], ["shared", "true"]]
                ),
            )
            # two more of Alice's personas to pick from: one shared, one only she reads
            writer = {"display_name": "Release notes writer", "system_prompt": "Write release notes."}
            await publish(
                client,
                Event.create(alice.secret, 30175, json.dumps(writer), [["d", "writer"], ["shared", "true"]]),
            )
            drafts = {"display_name": "Private drafts", "system_prompt": "Draft."}
            await publish(client, Event.create(alice.secret, 30175, json.dumps(drafts), [["d", "drafts"]]))
            policy = {
                "name": "Rulesbot",
                "persona_id": "reviewer",
                "respond_to": "owner-only",
                "parallelism": 1,
            }
            await publish(
                client, Event.create(alice.secret, 30177, json.dumps(policy), [["d", rules.pubkey]])
            )
        for agent, name in ((rules, "Rulesbot"), (idle, "Idlebot")):
            async with relay.client(agent, auth_tags=[auths[agent.pubkey]]) as client:
                await set_profile(client, agent, name, auths[agent.pubkey])
        async with relay.client(bob) as client:
            await set_profile(client, bob, "Bob")
            said = await publish(client, message(bob, general, BOB_SAYS))
            asked = build.request(
                general, idle.pubkey, prompt=PARTIAL["requestedOutcome"], created_at=int(time.time())
            )
            partial_job = await publish(
                client, Event.create(bob.secret, asked.kind, asked.content, asked.tags)
            )
        # The idle agent answers Bob's job itself (no harness): accepted, a plan, a partial result.
        async with relay.client(idle, auth_tags=[auths[idle.pubkey]]) as client:
            plan = [{"title": "Read the logs", "status": "completed"}]
            for t in (
                build.accepted(general, partial_job.id),
                build.progress(general, partial_job.id, seq=1, message="Reading the logs", plan=plan),
                build.result(general, partial_job.id, bob.pubkey, PARTIAL | {"jobRequest": partial_job.id}),
            ):
                await publish(client, Event.create(idle.secret, t.kind, t.content, t.tags))

        async with _harness(relay, rules, auths[rules.pubkey], tmp_path) as log:
            page = await LiveScenario.start(
                "jobs",
                {
                    "url": relay.http_url + "/",
                    "alice": alice.secret,
                    "bob": bob.secret,
                    "bobMessage": BOB_SAYS,
                    "hostile": HOSTILE,
                },
            )
            try:
                # The idle agent (no harness) reports its job unavailable; Alice's page never
                # hears of it and stops the job: the relay refuses.
                job = (await page.reached("idle job", timeout=240))["id"]
                if job:  # else the scenario reports what failed before
                    failed = build.failed(
                        general, job, alice.pubkey, code="unavailable", message="not running now"
                    )
                    async with relay.client(idle, auth_tags=[auths[idle.pubkey]]) as client:
                        await publish(
                            client, Event.create(idle.secret, failed.kind, failed.content, failed.tags)
                        )
                page.go("failed")
                await page.reached("stopped", timeout=180)
                # Alice set Answers to members: the running harness applies it, and answers Bob.
                await page.reached("answers members", timeout=120)
                async with relay.client(alice) as client:
                    (record,) = await client.query([{"kinds": [30177], "authors": [alice.pubkey]}])
                await _logged(log, f"managed-agent record {record.id[:12]} applied: respond-to members")
                async with relay.client(bob) as client:
                    mention = await publish(
                        client, message(bob, general, "@Rulesbot echo from bob", mention=rules.pubkey)
                    )
                    await _until(
                        client,
                        {"kinds": [9], "#h": [general], "authors": [rules.pubkey], "#e": [mention.id]},
                        lambda es: any(e.content.startswith("from bob") for e in es),
                        "the agent never answered Bob after the policy change",
                    )
                page.go("answered")
                # Bob stopped his own request; then the agent works in #eng, which Bob cannot read.
                await page.reached("requester stopped", timeout=180)
                async with relay.client(alice) as client:
                    await publish(client, message(alice, eng, "@Rulesbot sleep 122", mention=rules.pubkey))
                    snapshots = await _until(
                        client,
                        {"kinds": [30181], "authors": [rules.pubkey], "#h": [eng]},
                        lambda es: json.loads(es[-1].content)["status"] == "working",
                        "the agent never said it works in #eng",
                    )
                page.go("eng working")
                # Its snapshot stops being refreshed (as a harness that died would leave it).
                await page.reached("eng seen", timeout=120)
                stale = json.loads(snapshots[-1].content) | {"updatedAt": _rfc3339(time.time() - 700)}
                at = max(int(time.time()), snapshots[-1].created_at + 1)
                async with relay.client(rules, auth_tags=[auths[rules.pubkey]]) as client:
                    await publish(
                        client, Event.create(rules.secret, 30181, json.dumps(stale), snapshots[-1].tags, at)
                    )
                page.go("eng stale")
                report = await page.report(timeout=120)
                if report["checks"].get(EXPECTED[-2]):  # the harness follows the owner's record
                    await _logged(log, "respond-to allowlist (allowlist 1), parallelism 2")
                if report["checks"].get(EXPECTED[-1]):  # and the persona, for its new sessions
                    await _logged(
                        log, "persona writer (from the managed-agent record) applies to new sessions"
                    )
            finally:
                await page.abort()
        assert_all_passed(report, EXPECTED)

        async with relay.client(alice) as client:
            requests = {
                json.loads(e.content)["requestedOutcome"]: e
                for e in await client.query([{"kinds": [43001], "#h": [general]}])
            }
            lifecycle = await client.query([{"kinds": [43002, 43003, 43004, 43005, 43006], "#h": [general]}])
            notes = await client.query([{"kinds": [9], "#h": [general], "authors": [alice.pubkey]}])
            answers = await client.query([{"kinds": [9], "#h": [general], "authors": [rules.pubkey]}])
            (record,) = await client.query([{"kinds": [30177], "authors": [alice.pubkey]}])
        # The browser's requests have the spec's shape: h, one p, content with the outcome.
        assert set(requests) == {"handoff", "sleep 120", HOSTILE, PARTIAL["requestedOutcome"]}
        del requests[PARTIAL["requestedOutcome"]]  # Bob's, from this side
        for outcome, request in requests.items():
            assert [t[0] for t in request.tags] == ["h", "p"] and request.pubkey == alice.pubkey
            body = json.loads(request.content)
            assert body["schemaVersion"] == 1 and body["prompt"].startswith(outcome)
        assert requests[HOSTILE].tag_values("p") == [idle.pubkey]
        source = json.loads(requests[HOSTILE].content)["source"]
        assert source == {"kind": "message", "event": said.id, "channel": general}
        assert BOB_SAYS in json.loads(requests[HOSTILE].content)["prompt"]
        # Stop on the job card: one 43005 by Alice for the sleeping job; none for the failed one.
        cancels = [e for e in lifecycle if e.kind == 43005]
        assert [(e.pubkey, e.tag_values("e")) for e in cancels] == [
            (alice.pubkey, [requests["sleep 120"].id])
        ]
        assert cancels[0].tag_values("p") == [rules.pubkey]
        ends = {e.tag_values("e")[0]: e.kind for e in lifecycle if e.kind in (43004, 43006)}
        assert ends == {requests["handoff"].id: 43004, requests[HOSTILE].id: 43006, partial_job.id: 43004}
        # Stop on the working message: the owner command, in the turn's thread, naming the agent.
        (cancel_note,) = [e for e in notes if e.content == "!cancel"]
        (sleeping,) = [e for e in notes if e.content == "@Rulesbot sleep 120"]
        assert cancel_note.tag_values("p") == [rules.pubkey] and sleeping.id in cancel_note.tag_values("e")
        # Each stopped turn ends with the harness's notice naming who stopped it.
        stopped = [
            e.content for e in answers if ["buzz:agent-notice", "stopped"] in [list(t) for t in e.tags]
        ]
        assert sorted(stopped) == ["stopped by Alice", "stopped by Bob"], stopped
        assert not [e for e in answers if e.content.startswith(("slept 120", "slept 121"))]
        # The owner's controls merged the record: the persona and the rest are kept.
        assert json.loads(record.content) == {
            **policy,
            "respond_to": "allowlist",
            "respond_to_allowlist": [bob.pubkey],
            "parallelism": 2,
            "persona_id": "writer",
        }
