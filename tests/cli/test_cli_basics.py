"""The `buzz` CLI conventions (agents.md §2.1, §9.2 items 6–8) with the real executable."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import click
import orjson
from click.testing import CliRunner

from buzz.cli.main import cli
from tests.cli.helpers import BUZZ, _env, buzz
from tests.support.relay import Identity, RunningRelay, relay_on


def _command_paths(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    # list_commands / get_command, not group.commands: `buzz` loads its groups lazily
    paths = [prefix] if prefix else []
    ctx = click.Context(group)
    for name in sorted(group.list_commands(ctx)):
        command = group.get_command(ctx, name)
        assert command is not None, name
        if isinstance(command, click.Group):
            paths += _command_paths(command, (*prefix, name))
        else:
            paths.append((*prefix, name))
    return paths


def test_help_of_every_command_shows_an_example() -> None:
    # In-process (click's runner on the real command tree): 75 executables would spend a minute
    # importing; `buzz --help` as a real executable is checked below.
    paths = _command_paths(cli)  # every group and command, admin and huddle included
    assert ("messages", "send") in paths and ("users", "set-presence") in paths and ("channels",) in paths
    assert ("admin", "members", "add") in paths and ("huddle", "status") in paths
    runner = CliRunner()
    for path in paths:
        result = runner.invoke(cli, [*path, "--help"], prog_name="buzz")
        assert result.exit_code == 0, (path, result.output)
        assert "Example" in result.output, path


async def test_the_executable_prints_help() -> None:
    result = await buzz(None, None, "--help")
    assert result.code == 0 and "Example" in result.stdout and "messages" in result.stdout


async def test_profiles_and_presence(sqlite_relay: RunningRelay, alice: Identity, bob: Identity) -> None:
    url = sqlite_relay.url
    assert (await buzz(url, alice, "users", "set-profile", "--name", "Alice", "--about", "designer")).json[
        "profile"
    ] == {
        "name": "Alice",
        "about": "designer",
    }
    # a second change keeps the fields it does not touch (and wins over the first in one second)
    profile = (await buzz(url, alice, "users", "set-profile", "--avatar", "https://example.com/a.png")).json[
        "profile"
    ]
    assert profile == {"name": "Alice", "about": "designer", "picture": "https://example.com/a.png"}
    users = (await buzz(url, bob, "users", "get", "--pubkey", alice.pubkey, "--pubkey", bob.pubkey)).json[
        "users"
    ]
    assert users[0] | {"npub": None} == {
        "pubkey": alice.pubkey,
        "npub": None,
        "name": "Alice",
        "display_name": None,
        "about": "designer",
        "picture": "https://example.com/a.png",
        "is_agent": False,
        "owner": None,
    }
    assert (users[1]["pubkey"], users[1]["name"]) == (bob.pubkey, None)
    by_name = (await buzz(url, bob, "users", "get", "--name", "alice")).json["users"]
    assert [u["pubkey"] for u in by_name] == [alice.pubkey]

    presence = ["users", "presence", "--pubkeys", f"{alice.pubkey},{bob.pubkey}"]
    assert (await buzz(url, bob, *presence)).json == {
        "presence": {alice.pubkey: "offline", bob.pubkey: "offline"}
    }
    assert (await buzz(url, alice, "users", "set-presence", "away")).json["status"] == "away"
    assert (await buzz(url, bob, *presence)).json == {
        "presence": {alice.pubkey: "away", bob.pubkey: "offline"}
    }
    assert (await buzz(url, alice, "users", "set-presence", "offline")).json["status"] == "offline"
    assert (await buzz(url, bob, *presence)).json["presence"][alice.pubkey] == "offline"


async def test_agent_profile_carries_the_auth_tag(
    sqlite_relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    attest = await buzz(None, alice, "keys", "attest", "--agent", bob.pubkey)
    tag = attest.json["auth_tag"]
    env = {"BUZZ_AUTH_TAG": json.dumps(tag)}
    await buzz(sqlite_relay.url, bob, "users", "set-profile", "--name", "Helper", env=env)
    user = (await buzz(sqlite_relay.url, alice, "users", "get", "--pubkey", bob.pubkey)).json["users"][0]
    assert (user["is_agent"], user["owner"]) == (True, alice.pubkey)


async def test_exit_codes_and_error_shape(
    sqlite_relay: RunningRelay, tmp_path: Path, alice: Identity
) -> None:
    url, channel = sqlite_relay.url, str(uuid.uuid4())

    def check(result, code: int, category: str) -> dict:
        error = result.error
        assert result.code == code and error["error"] == category, (result.code, error)
        assert set(error) <= {"error", "message", "retryable", "relay_message", "refusal", "hint"}
        return error

    check(await buzz(url, None, "messages", "get", "--channel", channel), 3, "auth_error")  # no key
    bad_key = await buzz(url, None, "messages", "get", "--channel", channel, env={"BUZZ_PRIVATE_KEY": "xyz"})
    check(bad_key, 3, "key_error")
    check(await buzz(url, alice, "messages", "get", "--channel", "not-a-uuid"), 1, "user_error")
    check(await buzz(url, alice, "messages", "get"), 1, "user_error")  # parser error: 1, never 2
    check(await buzz(url, alice, "messages", "get", "--channel", channel, "--limit", "501"), 1, "user_error")
    check(
        await buzz(url, alice, "messages", "send", "--channel", channel, "--content", "x", "--broadcast"),
        1,
        "user_error",
    )
    big = await buzz(
        url, alice, "messages", "send", "--channel", channel, "--content", "-", stdin=b"x" * 65_537
    )
    check(big, 1, "user_error")
    # empty stdin: exit 1 and nothing published
    empty = await buzz(url, alice, "messages", "send", "--channel", channel, "--content", "-", stdin=b"")
    check(empty, 1, "user_error")
    # the relay's verdicts on a private channel: a refused write (exit 4), a refused read (HTTP
    # 403 → exit 3); a channel that does not exist is not_found (exit 1, issue 24 item 8)
    other = Identity.new()
    private = await buzz(url, other, "channels", "create", "--name", "closed", "--visibility", "private")
    private_id = private.json["channel_id"]
    write = check(
        await buzz(url, alice, "messages", "send", "--channel", private_id, "--content", "hi"), 4, "error"
    )
    assert write["relay_message"] == "restricted: not a channel member" and write["retryable"] is False
    read = check(await buzz(url, alice, "messages", "get", "--channel", private_id), 3, "auth_error")
    assert read["relay_message"] == "restricted: not a channel member"
    for args in (("send", "--channel", channel, "--content", "hi"), ("get", "--channel", channel)):
        missing_channel = check(await buzz(url, alice, "messages", *args), 1, "not_found")
        assert missing_channel["message"] == f"channel not found: {channel}", args
    check(await buzz(url, alice, "messages", "get", "--channel", channel, "--kinds", "9,x"), 1, "user_error")
    missing = await buzz(url, alice, "messages", "edit", "--event", "ab" * 32, "--content", "x")
    check(missing, 1, "not_found")
    check(
        await buzz(url, alice, "reactions", "remove", "--event", "ab" * 32, "--emoji", "👍"), 1, "not_found"
    )
    # no relay at all: network_error, retryable
    down = check(
        await buzz("ws://127.0.0.1:9", alice, "users", "get", "--pubkey", alice.pubkey), 2, "network_error"
    )
    assert down["retryable"] is True
    down = check(await buzz("ws://127.0.0.1:9", alice, "users", "set-presence", "online"), 2, "network_error")
    # an HTTP server without the bridge: a status that carries no relay verdict
    async with relay_on(tmp_path / "nobridge", http_bridge=False) as plain:
        check(await buzz(plain.url, alice, "users", "get", "--pubkey", alice.pubkey), 2, "relay_error")


async def test_http_relay_url_works_too(sqlite_relay: RunningRelay, alice: Identity) -> None:
    """BUZZ_RELAY_URL may be http(s): the bridge uses it as is, presence maps it back to ws."""
    url = sqlite_relay.http_url
    assert (await buzz(url, alice, "users", "set-presence", "online")).json["status"] == "online"
    assert (await buzz(url, alice, "users", "presence", "--pubkeys", alice.pubkey)).json == {
        "presence": {alice.pubkey: "online"}
    }


async def test_compact_format(sqlite_relay: RunningRelay, alice: Identity) -> None:
    result = await buzz(
        sqlite_relay.url, alice, "--format", "compact", "users", "presence", "--pubkeys", alice.pubkey
    )
    assert result.stdout == '{"presence":{"' + alice.pubkey + '":"offline"}}\n'


async def test_edge_cases_found_by_a_newcomer(
    sqlite_relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    url = sqlite_relay.url
    # A DM opened twice in the same second resolves to the same channel (relay.md §4.8 item 5).
    first, second = await asyncio.gather(
        buzz(url, alice, "dms", "open", "--pubkey", bob.pubkey),
        buzz(url, alice, "dms", "open", "--pubkey", bob.pubkey),
    )
    assert first.json["channel_id"] == second.json["channel_id"]
    # A DM with yourself only is refused (exit 1), by the CLI and by the relay.
    alone = await buzz(url, alice, "dms", "open", "--pubkey", alice.pubkey)
    assert alone.code == 1 and alone.error["error"] == "user_error"
    # Reacting to an event that does not exist is not_found (exit 1), not a relay error.
    missing = await buzz(url, alice, "reactions", "add", "--event", "ab" * 32, "--emoji", "+")
    assert missing.code == 1 and missing.error["error"] == "not_found"
    # An argument that is not UTF-8 is the user's error (exit 1).
    chan = await buzz(url, alice, "channels", "create", "--name", "edge")
    cid = chan.json["channel_id"]
    proc = await asyncio.create_subprocess_exec(
        BUZZ,
        "messages",
        "send",
        "--channel",
        cid,
        "--content",
        b"\xff\xfe",
        env={**_env(url, alice, None)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _out, err = await proc.communicate()
    assert proc.returncode == 1, err
    assert orjson.loads(err.decode().strip().splitlines()[-1])["error"] == "user_error"
