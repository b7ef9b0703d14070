"""Browser: presence and status that are true (issue 29 item 7, decision 223) — live 20001,
the harness-run agent online / working / idle / offline, a status text, typing that clears."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.agent.support import add_member, set_profile, workspace
from tests.support.relay import Identity, RunningRelay
from tests.web.browser import LiveScenario, assert_all_passed, require_browser

CHECKS = [
    "the running agent shows online and idle",
    "a person who signs in shows online live",
    "the agent shows working while it works, idle after",
    "a status text shows to others live",
    "typing shows, and clears when the box is emptied",
    "the agent shows offline once its harness stops",
]


async def test_presence_follows_live(
    sqlite_relay: RunningRelay,
    alice: Identity,
    bob: Identity,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    require_browser()
    agent = Identity.new()
    async with workspace(sqlite_relay, alice, agent, tmp_path, monkeypatch) as ws:
        async with sqlite_relay.client(bob) as c:
            await set_profile(c, bob, "Bob")
        await add_member(ws.owner_client, alice, ws.channel, bob.pubkey)
        await ws.next_second()
        config = {
            "url": sqlite_relay.http_url + "/",
            "owner": alice.secret,
            "bob": bob.secret,
            "channel": ws.channel,
        }
        page = None
        try:
            async with ws.harness():
                page = await LiveScenario.start("presence", config)
                await page.reached("checked")
            page.go("harness stopped")
            report = await page.report()
        finally:
            if page is not None:
                await page.abort()
    assert_all_passed(report, CHECKS)
