"""MCP: `send_private_dm` and `get_private_dms` (docs/decisions.md 282) — the same client API as
`buzz dms send --private` / `buzz dms read`, end-to-end encrypted, over a real `buzz mcp`."""

from __future__ import annotations

import uuid

from buzz.core import nip19
from tests.cli.helpers import private_reply
from tests.mcp.session import mcp_server
from tests.support.plaintext import database_holds
from tests.support.relay import Identity, RunningRelay


async def test_private_dms_over_mcp(sqlite_relay: RunningRelay, alice: Identity, bob: Identity) -> None:
    relay = sqlite_relay
    hello = f"mcp-private-{uuid.uuid4().hex}"
    async with mcp_server(relay.url, alice) as server:
        sent = await server.ok("send_private_dm", {"pubkeys": [nip19.npub(bob.pubkey)], "content": hello})
        assert sent["e2ee"] is True and sent["recipients"] == [bob.pubkey] and len(sent["wrap_ids"]) == 2
        answer = f"answer-{uuid.uuid4().hex}"
        assert (await private_reply(relay.url, bob, alice.pubkey, sent["event_id"], answer)).code == 0
        got = await server.ok("get_private_dms", {"pubkeys": [bob.pubkey]})
        assert [(m["pubkey"], m["content"], m["reply_to"]) for m in got["messages"]] == [
            (alice.pubkey, hello, None),
            (bob.pubkey, answer, sent["event_id"]),
        ]
        assert got["unreadable"] == 0
        bad = await server.error("send_private_dm", {"pubkeys": [], "content": "x"})
        assert bad["message"].startswith("invalid arguments for send_private_dm: ")
    assert not await database_holds(relay, hello) and not await database_holds(relay, answer)
