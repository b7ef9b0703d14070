"""CLI gaps of issue 10 item 7, each against a real relay with the real `buzz` executable:
channel rename/archive/unarchive/delete, `messages watch`, `users get --name` substrings, npub
for `mem --owner/--agent`, a refused `users set-presence`, `huddle join` exit codes and input
checks, edited messages without a mismatching signature, and search by the newest edit."""

from __future__ import annotations

import asyncio
import signal
import wave
from pathlib import Path

import orjson
import pytest

from buzz.client.errors import REFUSALS
from buzz.core import nip19
from buzz.core.event import Event, verify_event
from buzz.core.nip_oa import build_auth_tag
from tests.cli.helpers import BUZZ, _env, buzz
from tests.support.deadline import scaled
from tests.support.relay import Identity, RunningRelay, relay_on


async def _channel(url: str, owner: Identity, *members: Identity, visibility: str = "private") -> str:
    channel = (
        await buzz(url, owner, "channels", "create", "--name", "gaps", "--visibility", visibility)
    ).json["channel_id"]
    for m in members:
        assert (
            await buzz(url, owner, "channels", "add-member", "--channel", channel, "--pubkey", m.pubkey)
        ).code == 0
    return channel


async def test_channel_rename_archive_unarchive_delete(sqlite_relay: RunningRelay, alice: Identity) -> None:
    url = sqlite_relay.url
    channel = await _channel(url, alice)
    renamed = (
        await buzz(url, alice, "channels", "rename", "--channel", channel, "--name", "design-review")
    ).json
    assert renamed["channel_id"] == channel and len(renamed["event_id"]) == 64
    assert (await buzz(url, alice, "channels", "get", "--channel", channel)).json["name"] == "design-review"

    assert (await buzz(url, alice, "channels", "archive", "--channel", channel)).code == 0
    assert (await buzz(url, alice, "channels", "get", "--channel", channel)).json["archived"] is True
    refused = await buzz(url, alice, "messages", "send", "--channel", channel, "--content", "late")
    assert refused.code == 4 and refused.error["error"] == "error"  # archived: no new writes

    assert (await buzz(url, alice, "channels", "unarchive", "--channel", channel)).code == 0
    assert (await buzz(url, alice, "channels", "get", "--channel", channel)).json["archived"] is False
    assert (await buzz(url, alice, "messages", "send", "--channel", channel, "--content", "back")).code == 0

    empty = await buzz(url, alice, "channels", "rename", "--channel", channel, "--name", "  ")
    assert (empty.code, empty.error["error"]) == (1, "user_error")
    assert (await buzz(url, alice, "channels", "delete", "--channel", channel)).code == 0
    gone = await buzz(url, alice, "channels", "get", "--channel", channel)
    assert (gone.code, gone.error["error"]) == (1, "not_found")


async def _lines(stream: asyncio.StreamReader, n: int) -> list[dict[str, object]]:
    return [orjson.loads(await asyncio.wait_for(stream.readline(), scaled(30))) for _ in range(n)]


async def test_messages_watch_streams_json_lines_until_ctrl_c(
    sqlite_relay: RunningRelay, alice: Identity, bob: Identity, carol: Identity
) -> None:
    url = sqlite_relay.url
    channel = await _channel(url, alice, bob)
    first = (await buzz(url, alice, "messages", "send", "--channel", channel, "--content", "before")).json
    proc = await asyncio.create_subprocess_exec(
        BUZZ,
        "messages",
        "watch",
        "--channel",
        channel,
        "--since",
        str(first["created_at"]),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=_env(url, bob, None),
    )
    assert proc.stdout is not None and proc.stderr is not None
    try:
        [stored] = await _lines(proc.stdout, 1)  # the stored one arrives before EOSE: the REQ is live
        assert (stored["id"], stored["content"], stored["channel_id"]) == (
            first["event_id"],
            "before",
            channel,
        )
        live = (
            await buzz(url, alice, "messages", "send", "--channel", channel, "--content", "live one")
        ).json
        [streamed] = await _lines(proc.stdout, 1)
        assert (streamed["id"], streamed["content"]) == (live["event_id"], "live one")
    finally:
        proc.send_signal(signal.SIGINT)
        code = await asyncio.wait_for(proc.wait(), scaled(30))
    assert code == 0 and await proc.stderr.read() == b""

    outsider = await buzz(url, carol, "messages", "watch", "--channel", channel)
    assert (outsider.code, outsider.error["error"]) == (3, "auth_error")
    assert outsider.error["relay_message"].startswith("restricted:")


