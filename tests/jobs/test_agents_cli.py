"""`buzz agents personas|teams|managed` (jobs spec §13.2, checklist items 46, 61, 62): the real
executable against a real relay; secrets never signed; only the agent's owner sets its policy."""

from __future__ import annotations

import json

from buzz.core.event import Event
from buzz.core.nip19 import npub, nsec
from buzz.core.nip_oa import build_auth_tag
from tests.cli.helpers import buzz
from tests.support.relay import Identity, RunningRelay


async def test_personas_teams_and_managed(sqlite_relay: RunningRelay, alice: Identity, bob: Identity) -> None:
    url, agent = sqlite_relay.url, Identity.new()
    tag = build_auth_tag(alice.secret, agent.pubkey)
    async with sqlite_relay.client(agent, auth_tags=[tag]) as c:  # the agent's profile names its owner
        profile = Event.create(agent.secret, 0, json.dumps({"name": "helper"}), [tag])
        assert (await c.publish(profile)).accepted

    secret = await buzz(url, alice, "agents", "personas", "set", "--slug", "reviewer", "--display-name", "Reviewer",
                        "--system-prompt", f"use key {nsec(bob.secret)}")  # fmt: skip
    assert secret.code == 1 and "must not carry secrets (nsec1 key)" in secret.error["message"]
    assert (await buzz(url, alice, "agents", "personas", "list", "--mine")).json == {"personas": []}

    made = (await buzz(url, alice, "agents", "personas", "set", "--slug", "reviewer", "--display-name", "Reviewer",
                       "--system-prompt", "-", "--model", "m1", "--shared", stdin=b"Be kind.\n")).json  # fmt: skip
    edited = (await buzz(url, alice, "agents", "personas", "set", "--slug", "reviewer", "--model", "m2")).json
    assert made["slug"] == edited["slug"] == "reviewer"
    got = (
        await buzz(url, bob, "agents", "personas", "get", "--slug", "reviewer", "--author", alice.pubkey)
    ).json
    assert (
        got["persona"]["system_prompt"] == "Be kind."
        and got["persona"]["model"] == "m2"
        and got["persona"]["shared"]
    )

    team = (
        await buzz(
            url, alice, "agents", "teams", "set", "--team", "core", "--name", "Core", "--persona", "reviewer"
        )
    ).json
    (row,) = (await buzz(url, bob, "agents", "teams", "list", "--author", alice.pubkey)).json["teams"]
    assert (
        row["event_id"] == team["event_id"] and "instructions" in row and row["persona_ids"] == ["reviewer"]
    )

    mine = (
        await buzz(
            url,
            alice,
            "agents",
            "managed",
            "set",
            "--agent",
            agent.pubkey,
            "--respond-to",
            "members",
            "--parallelism",
            "2",
        )
    ).json
    assert mine["agent"] == agent.pubkey
    (listed,) = (await buzz(url, alice, "agents", "managed", "list")).json["agents"]
    assert (listed["respond_to"], listed["parallelism"]) == ("members", 2)
    again = (
        await buzz(url, alice, "agents", "managed", "set", "--agent", agent.pubkey, "--respond-to", "anyone")
    ).json
    got = (await buzz(url, alice, "agents", "managed", "get", "--agent", agent.pubkey)).json
    assert got["event_id"] == again["event_id"] and (got["respond_to"], got["parallelism"]) == (
        "anyone",
        2,
    )  # merged
    # --allow adds to the list the head holds (what a refused asker is told to ask for)
    for who in (bob.pubkey, npub(alice.pubkey), npub(bob.pubkey)):
        await buzz(url, alice, "agents", "managed", "set", "--agent", agent.pubkey, "--allow", who)
    got = (await buzz(url, alice, "agents", "managed", "get", "--agent", agent.pubkey)).json
    assert got["respond_to_allowlist"] == [bob.pubkey, alice.pubkey] and got["respond_to"] == "anyone"
    stranger = await buzz(
        url, bob, "agents", "managed", "set", "--agent", agent.pubkey, "--respond-to", "anyone"
    )
    assert stranger.code == 1 and "not the owner" in stranger.error["message"]

    gone = (await buzz(url, alice, "agents", "personas", "delete", "--slug", "reviewer")).json
    assert gone["slug"] == "reviewer"
    missing = await buzz(url, alice, "agents", "personas", "get", "--slug", "reviewer")
    assert (missing.code, missing.error["error"]) == (1, "not_found")
