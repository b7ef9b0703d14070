"""Browser: a newcomer's findings — the thread's reply box spans the panel beside Ask agent, the
inbox names a workflow's post by the owner it speaks for and lists private (NIP-17) DMs, and a
grouped message's hover time and action bar cover no text."""

from __future__ import annotations

import json
import time

from buzz.core.event import Event
from tests.cli.helpers import buzz
from tests.support.relay import Identity, RunningRelay
from tests.web.browser import assert_all_passed, require_browser, run_scenario
from tests.web.team import team_with_agent
from tests.workflow_runs.support import save, trigger, wait_for

CHECKS = [
    "a grouped message shows its hover time over no text, its actions over the top edge",
    "the thread reply box spans the panel at 1280×800",
    "the inbox names a workflow's post by its owner",
    "a private DM is in the inbox, opens its conversation and can be marked done",
]

NOTIFY = """name: Notify
trigger: {on: webhook}
steps:
  - {id: say, action: send_message, text: "@Bob the deploy is done"}
"""


async def test_newcomer_finds(sqlite_relay: RunningRelay, alice: Identity, bob: Identity) -> None:
    require_browser()
    async with team_with_agent(sqlite_relay, alice, bob) as team:
        a, general = team.a, team.general
        now = int(time.time())
        first = "First of two: a line long enough to reach the right side of the timeline, " * 3
        for at, text in ((now - 60, first), (now - 59, "Second of two")):  # apart: in this order
            event = Event.create(alice.secret, 9, text, [["h", general]], at)
            assert (await a.publish(event)).accepted
        workflow, _ = await save(a, alice, general, NOTIFY)
        await trigger(a, alice, workflow, {})
        await wait_for(a, [{"kinds": [9], "#h": [general], "#p": [bob.pubkey]}], lambda evs: len(evs) == 1)
    private = await buzz(
        sqlite_relay.url,
        alice,
        "dms",
        "send",
        "--private",
        "--pubkey",
        bob.pubkey,
        "--content",
        "A sealed hello",
    )
    assert json.loads(private.stdout)["e2ee"] is True, private
    report = await run_scenario(
        "finds", {"url": sqlite_relay.http_url + "/", "secret": bob.secret, "general": general}
    )
    assert_all_passed(report, CHECKS)
