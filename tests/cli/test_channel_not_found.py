"""A channel the caller cannot see is one answer from every command (client/errors.py): a
channel that does not exist and a private channel of others both give `not_found` (exit 1)
"channel not found: <id>", with no relay text that could tell them apart."""

from __future__ import annotations

import uuid

import pytest

from tests.cli.helpers import buzz
from tests.support.relay import Identity, RunningRelay


def _commands(channel: str, someone: str) -> list[tuple[str, ...]]:
    c = ("--channel", channel)
    return [
        ("channels", "get", *c),
        ("channels", "members", *c),
        ("channels", "join", *c),
        ("channels", "leave", *c),
        ("channels", "rename", *c, "--name", "x"),
        ("channels", "archive", *c),
        ("channels", "unarchive", *c),
        ("channels", "delete", *c),
        ("channels", "add-member", *c, "--pubkey", someone),
        ("channels", "remove-member", *c, "--pubkey", someone),
        ("messages", "get", *c),
        ("messages", "send", *c, "--content", "hello?"),
        ("messages", "send", *c, "--content", "hello?", "--mention", someone),
        ("messages", "search", *c, "--query", "hello"),
        ("messages", "watch", *c),
        ("huddle", "start", *c),
        ("huddle", "status", *c),
        ("huddle", "leave", *c),
        ("huddle", "join", *c, "--duration", "1"),
    ]


@pytest.mark.timeout(300)
async def test_missing_and_private_channels_are_the_same_not_found_everywhere(
    sqlite_relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    url = sqlite_relay.url
    private = (await buzz(url, bob, "channels", "create", "--name", "secret", "--visibility", "private")).json
    missing = str(uuid.uuid4())
    for channel in (missing, private["channel_id"]):
        for args in _commands(channel, bob.pubkey):
            result = await buzz(url, alice, *args)
            assert (result.code, result.error) == (
                1,
                {"error": "not_found", "message": f"channel not found: {channel}", "retryable": False},
            ), (args, result.stderr)


async def test_a_visible_channel_keeps_the_relays_refusal(
    sqlite_relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    """Renaming someone else's open channel is a refusal, not a missing channel."""
    url = sqlite_relay.url
    lobby = (await buzz(url, bob, "channels", "create", "--name", "lobby", "--visibility", "open")).json
    result = await buzz(url, alice, "channels", "rename", "--channel", lobby["channel_id"], "--name", "mine")
    assert result.code == 4 and result.error["relay_message"].startswith("invalid: actor not authorized")
