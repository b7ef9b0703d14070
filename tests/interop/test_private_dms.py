"""Interop: NIP-17 private DMs between nostr-tools' own `nip17` helper (and rust-nostr's,
through nostr-sdk's Python bindings) and `buzz dms`, both ways, on SQLite and PostgreSQL; the
relay's database holds no plaintext of them. (The browser's side is tests/web/test_private_dms.py.)"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from pathlib import Path
from typing import Any

from buzz.core.event import Event
from tests.cli.helpers import buzz, private_reply
from tests.interop.test_nostr_tools import node  # noqa: F401  (fixture)
from tests.support.deadline import scaled
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
    stdout, stderr = await asyncio.wait_for(proc.communicate(), scaled(60))
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
    ours = (await private_reply(url, bob, alice.pubkey, hello_id, answer)).json
    theirs = await nostr_tools(node, "read", url, alice.secret)
    assert theirs["unreadable"] == 0
    got = {m["content"]: m for m in theirs["messages"]}
    assert set(got) == {hello, answer}  # her own copy and Bob's answer
    assert got[answer]["id"] == ours["event_id"] and got[answer]["pubkey"] == bob.pubkey
    assert ["e", hello_id] in got[answer]["tags"] and ["p", alice.pubkey] in got[answer]["tags"]

    for text in (hello, answer):
        assert not await database_holds(relay, text)


async def nostr_sdk(*args: str, stdin: str = "") -> str:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(HERE / "nostr_sdk_nip17.py"),
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(proc.communicate(stdin.encode()), scaled(60))
    assert proc.returncode == 0, stderr.decode()[-2000:]
    return stdout.decode().strip().splitlines()[-1]


async def test_nostr_sdk_nip17_and_buzz_dms(relay: RunningRelay, alice: Identity, bob: Identity) -> None:
    """rust-nostr's NIP-17 (nostr-sdk's `nip17_make_private_msg`, `UnwrappedGift`) and ours
    read each other's wraps through the relay, both ways."""
    url = relay.url
    hello = f"from-nostr-sdk-{uuid.uuid4().hex}"
    wrap = Event.from_json(json.loads(await nostr_sdk("wrap", alice.secret, bob.pubkey, hello)))
    async with relay.client(alice) as client:
        assert (await client.publish(wrap)).accepted
    read = (await buzz(url, bob, "dms", "read", "--pubkey", alice.pubkey)).json
    assert [(m["pubkey"], m["content"], m["e2ee"]) for m in read["messages"]] == [(alice.pubkey, hello, True)]

    answer = f"from-buzz-to-the-sdk-{uuid.uuid4().hex}"
    hello_id = read["messages"][0]["id"]
    ours = (await private_reply(url, bob, alice.pubkey, hello_id, answer)).json
    async with relay.client(alice) as client:
        wraps = await client.query([{"kinds": [1059], "#p": [alice.pubkey]}])
    theirs = json.loads(await nostr_sdk("unwrap", alice.secret, stdin="\n".join(w.to_json() for w in wraps)))
    assert theirs["unreadable"] == 0
    assert [(m["id"], m["sender"], m["content"]) for m in theirs["messages"]] == [
        (ours["event_id"], bob.pubkey, answer)
    ]
    assert ["e", hello_id] in theirs["messages"][0]["tags"]
    for text in (hello, answer):
        assert not await database_holds(relay, text)
