"""A newcomer's CLI findings (docs/decisions.md 107), each against a real relay with the real
`buzz` executable: pubkeys that are not curve points, malformed relay URLs, where the private
key goes, and a relay URL that points past the relay."""

from __future__ import annotations

import pytest

from buzz.core import nip19
from buzz.core.keys import is_curve_pubkey
from tests.cli.helpers import buzz
from tests.support.relay import Identity, RunningRelay

# Two 64-hex strings no key pair has: x = 0 is not on secp256k1, and ff…ff is not below p.
NOT_ON_CURVE = ("0" * 64, "f" * 64)


async def _private_channel(url: str, owner: Identity) -> str:
    created = await buzz(url, owner, "channels", "create", "--name", "findings", "--visibility", "private")
    return str(created.json["channel_id"])


def test_the_off_curve_keys_here_are_not_curve_points_and_real_keys_are() -> None:
    assert not any(is_curve_pubkey(k) for k in NOT_ON_CURVE)
    assert is_curve_pubkey(Identity.new().pubkey)


async def test_add_member_and_dms_refuse_a_key_that_is_not_a_curve_point(
    sqlite_relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    url = sqlite_relay.url
    channel = await _private_channel(url, alice)
    for key in (*NOT_ON_CURVE, nip19.npub("f" * 64)):
        for args in (
            ("channels", "add-member", "--channel", channel, "--pubkey", key),
            ("dms", "open", "--pubkey", key),
            ("dms", "open", "--pubkey", bob.pubkey, "--pubkey", key),
        ):
            refused = await buzz(url, alice, *args)
            assert (refused.code, refused.error["error"], refused.error["retryable"]) == (
                1,
                "user_error",
                False,
            ), args
            assert "not a secp256k1 public key" in refused.error["message"], args
    members = (await buzz(url, alice, "channels", "members", "--channel", channel)).json["members"]
    assert [m["pubkey"] for m in members] == [alice.pubkey]  # nothing reached the relay
    assert (await buzz(url, alice, "dms", "list")).json["dms"] == []

    # a real key still goes through, and removing takes any 64 hex (undoing stays possible)
    added = await buzz(url, alice, "channels", "add-member", "--channel", channel, "--pubkey", bob.pubkey)
    assert added.json["pubkey"] == bob.pubkey
    removed = await buzz(url, alice, "channels", "remove-member", "--channel", channel, "--pubkey", "f" * 64)
    assert removed.json["pubkey"] == "f" * 64


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("ws://127.0.0.1:99999", "port 99999 is out of range (1-65535)"),
        ("ws://127.0.0.1:0", "port 0 is out of range (1-65535)"),
        ("ws://127.0.0.1:abc", "port 'abc' is not a number"),
        ("ftp://127.0.0.1:3000", "it must start with ws://, wss://, http:// or https://"),
        ("127.0.0.1:3000", "it must start with ws://, wss://, http:// or https://"),
        ("ws://:3000", "no host"),
    ],
)
async def test_a_malformed_relay_url_is_bad_input_naming_its_source(
    alice: Identity, url: str, problem: str
) -> None:
    from_env = await buzz(url, alice, "channels", "list")
    assert from_env.error == {
        "error": "user_error",
        "message": f"BUZZ_RELAY_URL: invalid relay URL {url!r}: {problem}",
        "retryable": False,
    }
    assert from_env.code == 1
    from_flag = await buzz(None, alice, "--relay", url, "channels", "list")
    assert (from_flag.code, from_flag.error["message"]) == (
        1,
        f"--relay: invalid relay URL {url!r}: {problem}",
    )
    # the commands that open their own connections check it the same way
    for args in (("huddle", "list"), ("mem", "ls", "--owner", Identity.new().pubkey)):
        other = await buzz(url, alice, *args)
        assert (other.code, other.error["message"]) == (1, from_env.error["message"]), args


