"""`buzz admin` against the database of a running relay process (issue 10 item 6): the relay
applies member, workspace and ban changes at the next AUTH, without a restart."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import tarfile
from pathlib import Path

import pytest

from buzz.client import RelayClient, RelayError
from buzz.core import nip19
from buzz.core.event import Event
from buzz.core.nip_oa import build_auth_tag
from buzz.store import open_store
from tests.operator.support import BUZZ, admin, buzz, clean_env, free_port, lines_with, served
from tests.support.deadline import scaled
from tests.support.relay import Identity
from tests.workspace.helpers import create_channel


async def _auth_refusal(url: str, who: Identity, **kw: object) -> str | None:
    """None when `who` authenticates, else the relay's refusal."""
    try:
        async with RelayClient(url, who.secret, **kw):  # type: ignore[arg-type]
            return None
    except RelayError as exc:
        return exc.message


async def test_closed_workspace_members_and_bans_apply_to_a_running_relay(tmp_path: Path) -> None:
    data = tmp_path / "data"
    alice, bob, agent = Identity.new(), Identity.new(), Identity.new()
    async with served(data) as relay:
        assert await _auth_refusal(relay.url, bob) is None  # open by default
        fresh = admin(data, "workspace", "show")  # decision 107: the effective default, not null
        note = fresh.pop("note")
        assert fresh == {"workspace": "open", "switch": None, "members": 0, "admins": []}
        assert "BUZZ_REQUIRE_RELAY_MEMBERSHIP=true" in note  # what this command cannot see
        assert admin(data, "workspace", "close") == {"workspace": "closed"}
        assert await _auth_refusal(relay.url, bob) == "restricted: not a relay member"

        added = admin(data, "members", "add", nip19.npub(alice.pubkey))
        assert added == {
            "pubkey": alice.pubkey,
            "npub": nip19.npub(alice.pubkey),
            "role": "member",
            "member": True,
        }
        admin(data, "members", "add", bob.pubkey, "--role", "admin")
        listed = admin(data, "members", "list")
        assert {(m["pubkey"], m["role"]) for m in listed} == {(alice.pubkey, "member"), (bob.pubkey, "admin")}
        assert admin(data, "workspace", "show") == {
            "workspace": "closed",
            "switch": "closed",
            "members": 2,
            "admins": [{"pubkey": bob.pubkey, "npub": nip19.npub(bob.pubkey), "role": "admin"}],
        }
        assert await _auth_refusal(relay.url, alice) is None and await _auth_refusal(relay.url, bob) is None

        # 64 hex that is no curve point (nobody holds it) is refused, yet removable (decision 107)
        for argv in (("members", "add", "f" * 64), ("ban", "0" * 64)):
            off_curve = buzz("admin", "--data-dir", str(data), *argv)
            error = json.loads(off_curve.stderr)
            assert (off_curve.returncode, error["error"]) == (1, "user_error"), argv
            assert "is not a secp256k1 public key" in error["message"], argv
        assert admin(data, "members", "remove", "f" * 64)["removed"] is False
        assert admin(data, "unban", "0" * 64)["unbanned"] is False

        assert admin(data, "members", "remove", bob.pubkey)["removed"] is True
        assert admin(data, "members", "remove", bob.pubkey)["removed"] is False
        assert await _auth_refusal(relay.url, bob) == "restricted: not a relay member"

        # The ban gate comes before membership, and covers agents the banned key attested.
        assert admin(data, "ban", alice.pubkey, "--reason", "spam")["already_banned"] is False
        assert admin(data, "ban", alice.pubkey)["already_banned"] is True
        assert await _auth_refusal(relay.url, alice) == "blocked: you are banned from this community"
        admin(data, "workspace", "open")
        tag = build_auth_tag(alice.secret, agent.pubkey)
        assert (
            await _auth_refusal(relay.url, agent, auth_tags=[tag])
            == "blocked: you are banned from this community"
        )
        assert await _auth_refusal(relay.url, agent) is None  # without the tag it is just a key
        assert [(b["pubkey"], b["reason"]) for b in admin(data, "bans")] == [(alice.pubkey, "spam")]

        assert admin(data, "unban", nip19.npub(alice.pubkey))["unbanned"] is True
        assert await _auth_refusal(relay.url, alice) is None
        await relay.stop()
    assert lines_with(relay.log_text(), "auth refused", 'reason="restricted: not a relay member"')


async def test_a_banned_key_is_refused_on_the_http_bridge_too(tmp_path: Path) -> None:
    data, mallory = tmp_path / "data", Identity.new()
    async with served(data) as relay:
        admin(data, "ban", mallory.pubkey)
        env = {"BUZZ_PRIVATE_KEY": mallory.secret, "BUZZ_RELAY_URL": relay.url}
        done = buzz("channels", "list", env=env)
        assert done.returncode == 3, done.stderr  # auth_error: HTTP 403
        assert "banned" in json.loads(done.stderr)["message"] or "banned" in done.stderr
        await relay.stop()