async def test_users_get_name_matches_substrings(
    sqlite_relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    url = sqlite_relay.url
    assert (await buzz(url, alice, "users", "set-profile", "--name", "Alexandria")).code == 0
    assert (await buzz(url, bob, "users", "set-profile", "--name", "Bob Builder")).code == 0
    found = (await buzz(url, bob, "users", "get", "--name", "XAND")).json["users"]
    assert [u["pubkey"] for u in found] == [alice.pubkey]  # a substring, not a whole word
    by_word = (await buzz(url, bob, "users", "get", "--name", "builder")).json["users"]
    assert [u["pubkey"] for u in by_word] == [bob.pubkey]
    assert (await buzz(url, bob, "users", "get", "--name", "zzz")).json["users"] == []


async def test_mem_owner_and_agent_take_npub(
    sqlite_relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    url = sqlite_relay.url
    wrote = await buzz(url, bob, "mem", "set", "core", "npub owner", "--owner", nip19.npub(alice.pubkey))
    assert wrote.code == 0, wrote.stderr
    read = await buzz(url, alice, "mem", "get", "core", "--agent", nip19.npub(bob.pubkey))
    assert (read.code, read.stdout) == (0, "npub owner")
    bad = await buzz(url, alice, "mem", "get", "core", "--agent", "npub1notakey")
    assert (bad.code, bad.error["error"]) == (1, "user_error") and "--agent" in bad.error["message"]


async def test_refused_set_presence_is_one_json_line(tmp_path: Path, alice: Identity) -> None:
    async with relay_on(tmp_path, require_relay_membership=True) as closed:
        result = await buzz(closed.url, alice, "users", "set-presence", "online")
    assert result.code == 3
    assert result.error == {  # exactly one stderr line: no traceback, no unclosed-session noise
        "error": "auth_error",
        "message": "restricted: not a relay member",
        "retryable": False,
        "relay_message": "restricted: not a relay member",
        "refusal": "restricted",
        "hint": REFUSALS["restricted"],
    }


def _wav(path: Path, sample_width: int, frames: int) -> Path:
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(sample_width)
        out.setframerate(48_000)
        out.writeframes(b"\0" * sample_width * frames)
    return path


@pytest.mark.timeout(120)
async def test_huddle_join_exit_codes_and_input_checks(
    sqlite_relay: RunningRelay, alice: Identity, bob: Identity, tmp_path: Path
) -> None:
    url = sqlite_relay.url
    channel = await _channel(url, bob)
    not_wav = tmp_path / "notes.txt"
    not_wav.write_text("this is not audio")
    two_bytes = tmp_path / "bad.bin"
    two_bytes.write_bytes(b"\xff\xfe")  # too short for a RIFF header: the reader says nothing
    truncated = tmp_path / "truncated.wav"
    whole = _wav(tmp_path / "whole.wav", 2, 4800).read_bytes()
    truncated.write_bytes(whole[:44])  # the header claims 4,800 frames, none follow
    for bad, fragment in (
        (not_wav, "not a usable WAV file"),
        (two_bytes, "not a RIFF/WAVE file, or truncated"),
        (truncated, "truncated: the header says 4800 frames, the file holds 0"),
        (_wav(tmp_path / "8bit.wav", 1, 4800), "only 16-bit PCM"),
        (_wav(tmp_path / "empty.wav", 2, 0), "no audio frames"),
    ):
        r = await buzz(
            url, alice, "huddle", "join", "--channel", channel, "--input", str(bad), "--leave-after-input"
        )
        assert (r.code, r.error["error"]) == (1, "user_error"), r.stderr
        assert fragment in r.error["message"]
    # pocketsphinx's packaged model is US English: another language is refused, never ignored
    sphinx_de = await buzz(
        url, alice, "huddle", "join", "--channel", channel, "--stt-engine", "pocketsphinx",
        "--stt-language", "de", "--duration", "1",
    )  # fmt: skip
    assert sphinx_de.code == 1 and "only knows US English, not 'de'" in sphinx_de.error["message"], (
        sphinx_de.stderr
    )
    missing = await buzz(url, alice, "huddle", "join", "--channel", "not-a-uuid")
    assert (missing.code, missing.error["error"]) == (1, "user_error")  # never click's exit 2

    # a bad --record-dir is the user's, named, and found before connecting (the relay here is
    # unreachable: a network_error would mean the dir was checked too late)
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    for bad_dir in ("/proc/nope", str(blocker / "sub")):
        r = await buzz(
            "ws://127.0.0.1:9", alice, "huddle", "join", "--channel", channel, "--record-dir", bad_dir
        )
        assert (r.code, r.error["error"]) == (1, "user_error"), r.stderr
        assert bad_dir in r.error["message"] and len(r.stderr.strip().splitlines()) == 1
    for bad_duration in ("-5", "0"):
        r = await buzz(url, alice, "huddle", "join", "--channel", channel, "--duration", bad_duration)
        assert (r.code, r.error["error"]) == (1, "user_error"), r.stderr
        assert "--duration" in r.error["message"] and len(r.stderr.strip().splitlines()) == 1

    args = ("huddle", "join", "--channel", channel, "--duration", "1")
    outsider = await buzz(url, alice, *args)  # alice is not a member of bob's private channel
    assert (outsider.code, outsider.error["error"]) == (3, "auth_error"), outsider.stderr
    # the recogniser is built before joining: "EN" reaching the join means it was taken as "en"
    upper = await buzz(url, alice, *args, "--stt-engine", "whisper-tiny", "--stt-language", " EN ")
    assert (upper.code, upper.error["error"]) == (3, "auth_error"), upper.stderr
    unreachable = await buzz("ws://127.0.0.1:9", alice, *args)
    assert (unreachable.code, unreachable.error["error"]) == (2, "network_error"), unreachable.stderr
    assert unreachable.error["retryable"] is True
    no_key = await buzz(url, None, *args)
    assert (no_key.code, no_key.error["error"]) == (3, "auth_error")


async def test_edited_message_never_carries_a_mismatching_sig(
    sqlite_relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    url = sqlite_relay.url
    channel = await _channel(url, alice)
    kept = (await buzz(url, alice, "messages", "send", "--channel", channel, "--content", "alpha plan")).json
    edited = (
        await buzz(url, alice, "messages", "send", "--channel", channel, "--content", "draft idea")
    ).json
    assert (
        await buzz(url, alice, "messages", "edit", "--event", edited["event_id"], "--content", "omega idea")
    ).code == 0

    by_id = {
        m["id"]: m for m in (await buzz(url, alice, "messages", "get", "--channel", channel)).json["messages"]
    }
    shown = by_id[edited["event_id"]]
    assert (shown["content"], shown["sig"]) == ("omega idea", None) and shown["edited_at"] is not None
    untouched = by_id[kept["event_id"]]
    assert untouched["edited_at"] is None
    verify_event(
        Event.from_json(
            {k: untouched[k] for k in ("id", "pubkey", "created_at", "kind", "tags", "content", "sig")}
        )
    )

    # search finds a message by its newest edit, never by the text the edit replaced
    found = (await buzz(url, alice, "messages", "search", "--query", "omega", "--channel", channel)).json[
        "messages"
    ]
    assert [(m["id"], m["content"]) for m in found] == [(edited["event_id"], "omega idea")]
    assert (await buzz(url, alice, "messages", "search", "--query", "draft")).json["messages"] == []
    plain = (await buzz(url, alice, "messages", "search", "--query", "alpha")).json["messages"]
    assert [m["id"] for m in plain] == [kept["event_id"]]


async def test_agent_tag_memory_still_resolves_owner(
    sqlite_relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    """`mem` without --owner takes the owner from BUZZ_AUTH_TAG, as before the npub change."""
    tag = orjson.dumps(build_auth_tag(alice.secret, bob.pubkey)).decode()
    env = {"BUZZ_AUTH_TAG": tag}
    assert (await buzz(sqlite_relay.url, bob, "mem", "set", "core", "tagged", env=env)).code == 0
    read = await buzz(sqlite_relay.url, alice, "mem", "get", "core", "--agent", bob.pubkey)
    assert (read.code, read.stdout) == (0, "tagged")
