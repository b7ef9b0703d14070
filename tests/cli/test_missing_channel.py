"""A channel that does not exist is `not_found` (exit 1), not "not a channel member" (issue 24
item 8), while a private channel stays undisclosed by reads and writes: the relay answers both
alike (relay.md §4.3, §6.3) and the client asks its join answer, which already tells them apart
(§4.5; docs/decisions.md 123). Real relay, real executable."""

from __future__ import annotations

import uuid

from tests.cli.helpers import buzz
from tests.support.relay import Identity, RunningRelay

MEMBER = "restricted: not a channel member"


def _commands(channel: str, someone: str) -> list[tuple[str, ...]]:
    return [
        ("messages", "get", "--channel", channel),
        ("messages", "send", "--channel", channel, "--content", "anyone?"),
        ("messages", "search", "--query", "anyone", "--channel", channel),
        ("messages", "watch", "--channel", channel),  # over the WebSocket
        ("channels", "add-member", "--channel", channel, "--pubkey", someone),
        ("channels", "leave", "--channel", channel),
        ("channels", "rename", "--channel", channel, "--name", "renamed"),
        ("channels", "archive", "--channel", channel),
    ]


async def test_a_channel_that_does_not_exist_is_not_found(
    sqlite_relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    missing = str(uuid.uuid4())
    for args in _commands(missing, bob.pubkey):
        result = await buzz(sqlite_relay.url, alice, *args)
        assert (result.code, result.error["error"]) == (1, "not_found"), (args, result.stderr)
        assert result.error["message"] == f"channel not found: {missing}", args
        assert result.error["relay_message"] == MEMBER  # what the relay said, kept


async def test_a_private_channel_is_still_only_not_a_member_and_is_not_joined(
    sqlite_relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    url = sqlite_relay.url
    created = await buzz(url, bob, "channels", "create", "--name", "board", "--visibility", "private")
    private = created.json["channel_id"]
    for args in _commands(private, bob.pubkey):
        result = await buzz(url, alice, *args)
        assert result.code in (3, 4) and result.error["relay_message"] == MEMBER, (args, result.stderr)
        assert result.error["error"] != "not_found" and "not found" not in result.error["message"], args
    # asking the relay's join answer changed nothing: Bob is still alone in his channel
    members = (await buzz(url, bob, "channels", "members", "--channel", private)).json["members"]
    assert [m["pubkey"] for m in members] == [bob.pubkey]
