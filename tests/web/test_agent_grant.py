"""Browser: a refused asker and the owner's one-click grant (issue 27 item 3). A real relay, a
real `buzz agent run` with the rules agent as its ACP subprocess (owner-only), and two people in
Chromium: Alice owns the agent, Bob is a member of the channel. web/e2e/grant.mjs drives the
pages; this side waits for the harness to apply Alice's record and checks what reached the relay.
"""

from __future__ import annotations

import json
from pathlib import Path

from buzz.core.event import Event
from buzz.core.nip_oa import build_auth_tag
from tests.agent.support import add_member, create_channel, publish, set_profile
from tests.support.relay import Identity, relay_on
from tests.web.browser import LiveScenario, assert_all_passed, require_browser
from tests.web.test_jobs import _harness, _logged

EXPECTED = [
    "the refused asker sees one notice naming the owner and how to ask",
    "a declined job names the owner and offers the owner the same grant",
    'the owner sees "Let Bob ask Rulesbot" on the notice',
    "one click lets Bob in",
    "the running harness answers Bob's next mention",
]


async def test_the_owner_lets_a_refused_asker_in_with_one_click(
    tmp_path: Path, alice: Identity, bob: Identity
) -> None:
    require_browser()
    agent = Identity.new()
    auth = build_auth_tag(alice.secret, agent.pubkey)
    policy = {"name": "Rulesbot", "respond_to": "owner-only", "parallelism": 1}
    async with relay_on(tmp_path / "relay") as relay:
        async with relay.client(alice) as client:
            await set_profile(client, alice, "Alice")
            general = await create_channel(client, alice, "general")
            await add_member(client, alice, general, bob.pubkey)
            await add_member(client, alice, general, agent.pubkey, "bot")
            await publish(
                client, Event.create(alice.secret, 30177, json.dumps(policy), [["d", agent.pubkey]])
            )
        async with relay.client(agent, auth_tags=[auth]) as client:
            await set_profile(client, agent, "Rulesbot", auth)
        async with relay.client(bob) as client:
            await set_profile(client, bob, "Bob")

        async with _harness(relay, agent, auth, tmp_path, channels=1) as log:
            await _logged(log, "respond-to owner-only")
            page = await LiveScenario.start(
                "grant", {"url": relay.http_url + "/", "alice": alice.secret, "bob": bob.secret}
            )
            try:
                await page.reached("granted", timeout=240)
                await _logged(log, "applied: respond-to allowlist (allowlist 1), parallelism 1")
                page.go("applied")
                report = await page.report(timeout=180)
            finally:
                await page.abort()
        assert_all_passed(report, EXPECTED)

        async with relay.client(alice) as client:
            said = await client.query([{"kinds": [9], "#h": [general], "authors": [agent.pubkey]}])
            (record,) = await client.query([{"kinds": [30177], "authors": [alice.pubkey]}])
    # Two refused mentions within the hour, one notice: it names the owner and the asker.
    notices = [e for e in said if ["buzz:agent-notice", "not-admitted"] in [list(t) for t in e.tags]]
    assert len(notices) == 1, [e.content for e in notices]
    assert ["buzz:asker", bob.pubkey, "owner-only"] in [list(t) for t in notices[0].tags]
    assert "Ask my owner Alice for access" in notices[0].content
    # The click merged the owner's record: Bob on the allowlist, the rest kept.
    assert json.loads(record.content) == {
        **policy,
        "respond_to": "allowlist",
        "respond_to_allowlist": [bob.pubkey],
    }
