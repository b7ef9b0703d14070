"""`buzz messages send --file` and `buzz files` (media.md §13; checklist 44–46) as a person runs
them: the real `buzz` executable against a real relay."""

from __future__ import annotations

import asyncio
import hashlib
import os
from pathlib import Path

from buzz.core.imeta import imeta_tags
from tests.cli.helpers import BUZZ, _env, buzz
from tests.media.support import png, unique_png
from tests.support.relay import Identity, RunningRelay
from tests.workspace.helpers import create_channel, put_user


async def test_send_two_files_and_get_them_back(
    tmp_path: Path, sqlite_relay: RunningRelay, alice: Identity, bob: Identity, carol: Identity
) -> None:
    url = sqlite_relay.url
    shot, report = tmp_path / "shot.png", tmp_path / "Q3 report.pdf"
    shot.write_bytes(png(120, 80))
    report.write_bytes(b"%PDF-1.5\n" + os.urandom(5000))
    async with sqlite_relay.client(alice) as ca:
        channel = await create_channel(ca, alice, "private", name="design")
        await put_user(ca, alice, channel, bob.pubkey)
    sent = await buzz(
        url,
        alice,
        "messages",
        "send",
        "--channel",
        channel,
        "--content",
        "the mockups",
        "--file",
        str(shot),
        "--file",
        str(report),
    )
    out = sent.json
    assert [(f["name"], f["type"]) for f in out["files"]] == [
        ("shot.png", "image/png"),
        ("Q3 report.pdf", "application/pdf"),
    ]
    async with sqlite_relay.client(bob) as cb:
        (event,) = await cb.query([{"ids": [out["event_id"]]}])
    tags = imeta_tags(event)
    assert [t["name"] for t in tags] == ["shot.png", "Q3 report.pdf"]
    assert tags[0]["dim"] == "120x80" and tags[0]["m"] == "image/png" and "thumb" in tags[0]
    assert event.content == "the mockups\n" + "\n".join(f["url"] for f in out["files"])
    # bob (a member) gets them; the default name is ./<sha256>.<ext>
    got = await buzz(
        url, bob, "files", "get", "--url", out["files"][1]["url"], "--output", str(tmp_path / "r.pdf")
    )
    assert got.json == {
        "path": str(tmp_path / "r.pdf"),
        "sha256": out["files"][1]["sha256"],
        "size": report.stat().st_size,
        "type": "application/pdf",
    }
    assert (tmp_path / "r.pdf").read_bytes() == report.read_bytes()
    cwd = tmp_path / "bob"
    cwd.mkdir()
    proc = await asyncio.create_subprocess_exec(
        BUZZ,
        "files",
        "get",
        "--sha256",
        out["files"][0]["sha256"],
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=_env(url, bob, None),
        cwd=cwd,
    )
    _stdout, _ = await proc.communicate()
    assert proc.returncode == 0
    assert (cwd / f"{out['files'][0]['sha256']}.png").read_bytes() == shot.read_bytes()
    # --output -: the raw bytes on stdout, nothing else
    proc = await asyncio.create_subprocess_exec(
        BUZZ,
        "files",
        "get",
        "--url",
        out["files"][0]["url"],
        "--output",
        "-",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=_env(url, bob, None),
    )
    raw, _ = await proc.communicate()
    assert proc.returncode == 0 and raw == shot.read_bytes()
    # carol is in no referencing channel: not_found, exit 1, as for a hash nobody uploaded
    denied = await buzz(url, carol, "files", "get", "--url", out["files"][0]["url"])
    assert denied.code == 1 and denied.error["error"] == "not_found"
    assert denied.error["relay_message"] == "blob not found"
    assert not list(Path.cwd().glob(f"{out['files'][0]['sha256']}*"))


async def test_refused_file_sends_nothing(
    tmp_path: Path, sqlite_relay: RunningRelay, alice: Identity
) -> None:
    """Checklist 45: an SVG is refused (exit 1, the relay's reason) and no message is posted."""
    svg = tmp_path / "logo.svg"
    svg.write_text("<svg xmlns='http://www.w3.org/2000/svg'><script>alert(1)</script></svg>")
    ok = tmp_path / "ok.png"
    ok.write_bytes(unique_png())
    async with sqlite_relay.client(alice) as ca:
        channel = await create_channel(ca, alice, "open")
        result = await buzz(
            sqlite_relay.url,
            alice,
            "messages",
            "send",
            "--channel",
            channel,
            "--file",
            str(ok),
            "--file",
            str(svg),
        )
        assert result.code == 1
        assert result.error["error"] == "user_error"
        assert result.error["relay_message"] == "content type not allowed: image/svg+xml"
        # an HTTP refusal's reason carries no NIP-01 prefix: no refusal or hint is made up for it
        assert "refusal" not in result.error and "hint" not in result.error
        assert await ca.query([{"kinds": [9], "#h": [channel]}]) == []
    missing = await buzz(
        sqlite_relay.url, alice, "messages", "send", "--channel", channel, "--file", str(tmp_path / "nope")
    )
    assert missing.code == 1 and "no such file" in missing.error["message"]
    nothing = await buzz(sqlite_relay.url, alice, "messages", "send", "--channel", channel)
    assert nothing.code == 1 and "--content" in nothing.error["message"]


async def test_files_upload_and_hash_check(
    tmp_path: Path, sqlite_relay: RunningRelay, alice: Identity
) -> None:
    log = tmp_path / "run.log"
    log.write_text("line 1\nline 2\n")
    up = await buzz(sqlite_relay.url, alice, "files", "upload", "--file", str(log))
    d = up.json
    assert (d["type"], d["size"], d["sha256"]) == (
        "text/plain",
        14,
        hashlib.sha256(log.read_bytes()).hexdigest(),
    )
    bad = await buzz(sqlite_relay.url, alice, "files", "get", "--sha256", "xyz")
    assert bad.code == 1 and bad.error["error"] == "user_error"
    no_auth = await buzz(sqlite_relay.url, Identity.new(), "files", "get", "--sha256", d["sha256"])
    assert no_auth.code == 1 and no_auth.error["error"] == "not_found"


async def test_quota_refusal_reaches_the_cli(tmp_path: Path, alice: Identity) -> None:
    """A file over the member's quota: exit 1 with the relay's `quota exceeded`, sent before the
    body (the client asks `Expect: 100-continue`), not a reset connection."""
    from buzz.media.limits import MediaSettings
    from tests.support.relay import relay_on

    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(3 << 20))
    async with relay_on(tmp_path / "data", media=MediaSettings(quota_bytes=1 << 20)) as running:
        result = await buzz(running.url, alice, "files", "upload", "--file", str(big))
    assert result.code == 1 and result.error["relay_message"] == "quota exceeded"
