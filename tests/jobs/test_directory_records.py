"""Directory records at the relay (jobs spec §11, checklist items 43–48): contents checked,
secrets refused with the record's name, the store unchanged."""

from __future__ import annotations

import json

from buzz.core.event import Event
from buzz.core.nip19 import nsec
from tests.support.relay import Identity, RunningRelay
from tests.workspace.helpers import accepted, refused


async def test_records_refuse_secrets_and_bad_fields(sqlite_relay: RunningRelay, alice: Identity) -> None:
    agent = Identity.new()
    async with sqlite_relay.client(alice) as c:

        async def no(kind: int, d: str, body: object, message: str) -> None:
            await refused(
                sqlite_relay, c, Event.create(alice.secret, kind, json.dumps(body), [["d", d]]), message
            )

        await no(
            30175,
            "Bad_Slug",
            {"display_name": "R"},
            "invalid: persona d tag must match ^[a-z0-9][a-z0-9_-]{0,63}$",
        )
        await no(30175, "r", {"system_prompt": "x"}, "invalid: persona display_name is required")
        await no(
            30175,
            "r",
            {"display_name": "R", "apiKey": "k"},
            "invalid: persona content must not carry secrets (apiKey)",
        )
        await no(
            30176,
            "t",
            {"name": "T", "x": {"ENV_VARS": {}}},
            "invalid: team content must not carry secrets (ENV_VARS)",
        )
        await no(
            30177, agent.pubkey, {"respond_to": "anyone", "note": nsec(alice.secret)},
            "invalid: managed agent content must not carry secrets (nsec1 key)",
        )  # fmt: skip
        await no(
            30178,
            "c",
            {"private_key": "x"},
            "invalid: team catalog content must not carry secrets (private_key)",
        )
        await no(
            30177,
            "not-hex",
            {"parallelism": 2},
            "invalid: managed agent d tag must be the agent's pubkey (64 lowercase hex)",
        )
        for p in (0, 33):
            await no(
                30177,
                agent.pubkey,
                {"parallelism": p},
                "invalid: managed agent parallelism must be an integer 1-32",
            )
        await no(
            30178,
            "has space",
            {},
            "invalid: team catalog d tag must be at most 64 characters without whitespace or control characters",
        )
        await accepted(c, Event.create(alice.secret, 30178, "{}", [["d", "builtin-team:welcome"]]))
        await accepted(
            c,
            Event.create(
                alice.secret,
                30177,
                json.dumps({"respond_to": "members", "parallelism": 3}),
                [["d", agent.pubkey]],
            ),
        )
        await accepted(
            c,
            Event.create(
                alice.secret,
                30176,
                json.dumps({"name": "Core", "instructions": None, "persona_ids": []}),
                [["d", "core"]],
            ),
        )
