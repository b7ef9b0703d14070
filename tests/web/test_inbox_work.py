"""Browser: work in the inbox (issue 29 item 3) — a workflow approval I am named for waits
there until it is decided, the end of a job I asked for is there, each opens at its card (as
does a link to the card), and an approval that arrives while the tab is hidden raises a
browser notification (item 4). On the way: the day heading before the first card, the "New
messages" divider kept when the open channel is clicked again, a notice on a phone."""

from __future__ import annotations

import time

from buzz.core.event import Event
from buzz.jobs import build
from tests.agent.support import create_channel, message, publish
from tests.support.relay import Identity, RunningRelay
from tests.web.browser import LiveScenario, assert_all_passed, require_browser
from tests.web.team import APPROVAL, team_with_agent
from tests.workflow_runs.support import save, trigger, wait_for

CHECKS = [
    "an approval for me and my job's result wait in the inbox, in words",
    "the day heading comes before the first card of the day",
    'the "New messages" divider stays when the open channel is clicked again',
    "an approval opens its channel at the card",
    "a job's end opens its channel at the job's card",
    "a link to an approval or a job opens at its card",
    "a notice on a phone wraps, leaves the composer free and goes away",
    "deciding the approval takes it out of the inbox",
    "an approval that arrives while the tab is hidden is notified",
]


def _sign(who: Identity, template: build.Template) -> Event:
    return Event.create(who.secret, template.kind, template.content, [list(t) for t in template.tags])


async def test_work_in_the_inbox(sqlite_relay: RunningRelay, alice: Identity) -> None:
    require_browser()
    bob = Identity.new()
    async with team_with_agent(sqlite_relay, alice, bob) as team:
        a, b, g, agent, general = team.a, team.b, team.g, team.agent, team.general
        await create_channel(a, alice, "random")
        workflow, _ = await save(a, alice, general, APPROVAL.format(approver=alice.pubkey))
        await trigger(a, alice, workflow, {"version": "1.2"})
        await wait_for(a, [{"kinds": [46010], "#h": [general]}], lambda evs: len(evs) == 1)
        asked = _sign(
            alice,
            build.request(general, agent.pubkey, prompt="Summarise the week", created_at=int(time.time())),
        )
        assert (await a.publish(asked)).accepted
        manifest = build.text_result(asked.id, "Summarise the week", "Three releases and a retro.", None)
        done = await g.publish(_sign(agent, build.result(general, asked.id, alice.pubkey, manifest)))
        assert done.accepted, done.message
        page = await LiveScenario.start(
            "inboxwork", {"url": sqlite_relay.http_url + "/", "secret": alice.secret}
        )
        try:
            await page.reached("away")
            for i in range(60):  # unread while Alice is in #random, the cards above them
                await publish(b, message(bob, general, f"news {i}"))
            page.go("posted")
            await page.reached("hidden")
            await trigger(a, alice, workflow, {"version": "1.3"})
            page.go("second approval")
            report = await page.report()
        finally:
            await page.abort()
    assert_all_passed(report, CHECKS)