async def test_mcp_and_the_agent_harness_refuse_a_malformed_relay_url_before_starting(
    alice: Identity,
) -> None:
    bad = "ws://127.0.0.1:99999"
    problem = f"invalid relay URL {bad!r}: port 99999 is out of range (1-65535)"
    mcp = await buzz("ws://127.0.0.1:9", alice, "mcp", "--relay", bad)
    assert (mcp.code, mcp.error["error"], mcp.error["message"]) == (
        1,
        "user_error",
        f"buzz mcp --relay: {problem}",
    )
    # the harness names what was used: the variable here (issue 24 item 8), the flag below
    harness = await buzz(bad, alice, "agent", "run", "--agent-command", "true")
    assert (harness.code, harness.error["message"]) == (1, f"BUZZ_RELAY_URL: {problem}")
    harness = await buzz(None, alice, "agent", "run", "--agent-command", "true", "--relay", bad)
    assert (harness.code, harness.error["message"]) == (1, f"--relay: {problem}")
    harness = await buzz(None, alice, "--relay", bad, "agent", "run", "--agent-command", "true")
    assert (harness.code, harness.error["message"]) == (1, f"--relay: {problem}")


async def test_a_valid_url_nobody_answers_stays_a_retryable_network_error(alice: Identity) -> None:
    unreachable = await buzz("ws://127.0.0.1:9", alice, "channels", "list")
    assert (unreachable.code, unreachable.error["error"], unreachable.error["retryable"]) == (
        2,
        "network_error",
        True,
    )


async def test_a_relay_url_with_a_path_says_where_the_relay_is(
    sqlite_relay: RunningRelay, alice: Identity
) -> None:
    """The relay answers, but not at `/foo`: exit 2 as before, now saying what to check."""
    base = sqlite_relay.url.replace("ws://", "http://")
    wrong = await buzz(sqlite_relay.url + "/foo", alice, "channels", "list")
    assert (wrong.code, wrong.error["error"], wrong.error["retryable"]) == (2, "relay_error", False)
    assert wrong.error["message"] == (
        f"HTTP 404: no buzz relay answers at {base}/foo (a relay is served at the root of its host "
        "and port, e.g. ws://127.0.0.1:3000; check --relay / BUZZ_RELAY_URL)"
    )


async def test_the_missing_key_hint_says_where_the_key_goes(
    sqlite_relay: RunningRelay, alice: Identity
) -> None:
    url = sqlite_relay.url
    missing = await buzz(url, None, "channels", "list")
    assert (missing.code, missing.error["error"]) == (3, "auth_error")
    message = missing.error["message"]
    assert "BUZZ_PRIVATE_KEY" in message and "buzz --private-key <nsec or hex> channels list" in message

    # following the hint works; the option after the group says where it goes instead
    assert (await buzz(url, None, "--private-key", alice.secret, "channels", "list")).json == {"channels": []}
    misplaced = await buzz(url, None, "channels", "list", "--private-key", alice.secret)
    assert misplaced.error == {
        "error": "user_error",
        "message": "--private-key is an option of buzz itself: give it before the command group "
        "(buzz --private-key … channels list)",
        "retryable": False,
    }
    assert misplaced.code == 1 and alice.secret not in misplaced.stderr
    in_mem = await buzz(url, None, "mem", "ls", "--relay", url)
    assert (in_mem.code, in_mem.error["message"]) == (
        1,
        "--relay is an option of buzz itself: give it before the command group (buzz --relay … mem ls)",
    )


async def test_agent_run_help_shows_each_valued_flags_default() -> None:
    """`--max-attempts` (and every valued harness flag with a default) shows it in the help."""
    import re

    from buzz.agent.config import FLAGS

    shown = await buzz(None, None, "agent", "run", "--help")
    text = re.sub(r"\s+", " ", shown.stdout)
    assert "--max-attempts TEXT attempts of a failing batch" in text
    assert "[default: 10; env BUZZ_ACP_MAX_ATTEMPTS]" in text
    for flag in FLAGS:
        if not flag.is_flag and isinstance(flag.default, int):
            assert f"default: {flag.default}; env {flag.env}]" in text, flag.option


async def test_usage_and_key_errors_say_where_to_look(sqlite_relay: RunningRelay, alice: Identity) -> None:
    """A missing or unknown option names the command's --help; a malformed key names the
    command that makes one (a newcomer's finding: both were bare)."""
    missing = await buzz(sqlite_relay.url, alice, "messages", "send", "hi")
    assert missing.code == 1
    assert missing.error["message"] == "Missing option '--channel' (see buzz messages send --help)"
    unknown = await buzz(sqlite_relay.url, alice, "channels", "list", "--bogus")
    assert unknown.error["message"] == "No such option '--bogus' (see buzz channels list --help)"
    bad_key = await buzz(sqlite_relay.url, None, "channels", "list", env={"BUZZ_PRIVATE_KEY": "xyz"})
    assert bad_key.code == 3 and "buzz keys generate" in bad_key.error["message"]