async def test_backup_and_stats_while_the_relay_runs(tmp_path: Path) -> None:
    data, alice = tmp_path / "data", Identity.new()
    async with served(data) as relay:
        async with RelayClient(relay.url, alice.secret) as a:
            channel = await create_channel(a, alice, name="b")
            for n in range(5):
                assert (
                    await a.publish(Event.create(alice.secret, 9, f"hello {n}", [["h", channel]]))
                ).accepted
        stats = admin(data, "stats")
        assert stats["events_by_kind"]["9"] == 5 and stats["events_by_kind"]["9007"] == 1
        assert stats["channels"] == 1 and stats["channel_members"] == 1 and stats["store_bytes"] > 0

        dest = tmp_path / "backup.tar.gz"
        done = admin(data, "backup", str(dest))
        assert done["backend"] == "sqlite" and done["bytes"] == dest.stat().st_size
        with tarfile.open(dest) as archive:
            archive.extract("data/relay.sqlite3", tmp_path / "x", filter="data")
        with sqlite3.connect(tmp_path / "x" / "data" / "relay.sqlite3") as copy:
            assert copy.execute("SELECT COUNT(*) FROM events WHERE kind = 9").fetchone()[0] == 5
        again = buzz("admin", "--data-dir", str(data), "backup", str(dest))
        assert again.returncode == 1 and json.loads(again.stderr)["error"] == "user_error"
        await relay.stop()


@pytest.mark.parametrize(
    "argv",
    [["members", "add", "npub1notakey"], ["ban", "zz"], ["members", "list"], ["workspace", "close"]],
)
def test_admin_errors_are_one_json_line(tmp_path: Path, argv: list[str]) -> None:
    """A bad key, or a data dir without a relay database (never created silently)."""
    done = buzz("admin", "--data-dir", str(tmp_path / "nowhere"), *argv)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["error"] == "user_error"
    assert not (tmp_path / "nowhere").exists()


async def test_admin_on_postgresql_applies_to_a_running_relay(tmp_path: Path) -> None:
    from tests.support.pg import temp_database

    alice, mallory = Identity.new(), Identity.new()
    async with temp_database() as dsn, served(tmp_path / "data", "--db", dsn) as relay:
        db = ("--db", dsn)
        assert any("store:        PostgreSQL 127.0.0.1:5432/" in line for line in relay.banner)
        admin(tmp_path / "unused", *db, "members", "add", alice.pubkey)
        admin(tmp_path / "unused", *db, "workspace", "close")
        admin(tmp_path / "unused", *db, "ban", mallory.pubkey)
        assert await _auth_refusal(relay.url, alice) is None
        assert await _auth_refusal(relay.url, mallory) == "blocked: you are banned from this community"
        assert await _auth_refusal(relay.url, Identity.new()) == "restricted: not a relay member"
        stats = admin(tmp_path / "unused", *db, "stats")
        assert stats["relay_members"] == 1 and stats["bans"] == 1 and stats["store_bytes"] > 0
        await relay.stop()


async def test_banning_a_connected_key_closes_its_open_session(tmp_path: Path) -> None:
    """The watcher polls the ban list every 5 s (buzz.relay.auth.banwatch.POLL_S)."""
    import asyncio

    data, mallory, alice = tmp_path / "data", Identity.new(), Identity.new()
    async with served(data) as relay:
        async with RelayClient(relay.url, mallory.secret) as m, RelayClient(relay.url, alice.secret) as a:
            admin(data, "ban", mallory.pubkey)
            await asyncio.wait_for(m.wait_closed(), scaled(20))
            assert "blocked: you are banned from this community" in m.notices
            assert not a.closed and await a.count([{"kinds": [1]}]) == 0  # others keep their session
        await relay.stop()
    assert lines_with(relay.log_text(), "connection closed", f"pubkey={mallory.pubkey}", "reason=blocked")


async def test_a_banned_watcher_hears_why_not_a_retryable_network_error(tmp_path: Path) -> None:
    """`buzz messages watch` of a key banned while it watches ends with the relay's `blocked:`
    reason and the access exit code (3), not `network_error` / retryable."""
    data, mallory = tmp_path / "data", Identity.new()
    async with served(data) as relay:
        async with RelayClient(relay.url, mallory.secret) as m:
            channel = await create_channel(m, mallory, name="w")
        env = clean_env({"BUZZ_PRIVATE_KEY": mallory.secret, "BUZZ_RELAY_URL": relay.url})
        watch = await asyncio.create_subprocess_exec(
            BUZZ,
            "messages",
            "watch",
            "--channel",
            channel,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        await asyncio.sleep(2)  # subscribed
        admin(data, "ban", mallory.pubkey)
        _, stderr = await asyncio.wait_for(watch.communicate(), scaled(30))
        await relay.stop()
    error = json.loads(stderr.decode().strip().splitlines()[-1])
    assert watch.returncode == 3, stderr
    assert error["error"] == "auth_error" and error["retryable"] is False
    assert error["message"].startswith("blocked:")


async def test_admin_names_a_bad_backup_destination_an_unreachable_db_and_a_foreign_scheme(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    store = open_store(None, data)
    await store.open()
    await store.close()
    dest = tmp_path / "no-such-dir" / "b.sqlite3"
    done = buzz("admin", "--data-dir", str(data), "backup", str(dest))
    (line,) = done.stderr.strip().splitlines()
    err = json.loads(line)
    assert (done.returncode, err["error"]) == (1, "user_error"), done.stderr
    assert str(dest.parent) in err["message"] and not dest.parent.exists()

    # nothing listens on this port: the database is unreachable, a network error (exit 2)
    down = f"postgresql://buzz@127.0.0.1:{free_port()}/buzz"
    done = buzz("admin", "--db", down, "stats")
    (line,) = done.stderr.strip().splitlines()
    assert (done.returncode, json.loads(line)["error"]) == (2, "network_error"), done.stderr

    done = buzz("admin", "--db", "mysql://x", "stats")
    (line,) = done.stderr.strip().splitlines()
    assert done.returncode == 1 and json.loads(line) == {
        "error": "user_error",
        "message": "unsupported database URL scheme 'mysql' (use sqlite path or postgresql://)",
        "retryable": False,
    }
