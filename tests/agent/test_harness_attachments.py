"""Attached files reach the agent, and the agent's replies carry files (media.md §14; checklist
47, 48): a real relay, the real harness, the example rules agent as the real ACP subprocess."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from buzz.core.imeta import imeta_tags
from tests.agent.support import Workspace
from tests.media.support import get, imeta_of, png, upload


async def _post_with_files(ws: Workspace, text: str) -> tuple[object, list[dict[str, object]]]:
    base = ws.relay.http_url
    shot = await upload(base, ws.owner, png(200, 100))
    log = await upload(base, ws.owner, b"ERROR disk full at 03:12\nretrying\n")
    big = await upload(base, ws.owner, os.urandom(30 << 20))
    tags = [
        imeta_of(shot, name="screenshot.png"),
        imeta_of(log, name="deploy.log"),
        imeta_of(big, name="core.dump"),
    ]
    content = "\n".join([text, shot["url"], log["url"], big["url"]])
    mention = await ws.post(ws.owner, content, mention=ws.agent.pubkey, extra=tags)
    return mention, [shot, log, big]


async def test_attached_files_reach_the_agent_as_resources(ws: Workspace) -> None:
    async with ws.harness():
        mention, (shot, log, big) = await _post_with_files(ws, "files")
        await ws.watcher.wait_for(
            lambda e: bool(ws.watcher.answers_to(mention, ws.agent.pubkey)), timeout=60, what="reply"
        )
        reply = ws.watcher.answers_to(mention, ws.agent.pubkey)[0]
    folder = ws.tmp / ".scratch" / "attachments"
    assert (folder / f"{shot['sha256']}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (folder / f"{log['sha256']}.txt").read_text().startswith("ERROR disk full")
    assert not list(folder.glob(f"{big['sha256']}*"))  # over 25 MiB: listed, not downloaded
    prompt = ws.records("prompt")[-1]
    block = next(b for b in prompt["blocks"] if b.startswith("[Buzz event"))
    assert (
        f"Attachment: screenshot.png (image/png, {shot['size']} bytes) at {folder.resolve()}/{shot['sha256']}.png"
        in block
    )
    assert f"Attachment: deploy.log (text/plain, {log['size']} bytes) at " in block
    assert (
        f"Attachment: core.dump (application/octet-stream) not downloaded: larger than 25 MiB — {big['url']}"
        in block
    )
    links = [c for c in prompt["content"] if c["type"] == "resource_link"]
    assert [(c["name"], c["mimeType"], c["size"]) for c in links] == [
        ("screenshot.png", "image/png", shot["size"]),
        ("deploy.log", "text/plain", log["size"]),
    ]
    assert links[0]["uri"] == (folder / f"{shot['sha256']}.png").resolve().as_uri()
    assert [c["type"] for c in prompt["content"]] == [
        "resource_link",
        "resource_link",
    ]  # no capability: no inline
    assert reply.content.startswith(
        "files: screenshot.png (image/png, resource_link); deploy.log (text/plain, resource_link)"
    )


async def test_capable_agent_gets_the_image_and_the_text(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RULES_AGENT_PROMPT_CAPS", "image,embeddedContext")
    async with ws.harness():
        mention, (shot, _, _) = await _post_with_files(ws, "files")
        await ws.watcher.wait_for(
            lambda e: bool(ws.watcher.answers_to(mention, ws.agent.pubkey)), timeout=60, what="reply"
        )
        reply = ws.watcher.answers_to(mention, ws.agent.pubkey)[0]
    content = ws.records("prompt")[-1]["content"]
    assert [c["type"] for c in content] == ["resource_link", "image", "resource_link", "resource"]
    assert content[1]["data_bytes"] == shot["size"] and content[1]["mimeType"] == "image/png"
    assert content[3]["text"] == "ERROR disk full at 03:12\nretrying\n"
    assert reply.content.startswith(
        "files: screenshot.png (image/png, resource_link+image); deploy.log (text/plain, resource_link+resource)"
    )


async def test_agent_reply_carries_a_file_it_made(ws: Workspace) -> None:
    async with ws.harness():
        mention = await ws.post(ws.owner, "attach summary.txt", mention=ws.agent.pubkey)
        await ws.watcher.wait_for(
            lambda e: bool(ws.watcher.answers_to(mention, ws.agent.pubkey)), timeout=60, what="reply"
        )
        reply = ws.watcher.answers_to(mention, ws.agent.pubkey)[0]
    (tag,) = imeta_tags(reply)
    assert (tag["name"], tag["m"]) == ("summary.txt", "text/plain")
    assert reply.content.startswith("attached summary.txt") and tag["url"] in reply.content
    got = await get(ws.relay.http_url, ws.owner, tag["x"])
    assert got.status == 200 and got.body.decode().startswith("made by rules-agent")
    assert Path(ws.tmp / "OUTBOX" / "summary.txt").exists()
