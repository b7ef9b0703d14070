"""Addressable records with ingest rules (relay.md §9 items 6, 7, 12) and the `shared` tag
(§5.2; §18 items 64, 65), over real WebSocket on both backends."""

from __future__ import annotations

import time

from buzz.core.channel_id import new_channel_id
from buzz.core.event import Event
from tests.support.relay import Identity, RunningRelay
from tests.workspace.helpers import accepted, create_channel, ids, refused


async def test_persona_rules(relay: RunningRelay, alice: Identity) -> None:
    async with relay.client(alice) as a:
        cases = [
            # bad input: a `shared` tag with three elements
            (
                [["d", "helper"], ["shared", "true", "x"]],
                'invalid: shared tag must be exactly ["shared","true"]',
            ),
            ([["d", "helper"], ["shared", "TRUE"]], 'invalid: shared tag must be exactly ["shared","true"]'),
            ([["d", "helper"], ["shared"]], 'invalid: shared tag must be exactly ["shared","true"]'),
            (
                [["d", "helper"], ["shared", "true"], ["shared", "true"]],
                "invalid: at most one shared tag is allowed",
            ),
            ([], "invalid: missing d tag"),
            ([["d", "a"], ["d", "b"]], "invalid: duplicate d tag"),
            ([["d", ""]], "invalid: empty d tag"),
            ([["d", "Helper"]], "invalid: persona d tag must match ^[a-z0-9][a-z0-9_-]{0,63}$"),
            ([["d", "-x"]], "invalid: persona d tag must match ^[a-z0-9][a-z0-9_-]{0,63}$"),
            ([["d", "x" * 65]], "invalid: persona d tag must match ^[a-z0-9][a-z0-9_-]{0,63}$"),
        ]
        for tags, expected in cases:
            await refused(
                relay, a, Event.create(alice.secret, 30175, '{"display_name": "Helper"}', tags), expected
            )
        await accepted(
            a,
            Event.create(
                alice.secret, 30175, '{"display_name": "Helper"}', [["d", "x" * 64], ["shared", "true"]]
            ),
        )
        await accepted(
            a, Event.create(alice.secret, 30175, '{"display_name": "Helper"}', [["d", "helper_1-b"]])
        )


async def test_team_catalog_rules(relay: RunningRelay, alice: Identity) -> None:
    async with relay.client(alice) as a:
        bad_d = "invalid: team catalog d tag must be at most 64 characters without whitespace or control characters"
        cases = [
            ([["d", "a b"]], bad_d),
            ([["d", "a\u0007"]], bad_d),
            ([["d", "ü" * 65]], bad_d),
            ([["d", "ok"], ["shared", "false"]], 'invalid: shared tag must be exactly ["shared","true"]'),
            ([["d", ""]], "invalid: empty d tag"),
        ]
        for tags, expected in cases:
            await refused(relay, a, Event.create(alice.secret, 30178, "{}", tags), expected)
        await accepted(a, Event.create(alice.secret, 30178, "{}", [["d", "Team-Ä_1"], ["shared", "true"]]))


async def test_event_reminder_rules(relay: RunningRelay, alice: Identity) -> None:
    now = int(time.time())
    year = 31_536_000
    async with relay.client(alice) as a:
        cases = [
            ([["not_before", str(now)]], "invalid: missing d tag"),
            ([["d", "r"], ["d", "s"], ["not_before", str(now)]], "invalid: duplicate d tag"),
            ([["d", ""], ["not_before", str(now)]], "invalid: empty d tag"),
            ([["d", "r"]], "invalid: malformed not_before"),
            ([["d", "r"], ["not_before", "0100"]], "invalid: malformed not_before"),
            ([["d", "r"], ["not_before", "1e9"]], "invalid: malformed not_before"),
            (
                [["d", "r"], ["not_before", str(now)], ["not_before", str(now)]],
                "invalid: malformed not_before",
            ),
            ([["d", "r"], ["not_before", str(2**53)]], "invalid: malformed not_before"),
            ([["d", "r"], ["not_before", str(now + year + 60)]], "invalid: not_before too far in future"),
            (
                [["d", "r"], ["not_before", str(now)], ["expiration", str(now)]],
                "invalid: expiration before not_before",
            ),
        ]
        for tags, expected in cases:
            await refused(relay, a, Event.create(alice.secret, 30300, "sealed", tags), expected)
        ok = Event.create(
            alice.secret,
            30300,
            "sealed",
            [["d", "r"], ["not_before", str(now)], ["expiration", str(now + 1)]],
        )
        await accepted(a, ok)
        assert await ids(a, {"kinds": [30300], "authors": [alice.pubkey]}) == {ok.id}


async def test_workflow_definition_rules(relay: RunningRelay, alice: Identity) -> None:
    async with relay.client(alice) as a:
        c = await create_channel(a, alice)
        for tags in (
            [["h", c]],
            [["h", c], ["d", "flow"]],
            [["h", c], ["d", new_channel_id()], ["d", new_channel_id()]],
        ):
            await refused(
                relay,
                a,
                Event.create(alice.secret, 30620, "steps: []", tags),
                "invalid: workflow d tag must be a UUID",
            )
        await refused(
            relay,
            a,
            Event.create(alice.secret, 30620, "steps: []", [["h", c], ["d", new_channel_id()]]),
            "invalid: workflow YAML parse error: name: is required (line 1, column 1)",
        )
        valid = "name: Flow\ntrigger: {on: webhook}\nsteps:\n  - {id: s, action: send_message, text: hi}\n"
        flow = Event.create(alice.secret, 30620, valid, [["h", c], ["d", new_channel_id()]])
        await accepted(a, flow)
        stored = await relay.relay.store.get(flow.id)
        assert stored is not None and stored.channel_id == c
        no_h = Event.create(alice.secret, 30620, "steps: []", [["d", new_channel_id()]])
        await refused(relay, a, no_h, "invalid: channel-scoped events must include an h tag")


async def test_shared_gate(relay: RunningRelay, alice: Identity, bob: Identity) -> None:
    async with relay.client(alice) as a, relay.client(bob) as b:
        shared = Event.create(
            alice.secret, 30175, '{"display_name": "Helper"}', [["d", "shared-one"], ["shared", "true"]]
        )
        private = Event.create(alice.secret, 30175, '{"display_name": "Helper"}', [["d", "private-one"]])
        team = Event.create(alice.secret, 30176, '{"name": "Team"}', [["d", "team"]])
        for event in (shared, private, team):
            await accepted(a, event)
        mine = {shared.id, private.id, team.id}
        flt = {"kinds": [30175, 30176], "authors": [alice.pubkey]}
        assert await ids(a, flt) == mine
        assert await ids(b, flt) == {shared.id, team.id}
        assert await b.count([flt]) == 2 and await a.count([flt]) == 3
