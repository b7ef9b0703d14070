"""`buzz relay serve` and `buzz keys` as a user runs them: real subprocesses."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import aiohttp

from buzz.core import nip19
from buzz.core.keys import public_key
from tests.operator.support import served
from tests.support.deadline import scaled

BUZZ = str(Path(sys.executable).with_name("buzz"))


async def test_serve_prints_url_answers_nip11_and_stops_on_sigterm(tmp_path: Path) -> None:
    async with served(tmp_path / "data", env={"BUZZ_RELAY_NAME": "Test Hive"}) as relay:
        assert relay.url in relay.banner[0] and "Test Hive" in relay.banner[0]
        async with aiohttp.ClientSession() as s:
            async with s.get(f"{relay.http_url}/", headers={"Accept": "application/nostr+json"}) as r:
                doc = await r.json(content_type=None)
        assert doc["name"] == "Test Hive"
        assert (tmp_path / "data" / "relay.sqlite3").exists()
        relay.proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(relay.proc.wait(), scaled(20)) == 0


async def test_serve_sigint_stops_cleanly(tmp_path: Path) -> None:
    async with served(tmp_path / "data") as relay:
        relay.proc.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(relay.proc.wait(), scaled(20)) == 0


def test_serve_refuses_bad_configuration(tmp_path: Path) -> None:
    env = {**os.environ, "BUZZ_RELAY_PRIVATE_KEY": "not-hex", "BUZZ_DATA_DIR": str(tmp_path)}
    done = subprocess.run([BUZZ, "relay", "serve"], env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode != 0 and "BUZZ_RELAY_PRIVATE_KEY" in done.stderr
    env = {**os.environ, "BUZZ_MAX_FRAME_BYTES": "0", "BUZZ_DATA_DIR": str(tmp_path)}
    done = subprocess.run([BUZZ, "relay", "serve"], env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode != 0 and "BUZZ_MAX_FRAME_BYTES" in done.stderr


def test_keys_generate_and_show() -> None:
    gen = subprocess.run([BUZZ, "keys", "generate"], capture_output=True, text=True, timeout=30, check=True)
    keys = json.loads(gen.stdout)
    assert set(keys) == {"secret_hex", "nsec", "pubkey", "npub"}  # agents.md §2.2
    assert public_key(keys["secret_hex"]) == keys["pubkey"]
    assert nip19.decode(keys["nsec"]) == ("nsec", keys["secret_hex"])
    assert nip19.decode(keys["npub"]) == ("npub", keys["pubkey"])
    for given in (keys["secret_hex"], keys["nsec"]):
        env = {**os.environ, "BUZZ_PRIVATE_KEY": given}
        show = subprocess.run(
            [BUZZ, "keys", "show"], env=env, capture_output=True, text=True, timeout=30, check=True
        )
        shown = json.loads(show.stdout)
        assert shown == {"pubkey": keys["pubkey"], "npub": keys["npub"]}
        assert keys["secret_hex"] not in show.stdout and keys["nsec"] not in show.stdout
        for flag, field in (("--npub", "npub"), ("--hex", "pubkey")):
            only = subprocess.run(
                [BUZZ, "keys", "show", flag], env=env, capture_output=True, text=True, timeout=30
            )
            assert json.loads(only.stdout) == keys[field]


def test_keys_show_without_key_is_a_json_error() -> None:
    env = {k: v for k, v in os.environ.items() if k != "BUZZ_PRIVATE_KEY"}
    done = subprocess.run([BUZZ, "keys", "show"], env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 3  # engram.md §12.1: a missing key is auth_error (invalid: key_error)
    err = json.loads(done.stderr)
    assert err["error"] == "auth_error" and err["retryable"] is False and "BUZZ_PRIVATE_KEY" in err["message"]


def test_parser_errors_exit_1_with_json() -> None:
    for argv in (["--format", "xml", "keys", "generate"], ["no-such-group"], ["keys", "show", "--bogus"]):
        done = subprocess.run([BUZZ, *argv], capture_output=True, text=True, timeout=30)
        assert done.returncode == 1, argv
        assert json.loads(done.stderr.strip().splitlines()[-1])["error"] == "user_error"


async def test_sigterm_stops_promptly_with_a_client_connected(tmp_path: Path) -> None:
    import time

    from buzz.client import RelayClient
    from buzz.core.keys import generate_secret_key

    async with served(tmp_path / "data") as relay:
        client = RelayClient(relay.url, generate_secret_key())
        await client.connect()
        started = time.monotonic()
        relay.proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(relay.proc.wait(), scaled(20)) == 0
        assert time.monotonic() - started < 10  # not aiohttp's 60 s handler grace
        await client.close()


def test_json_output_writes_integer_keys_as_strings(capsys) -> None:
    from buzz.cli.output import Context, emit

    emit(Context("ws://x", None, "compact"), {"roster": {0: "a", 3: "b"}})
    assert json.loads(capsys.readouterr().out) == {"roster": {"0": "a", "3": "b"}}
