"""Browser: workflows (issue 28 items 9, 10; workflows.md §18) — the channel's Workflows panel
with an error shown inline, save, Enabled, Run now and the run's steps; an approval card in the
timeline approved there, and the run completes. The relay's own records are checked after."""

from __future__ import annotations

from pathlib import Path

import orjson

from buzz.core.event import Event
from tests.agent.support import add_member, create_channel
from tests.support.relay import Identity, relay_on
from tests.web.browser import assert_all_passed, require_browser, run_scenario

STANDUP = "Stand-up in 5 minutes! Post your update here."
GOOD = f"""name: Stand-up reminder
trigger:
  on: schedule
  cron: "0 9 * * MON-FRI"
steps:
  - id: remind
    action: send_message
    text: "{STANDUP}"
    timeout_secs: 60
"""
BAD = GOOD.replace("timeout_secs: 60", "timeout_secs: 0")
MESSAGE = "Deploy build 42 to production?"
GREETER = """name: Greeter
trigger:
  on: webhook
steps:
  - id: greet
    action: send_message
    text: "Hello, {{trigger.who}}!"
"""
ELEVATED = """name: Notify CI
trigger:
  on: message_posted
steps:
  - id: call
    action: call_webhook
    url: "https://ci.example.com/hook"
"""


def _approval_yaml(approver: str) -> str:
    return f"""name: Deploy approval
trigger:
  on: webhook
steps:
  - id: ask
    action: request_approval
    from: "{approver}"
    message: "{MESSAGE}"
    timeout: 1h
  - id: deploy
    action: send_message
    text: "Deploying build 42 ({{{{steps.ask.output.note}}}})"
"""


async def test_workflows_in_the_browser(tmp_path: Path, alice: Identity, bob: Identity) -> None:
    require_browser()
    async with relay_on(tmp_path / "relay") as relay:
        async with relay.client(alice) as client:
            general = await create_channel(client, alice, "general")
            await add_member(client, alice, general, bob.pubkey)
        for who, name in ((alice, "Alice"), (bob, "Bob")):
            async with relay.client(who) as client:
                profile = Event.create(who.secret, 0, orjson.dumps({"name": name}).decode(), [])
                assert (await client.publish(profile)).accepted
        report = await run_scenario(
            "workflows",
            {
                "url": relay.http_url + "/",
                "alice": alice.secret,
                "bob": bob.secret,
                "badYaml": BAD,
                "goodYaml": GOOD,
                "standupText": STANDUP,
                "approvalYaml": _approval_yaml(alice.pubkey),
                "approvalMessage": MESSAGE,
                "elevatedYaml": ELEVATED,
                "greeterYaml": GREETER,
            },
        )
        assert_all_passed(
            report,
            [
                "a definition with an error shows it inline at its line (screenshot)",
                "fixed and saved, it is listed with its schedule",
                "the Enabled switch disables and enables it",
                "Run now: the run appears with its steps and the message is posted as the owner's workflow",
                "axe: the Workflows panel with a run, light and dark",
                "screenshots: the Workflows panel at both widths",
                "a request_approval workflow puts an approval card in the timeline",
                "axe: an approval card, light and dark",
                "screenshots: an approval card at both widths",
                "another member sees the card without the buttons",
                "Approve: the card shows the decision and the run completes",
                "the other member's card shows the decision live",
                "the owner deletes a workflow",
                "Run with inputs: a JSON object reaches the run as trigger values; anything else is said",
                "Deny: the card shows the denial and the run is cancelled",
                "the relay's refusal of a save shows in the editor",
            ],
        )
        # The relay recorded the browser's decision: one 46011 naming Alice, and the message.
        async with relay.client(bob) as client:
            granted = await client.query([{"kinds": [46011], "#h": [general]}])
            assert len(granted) == 1 and ["p", alice.pubkey] in [list(t) for t in granted[0].tags]
            assert len(await client.query([{"kinds": [46012], "#h": [general]}])) == 1
            assert await client.query([{"kinds": [30620], "#h": [general], "authors": [bob.pubkey]}]) == []
            posted = await client.query([{"kinds": [9], "#h": [general]}])
            assert [e.content for e in posted if e.content.startswith("Deploying")] == [
                "Deploying build 42 (ship it)"
            ]
