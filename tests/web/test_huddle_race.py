"""Two people start a huddle in the same channel at the same moment (decision 81): both pages
press "Join huddle" together, each posts its own 48100 (the scenario holds both until both are
out, then lets the rule's winner or its loser be stored first), and both end up in one room. The relay's
events are read while they sit in it: the kept huddle is the race rule's winner (earliest 48100
`created_at`, then lowest id) and the other was ended by its own starter (48103) and archived.
Then `buzz huddle start` beside the live huddle follows the same rule: it hands back the live
one and starts nothing."""

from __future__ import annotations

import json

import orjson
import pytest

from buzz.core.event import Event
from tests.agent.support import add_member, create_channel, set_profile
from tests.cli.helpers import buzz
from tests.support.relay import Identity, RunningRelay
from tests.web.browser import LiveScenario, assert_all_passed, require_browser


def _room(event: Event) -> str:
    return str(orjson.loads(event.content)["ephemeral_channel_id"])


def _archived(metadata: list[Event], room: str) -> bool:
    return any(
        e.first_tag("d") == room and ["archived", "true"] in [list(t[:2]) for t in e.tags] for e in metadata
    )


CHECKS = [
    'both press "Join huddle" together and end up in one room',
    "after the CLI start the page still offers only the huddle both are in",
    "both leave",
]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("order", ["winner-first", "loser-first"])
async def test_simultaneous_starts_converge_on_one_huddle(
    sqlite_relay: RunningRelay, alice: Identity, bob: Identity, carol: Identity, order: str
) -> None:
    require_browser()
    async with sqlite_relay.client(alice) as owner:
        await set_profile(owner, alice, "Alice")
        channel = await create_channel(owner, alice, "standup", "private")
        for member in (bob, carol):
            await add_member(owner, alice, channel, member.pubkey)
    async with sqlite_relay.client(bob) as c:
        await set_profile(c, bob, "Bob")

    page = await LiveScenario.start(
        "huddle-race",
        {"url": sqlite_relay.http_url + "/", "alice": alice.secret, "bob": bob.secret, "order": order},
    )
    try:
        room = (await page.reached("together", timeout=180))["room"]
        if not room:  # the pages did not meet: let the scenario end and say where each one is
            page.go("cli-started")
            assert_all_passed(await page.report(timeout=120), CHECKS)
        async with sqlite_relay.client(alice) as reader:
            starts = await reader.query([{"kinds": [48100], "#h": [channel]}])
            ends = await reader.query([{"kinds": [48103], "#h": [channel]}])

            # Both pressed before either saw a huddle: two starts, one per person.
            assert sorted(e.pubkey for e in starts) == sorted([alice.pubkey, bob.pubkey])
            winner = min(starts, key=lambda e: (e.created_at, e.id))
            (loser,) = [e for e in starts if e.id != winner.id]
            assert _room(winner) == room
            # The loser ended its own huddle and archived its channel; the winner is live. When
            # the loser had been seated in its own huddle before it moved, the relay ends that
            # huddle too as its last participant leaves (a relay-signed 48103 for the same room).
            ended = {(e.pubkey, _room(e)) for e in ends}
            assert (loser.pubkey, _room(loser)) in ended
            assert ended <= {(loser.pubkey, _room(loser)), (sqlite_relay.relay.pubkey, _room(loser))}
            for start in starts:  # a huddle channel is private: its starter reads its state
                who = alice if start.pubkey == alice.pubkey else bob
                async with sqlite_relay.client(who) as starter:
                    metadata = await starter.query([{"kinds": [39000], "#d": [_room(start)]}])
                assert metadata and _archived(metadata, _room(start)) == (start is loser)

            seats = await reader.query([{"kinds": [48101], "#h": [channel]}])
            print(f"{order}: the loser sat in its own huddle: {any(_room(e) == _room(loser) for e in seats)}")

            # The CLI follows the same rule: a start beside the live huddle gives it back.
            cli = await buzz(sqlite_relay.url, carol, "huddle", "start", "--channel", channel)
            assert cli.code == 0, cli.stderr
            out = json.loads(cli.stdout)
            assert (out["huddle_channel_id"], out["started_event_id"]) == (room, winner.id)
            assert (out["started"], out["superseded_huddle_channel_id"]) == (False, None)
            again = await reader.query([{"kinds": [48100], "#h": [channel]}])
            assert sorted(e.id for e in again) == sorted(e.id for e in starts)  # nothing new
        page.go("cli-started")
        report = await page.report(timeout=120)
    finally:
        await page.abort()

    assert_all_passed(report, CHECKS)
