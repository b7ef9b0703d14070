"""Browser: two people, the CLI and the example rules agent in one channel (issue 12, items
2, 3 and 6), then the events the browser produced checked in the relay's store: the same
shapes `buzz messages send` / `reactions add` / `messages edit` produce."""

from __future__ import annotations

from pathlib import Path

import pytest

from buzz.client import RelayError
from buzz.core import nip19
from buzz.core.event import Event
from tests.agent.support import set_profile, workspace
from tests.support.relay import Identity, RunningRelay
from tests.web.browser import assert_all_passed, require_browser, run_scenario

CHECKS = [
    "channels: the owner sees general, Bob browses and joins it",
    "an open channel from New channel is in Browse channels for the other person",
    "messages appear live for the other person",
    "typing shows for the other person",
    "a thread reply shows in the thread panel for both",
    "a reaction shows for the other person",
    "an edit replaces the text for the other person",
    "a message sent with the CLI appears live",
    "an @mention picked from the list wakes the agent and its reply appears live",
    "screenshots: thread at desktop width",
    "search finds a message everywhere and in the channel",
    "the owner deletes their own message and moderates Bob's",
    "screenshots: channel at desktop width",
    "members: roles, presence, the agent and its owner; screenshot",
    "a private channel: created, a member added, Bob sees it live",
    "unread counts are the link description, not its name",
    "changing only the #<channel id> of an open tab switches channel",
    "a third person cannot see or open the private channel",
    'at phone width, "1 reply" held down for a moment stays under the pointer and opens the thread',
    "screenshots: phone width with the menu, thread and members",
    "rename, remove a member (Bob sees both live), archive",
    "a direct message from the members panel reaches Bob live",
    "a mention notifies Bob while his tab is in the background",
    "a plain member cannot add or remove members",
    "the owner promotes Bob to admin and demotes him; both members panels follow live",
]


def _tags(event: Event) -> list[list[str]]:
    return [list(t) for t in event.tags]


@pytest.mark.timeout(420)
async def test_two_people_the_cli_and_an_agent(
    sqlite_relay: RunningRelay,
    alice: Identity,
    bob: Identity,
    carol: Identity,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    require_browser()
    agent = Identity.new()
    async with workspace(sqlite_relay, alice, agent, tmp_path, monkeypatch) as ws:
        async with sqlite_relay.client(bob) as c:
            await set_profile(c, bob, "Bob")
        async with sqlite_relay.client(carol) as c:
            await set_profile(c, carol, "Carol")
        await ws.next_second()
        async with ws.harness():
            report = await run_scenario(
                "collab",
                {
                    "url": sqlite_relay.http_url + "/",
                    "wsUrl": sqlite_relay.url,
                    "owner": alice.secret,
                    "bob": bob.secret,
                    "bobNpub": nip19.npub(bob.pubkey),
                    "carol": carol.secret,
                    "channel": ws.channel,
                },
                timeout=300,
            )
        assert_all_passed(report, CHECKS)

        async with sqlite_relay.client(alice) as owner:
            messages = await owner.query([{"kinds": [9], "#h": [ws.channel], "authors": [alice.pubkey]}])
            by_text = {e.content: e for e in messages}
            # The mention picked in the composer is a `p` tag, after `h` (agents.md §2.3).
            mention = by_text["@Rulesbot ping"]
            assert _tags(mention) == [["h", ws.channel], ["p", agent.pubkey]]
            hello = by_text["Hello from Olivia"]
            assert _tags(hello) == [["h", ws.channel]]
            edits = await owner.query([{"kinds": [40003], "#e": [hello.id]}])
            assert [(e.content, _tags(e)) for e in edits] == [
                ("Hello from Olivia, edited", [["h", ws.channel], ["e", hello.id]])
            ]
            replies = await owner.query([{"kinds": [9], "#e": [hello.id]}])
            assert [(e.pubkey, _tags(e)) for e in replies] == [
                (bob.pubkey, [["h", ws.channel], ["e", hello.id, "", "reply"]])
            ]
            pong = await owner.query([{"kinds": [9], "#e": [mention.id], "authors": [agent.pubkey]}])
            assert len(pong) == 1 and pong[0].content.startswith("pong")
            reactions = await owner.query([{"kinds": [7], "authors": [alice.pubkey]}])
            assert [(e.content, e.tags[0][0]) for e in reactions] == [("👍", "e")]
            # Deleted messages are gone from the store's answers (NIP-09 own, 9005 moderation).
            gone = await owner.query([{"kinds": [9], "#h": [ws.channel], "search": "oops"}])
            assert gone == []
            mod = await owner.query([{"kinds": [9005], "#h": [ws.channel]}])
            assert len(mod) == 1 and mod[0].pubkey == alice.pubkey
            # Promote and demote: 9000 with the new role, as `buzz channels add-member --role`.
            puts = await owner.query(
                [{"kinds": [9000], "#h": [ws.channel], "#p": [bob.pubkey], "authors": [alice.pubkey]}]
            )
            assert sorted(_tags(e)[2][1] for e in puts) == ["admin", "member"]
            assert all(_tags(e)[:2] == [["h", ws.channel], ["p", bob.pubkey]] for e in puts)
            (members,) = await owner.query([{"kinds": [39002], "#d": [ws.channel]}])
            assert ["p", bob.pubkey, "", "member"] in [list(t[:4]) for t in members.tags]

        # The private channel refuses the third person: nothing to read, no writing.
        secret = report["secretChannel"]
        async with sqlite_relay.client(carol) as outsider:
            with pytest.raises(RelayError, match=r"^restricted: not a channel member"):
                await outsider.query([{"kinds": [9], "#h": [secret]}])
            result = await outsider.publish(Event.create(carol.secret, 9, "let me in", [["h", secret]]))
            assert not result.accepted and result.message.startswith("restricted:")
