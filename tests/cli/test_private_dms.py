"""`buzz dms send --private`, `buzz dms read`, `buzz dms list`, `buzz dms inbox` on a real relay
(SQLite and PostgreSQL): private DMs beside channel DMs, marked `e2ee`, and no plaintext of
them in the relay's database (docs/decisions.md 280–284)."""

from __future__ import annotations

import uuid

import pytest

from buzz.core import nip19
from tests.cli.helpers import buzz, private_reply
from tests.support.plaintext import database_holds
from tests.support.relay import Identity, RunningRelay


@pytest.mark.timeout(120)
async def test_private_dm_round_trip(
    relay: RunningRelay, alice: Identity, bob: Identity, carol: Identity
) -> None:
    url = relay.url
    secret = f"private-{uuid.uuid4().hex}"
    plain = f"plain-{uuid.uuid4().hex}"

    sent = (
        await buzz(
            url, alice, "dms", "send", "--private", "--pubkey", nip19.npub(bob.pubkey), "--content", secret
        )
    ).json
    assert sent["e2ee"] is True and sent["recipients"] == [bob.pubkey] and len(sent["wrap_ids"]) == 2
    ordinary = (await buzz(url, alice, "dms", "send", "--pubkey", bob.pubkey, "--content", plain)).json
    assert ordinary["e2ee"] is False and ordinary["channel_id"]

    read = (await buzz(url, bob, "dms", "read", "--pubkey", alice.pubkey)).json
    by_content = {m["content"]: m for m in read["messages"]}
    assert by_content[secret]["e2ee"] is True and by_content[secret]["pubkey"] == alice.pubkey
    assert by_content[secret]["id"] == sent["event_id"]
    assert by_content[plain]["e2ee"] is False
    assert read["unreadable"] == 0

    # Bob answers privately; Alice sees the answer, and her own message through her copy.
    answer = (await private_reply(url, bob, alice.pubkey, sent["event_id"], "got it")).json
    mine = (await buzz(url, alice, "dms", "read", "--pubkey", bob.pubkey)).json["messages"]
    private = [(m["pubkey"], m["content"], m["reply_to"]) for m in mine if m["e2ee"]]
    assert sorted(private) == sorted([(alice.pubkey, secret, None), (bob.pubkey, "got it", sent["event_id"])])
    assert answer["reply_to"] == sent["event_id"]

    rows = (await buzz(url, bob, "dms", "list")).json["dms"]
    assert [(r["channel_id"] is None, r["e2ee"], r["participants"]) for r in rows][-1] == (
        True,
        True,
        [alice.pubkey],
    )
    assert rows[-1]["messages"] == 2
    assert rows[0]["e2ee"] is False and rows[0]["channel_id"] == ordinary["channel_id"]

    # Carol reads nothing of it: the wraps are Bob's and Alice's alone.
    assert (await buzz(url, carol, "dms", "read", "--pubkey", alice.pubkey)).json["messages"] == []
    assert (await buzz(url, carol, "dms", "list")).json["dms"] == []

    # The operator holds the ordinary DM's text (the check works) but not the private one.
    assert await database_holds(relay, plain)
    assert not await database_holds(relay, secret)
    assert not await database_holds(relay, "got it")


async def test_inbox_and_bad_input(sqlite_relay: RunningRelay, alice: Identity, bob: Identity) -> None:
    url = sqlite_relay.url
    inbox = (await buzz(url, alice, "dms", "inbox")).json
    assert inbox["relays"] == [url]
    bad = await buzz(url, alice, "dms", "send", "--private", "--pubkey", "00" * 32, "--content", "x")
    assert bad.code == 1 and bad.error["error"] == "user_error"
    empty = await buzz(url, alice, "dms", "send", "--private", "--pubkey", bob.pubkey, "--content", " ")
    assert empty.code == 1 and "whitespace" in empty.error["message"]
    long = await buzz(
        url, alice, "dms", "send", "--private", "--pubkey", bob.pubkey, "--content", "x" * 30_001
    )
    assert long.code == 1 and "30000" in long.error["message"]
