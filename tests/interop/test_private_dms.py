"""Interop: NIP-17 private DMs between nostr-tools' own `nip17` helper and `buzz dms`, both
ways, on SQLite and PostgreSQL; the relay's database holds no plaintext of them. (The browser's
side is tests/web/test_private_dms.py.)"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

from tests.cli.helpers import buzz
from tests.interop.test_nostr_tools import node  # noqa: F401  (fixture)
from tests.support.plaintext import database_holds
from tests.support.relay import Identity, RunningRelay

HERE = Path(__file__).resolve().parent


async def nostr_tools(node_path: str, *args: str) -> dict[str, Any]:
    proc = await asyncio.create_subprocess_exec(
        node_path,
        str(HERE / "nostr_tools_nip17.mjs"),
        *args,
        cwd=HERE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, stderr.decode()
    return json.loads(stdout.decode().strip().splitlines()[-1])


async def test_nostr_tools_nip17_and_buzz_dms(
    node: str,  # noqa: F811
    relay: RunningRelay,
    alice: Identity,
    bob: Identity,
) -> None:
    url = relay.url
    hello = f"from-nostr-tools-{uuid.uuid4().hex}"
    sent = await nostr_tools(node, "send", url, alice.secret, bob.pubkey, hello)

    read = (await buzz(url, bob, "dms", "read", "--pubkey", alice.pubkey)).json
    assert [(m["pubkey"], m["content"], m["e2ee"]) for m in read["messages"]] == [(alice.pubkey, hello, True)]
    assert read["unreadable"] == 0 and len(sent["wrapIds"]) == 2
    # nostr-tools seals one rumor per wrap (its own copy is tagged with the sender alone): the id
    # Bob answers is the one of his copy.
    hello_id = read["messages"][0]["id"]

    answer = f"from-buzz-{uuid.uuid4().hex}"
    ours = (
        await buzz(
            url,
            bob,
            "dms",
            "send",
            "--private",
            "--pubkey",
            alice.pubkey,
            "--reply-to",
            hello_id,
            "--content",
            answer,
        )
    ).json
    theirs = await nostr_tools(node, "read", url, alice.secret)
    assert theirs["unreadable"] == 0
    got = {m["content"]: m for m in theirs["messages"]}
    assert set(got) == {hello, answer}  # her own copy and Bob's answer
    assert got[answer]["id"] == ours["event_id"] and got[answer]["pubkey"] == bob.pubkey
    assert ["e", hello_id] in got[answer]["tags"] and ["p", alice.pubkey] in got[answer]["tags"]

    for text in (hello, answer):
        assert not await database_holds(relay, text)
