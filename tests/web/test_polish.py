"""Browser: what a newcomer found rough in the workspace — a message after a job or approval
card shows its author, the inbox says a job's outcome in words on one-line dates, *Sent* and
the reply count are apart, the Directory is headed as its link, the phone composer's
placeholder fits, a search hit is a text excerpt (not half a table, nor a code block's language
label glued to its code), a private conversation's name is not cut by its e2ee tag; the Directory
link is marked only while its panel is open, "Jump to" names private conversations, the inbox
shows an edited mention as edited, and the dark huddle panel's checkboxes take the theme's
colours."""

from __future__ import annotations

import json
import time

from buzz.core.event import Event
from buzz.jobs import build
from tests.cli.helpers import buzz
from tests.support.relay import Identity, RunningRelay
from tests.web.browser import LiveScenario, assert_all_passed, require_browser
from tests.web.team import APPROVAL, team_with_agent
from tests.workflow_runs.support import save, trigger, wait_for

CHECKS = [
    "a message right after a job card or an approval card shows its author",
    "a grouped message's time shows whole beside it",
    "the inbox names a job's state and what was asked, dates on one line",
    "Sent and the reply count are apart",
    "the Directory link opens a view headed Directory",
    "on a phone the composer and search placeholders are not cut",
    "on a phone a grouped message's time shows whole beside it",
    "a search hit is a text excerpt, not a half-rendered table",
    "a private conversation's name is not cut by its e2ee tag",
    "the Directory link is marked while its panel is open, not once Search replaced it",
    "a search hit from a code block leaves out its language label",
    '"Jump to" lists a private conversation as an encrypted direct message',
    "the inbox shows a mention as edited",
    "in the dark theme the huddle panel's checkboxes take the theme's colours",
    "on a phone a search hit is a text excerpt too",
]

KESTREL = "Alice, the kestrel figures by Friday please"
CODE = "Snippet:\n```python\ndef kingfisher():\n    return 1\n```"
TABLE = "Release plan\n\n| step | owner |\n|---|---|\n| build | Alice |\n| zebrafish rollout | Bob |\n| verify | Carol |"


def _sign(who: Identity, kind: int, content: str, tags: list[list[str]], at: int) -> Event:
    return Event.create(who.secret, kind, content, tags, at)


async def test_newcomer_polish(sqlite_relay: RunningRelay, alice: Identity, bob: Identity) -> None:
    require_browser()
    now = int(time.time())
    async with team_with_agent(sqlite_relay, alice, bob) as team:
        a, b, g, agent, tag, general = team.a, team.b, team.g, team.agent, team.tag, team.general

        async def say(who: Identity, text: str, at: int) -> Event:
            event = _sign(who, 9, text, [["h", general]], at)
            result = await (a if who is alice else b).publish(event)
            assert result.accepted, result.message
            return event

        await say(alice, "Before the job card", now - 120)
        asked = build.request(general, agent.pubkey, prompt="Summarise the week", created_at=now - 110)
        job = _sign(alice, asked.kind, asked.content, [list(t) for t in asked.tags], now - 110)
        assert (await a.publish(job)).accepted
        manifest = build.text_result(job.id, "Summarise the week", "Three releases and a retro.", None)
        done = build.result(general, job.id, alice.pubkey, manifest)
        assert (
            await g.publish(_sign(agent, done.kind, done.content, [list(t) for t in done.tags], now - 100))
        ).accepted
        await say(alice, "Right after the job card", now - 100)
        await say(alice, "And a second line", now - 99)
        await say(bob, TABLE, now - 90)
        # A mention of Alice that Bob edited (the inbox shows the edited text) and a code block
        # (its search excerpt leaves out the language label).
        mention = _sign(
            bob, 9, "Alice, the kestrel numbers?", [["h", general], ["p", alice.pubkey]], now - 88
        )
        assert (await b.publish(mention)).accepted
        fixed = _sign(bob, 40003, KESTREL, [["h", general], ["e", mention.id]], now - 87)
        assert (await b.publish(fixed)).accepted
        await say(bob, CODE, now - 86)
        workflow, _ = await save(a, alice, general, APPROVAL.format(approver=alice.pubkey))
        await say(alice, "Before the approval card", int(time.time()) - 5)
        await trigger(a, alice, workflow, {"version": "1.2"})
        (approval,) = await wait_for(a, [{"kinds": [46010], "#h": [general]}], lambda evs: len(evs) == 1)
        await say(alice, "Right after the approval card", approval.created_at + 1)

        said = await buzz(
            sqlite_relay.url, agent, "dms", "send", "--private", "--pubkey", alice.pubkey,
            "--content", "Hello from Rulesbot", env={"BUZZ_AUTH_TAG": json.dumps(tag)},
        )  # fmt: skip
        assert said.json["e2ee"] is True, said
        page = await LiveScenario.start(
            "polish",
            {
                "url": sqlite_relay.http_url + "/",
                "secret": alice.secret,
                "general": general,
            },
        )
        try:
            sent = await page.reached("sent")
            if sent.get("id"):
                reply = _sign(
                    bob,
                    9,
                    "Looks good",
                    [["h", general], ["e", sent["id"], "", "root"], ["e", sent["id"], "", "reply"]],
                    int(time.time()),
                )
                assert (await b.publish(reply)).accepted
            page.go("replied")
            report = await page.report(timeout=240)
        finally:
            await page.abort()
    assert_all_passed(report, CHECKS)
