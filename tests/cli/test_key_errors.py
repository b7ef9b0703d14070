"""A bad private key is one clear message, the same from every command: never the doubled
"invalid private key: invalid secret key: …" nor the key library's own text for zero."""

from __future__ import annotations

import json

import pytest

from buzz.client.identity import BAD_KEY_FORMAT, BAD_KEY_VALUE
from buzz.core.keys import public_key
from buzz.core.nip_oa import build_auth_tag
from tests.cli.helpers import buzz

ZERO, ORDER_AND_ABOVE = "0" * 64, "f" * 64
COMMANDS = [
    ("keys", "show"),
    ("keys", "attest", "--agent", "ab" * 32),
    ("messages", "get", "--channel", "3f2b7c1e-8a4d-4e2f-9c1a-5b6d7e8f9a0b"),
    ("mem", "ls"),
    ("agent", "run", "--agent-command", "true"),
]


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("xyz", BAD_KEY_FORMAT),
        ("nsec1" + "q" * 58, BAD_KEY_FORMAT),  # a bech32 checksum that does not match
        (ZERO, BAD_KEY_VALUE),
        (ORDER_AND_ABOVE, BAD_KEY_VALUE),
    ],
)
async def test_a_bad_key_is_one_message_from_every_command(key: str, message: str) -> None:
    for args in COMMANDS:
        result = await buzz("ws://127.0.0.1:9", None, *args, env={"BUZZ_PRIVATE_KEY": key})
        assert (result.code, result.error) == (
            3,
            {"error": "key_error", "message": message, "retryable": False},
        ), args
    assert message.count("invalid") == 1 and "scalar" not in message


async def test_an_agent_tag_left_exported_for_the_owner_key_says_to_unset_it() -> None:
    """Following the README in one shell leaves the agent's BUZZ_AUTH_TAG exported when the
    reader acts as the owner again: the tag then names the CLI key itself as owner."""
    owner_secret, agent_secret = "11" * 32, "22" * 32
    tag = build_auth_tag(owner_secret, public_key(agent_secret), "")
    env = {"BUZZ_PRIVATE_KEY": owner_secret, "BUZZ_AUTH_TAG": json.dumps(tag)}
    for args in COMMANDS[2:]:  # the commands that use the tag (keys commands do not)
        result = await buzz("ws://127.0.0.1:9", None, *args, env=env)
        assert result.code == 3, (args, result)
        message = result.error["message"]
        assert message.startswith("invalid BUZZ_AUTH_TAG: owner equals the agent"), args
        assert "unset BUZZ_AUTH_TAG when acting as the owner" in message, args
