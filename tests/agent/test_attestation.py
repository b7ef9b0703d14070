"""`buzz keys attest`, `BUZZ_AUTH_TAG` handling and the harness's AUTH (agents.md §1.2–§1.5;
§9.2 items 3–4)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from buzz.cli.identity import IdentityError, auth_tags_for, parse_pubkey, resolve_auth_tag
from buzz.cli.main import cli
from buzz.core import nip19
from buzz.core.keys import generate_secret_key, public_key
from buzz.core.nip_oa import verify_auth_tag
from tests.agent.support import workspace
from tests.support.relay import Identity, RunningRelay


def _attest(owner_secret: str, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["--private-key", owner_secret, "keys", "attest", *args])
    return result.exit_code, result.stdout, result.stderr


def test_attest_prints_a_tag_that_verifies_for_the_agent() -> None:
    owner, agent = generate_secret_key(), generate_secret_key()
    code, out, err = _attest(nip19.nsec(owner), "--agent", nip19.npub(public_key(agent)))
    assert code == 0
    doc = json.loads(out)
    assert set(doc) == {"auth_tag", "owner", "agent"}
    assert (doc["owner"], doc["agent"]) == (public_key(owner), public_key(agent))
    assert verify_auth_tag(doc["auth_tag"], public_key(agent)) == public_key(owner)
    assert doc["auth_tag"][2] == ""  # unconditional by default
    assert "export BUZZ_AUTH_TAG=" in err and owner not in out + err
    code, out, _ = _attest(owner, "--agent", public_key(agent), "--conditions", "created_at<4000000000")
    assert code == 0 and json.loads(out)["auth_tag"][2] == "created_at<4000000000"


@pytest.mark.parametrize(
    ("args", "code", "category"),
    [
        (["--agent", "self"], 1, "user_error"),
        (["--agent", "zz"], 1, "user_error"),
        (["--agent", "agent", "--conditions", "kind=01"], 1, "user_error"),
    ],
)
def test_attest_refusals(args: list[str], code: int, category: str) -> None:
    owner, agent = generate_secret_key(), generate_secret_key()
    args = [{"self": public_key(owner), "agent": public_key(agent)}.get(a, a) for a in args]
    got, out, err = _attest(owner, *args)
    assert (got, out) == (code, "")
    assert json.loads(err.strip())["error"] == category


def test_attest_without_a_key_is_an_auth_error() -> None:
    result = CliRunner().invoke(
        cli, ["keys", "attest", "--agent", public_key(generate_secret_key())], env={"BUZZ_PRIVATE_KEY": ""}
    )
    assert result.exit_code == 3 and json.loads(result.stderr.strip())["error"] == "auth_error"


def test_auth_tag_input_forms() -> None:
    owner, agent = generate_secret_key(), generate_secret_key()
    tag = verify_tag = _tag(owner, agent)
    shorthand = f"[auth, {tag[1]} ,,{tag[3]}]"
    assert resolve_auth_tag(json.dumps(tag), agent) == resolve_auth_tag(shorthand, agent) == verify_tag
    assert resolve_auth_tag("  ", agent) is None and auth_tags_for(None, agent) == []
    assert auth_tags_for(json.dumps(tag), agent) == [tag]
    for bad in (
        "[auth,too,few]",
        json.dumps(tag).replace("auth", "oath"),
        json.dumps(_tag(owner, generate_secret_key())),
    ):
        with pytest.raises(IdentityError) as info:
            resolve_auth_tag(bad, agent)
        assert (info.value.category, info.value.exit_code) == ("auth_error", 3)
    assert parse_pubkey(nip19.npub(public_key(agent))) == public_key(agent)
    assert parse_pubkey(public_key(agent).upper()) == public_key(agent)


def _tag(owner: str, agent: str) -> list[str]:
    code, out, _ = _attest(owner, "--agent", public_key(agent))
    assert code == 0
    return json.loads(out)["auth_tag"]


async def test_harness_auth_carries_the_tag(
    sqlite_relay: RunningRelay, alice: Identity, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The relay records agent → owner only from an AUTH event carrying exactly one valid
    `auth` tag (relay.md §7.3 item 4): after the harness connects, the mapping exists."""
    agent = Identity.new()
    async with workspace(sqlite_relay, alice, agent, tmp_path, monkeypatch, agent_profile=False) as ws:
        store = sqlite_relay.relay.store
        assert await store.get_agent_owner(agent.pubkey) is None
        async with ws.harness():
            assert await store.get_agent_owner(agent.pubkey) == alice.pubkey
            mention = await ws.post(alice, "ping", mention=agent.pubkey)
            await ws.watcher.wait_for(
                lambda e: bool(ws.watcher.replies_to(mention, agent.pubkey)), what="reply"
            )
        # the agent's own `buzz messages send` signed as the agent with the same identity
        assert ws.watcher.replies_to(mention, agent.pubkey)[0].pubkey == agent.pubkey
