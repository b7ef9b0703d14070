"""A refusal names what the user typed (issue 24 item 8): `--auth-tag` when the flag was given,
`BUZZ_AUTH_TAG` when the variable was, in every face that reads it. The real executable; the
tag is refused before any connection, so no relay is needed."""

from __future__ import annotations

import pytest

from tests.cli.helpers import buzz
from tests.support.relay import Identity

RELAY = "ws://127.0.0.1:9"  # nothing answers there: the tag is checked first
OWNER_ARGS = ("--owner", "ab" * 32)


@pytest.mark.parametrize(
    "command",
    [
        ("channels", "list"),
        ("mem", "ls", *OWNER_ARGS),
        ("huddle", "list"),
        ("agent", "run", "--agent-command", "true"),
    ],
)
async def test_a_bad_auth_tag_is_named_as_it_was_given(command: tuple[str, ...]) -> None:
    agent = Identity.new()
    typed = await buzz(RELAY, agent, "--auth-tag", "not a tag", *command)
    assert (typed.code, typed.error["error"]) == (3, "auth_error"), typed.stderr
    assert typed.error["message"].startswith("invalid --auth-tag: "), command
    exported = await buzz(RELAY, agent, *command, env={"BUZZ_AUTH_TAG": "not a tag"})
    assert (exported.code, exported.error["error"]) == (3, "auth_error"), exported.stderr
    assert exported.error["message"].startswith("invalid BUZZ_AUTH_TAG: "), command


async def test_mcp_names_its_own_auth_tag_option() -> None:
    refused = await buzz(RELAY, Identity.new(), "mcp", "--auth-tag", "not a tag")
    assert refused.code == 3 and refused.error["message"].startswith("invalid buzz mcp --auth-tag: ")


async def test_the_owners_own_tag_says_to_leave_out_what_was_used() -> None:
    owner, agent = Identity.new(), Identity.new()
    tag = (await buzz(None, owner, "keys", "attest", "--agent", agent.pubkey)).json["auth_tag"]
    text = '["' + '","'.join(tag) + '"]'
    typed = await buzz(RELAY, owner, "--auth-tag", text, "channels", "list")
    assert typed.error["message"].endswith("leave out --auth-tag when acting as the owner")
    exported = await buzz(RELAY, owner, "channels", "list", env={"BUZZ_AUTH_TAG": text})
    assert exported.error["message"].endswith("unset BUZZ_AUTH_TAG when acting as the owner")
