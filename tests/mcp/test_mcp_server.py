"""`buzz mcp` (agents.md §7; conformance items 37–38): a real `buzz mcp` subprocess driven by
the official `mcp` client over stdio, against a real relay."""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path

import orjson

import buzz
from buzz.client.errors import REFUSALS
from buzz.core import nip19
from buzz.core.event import Event, verify_event
from buzz.core.nip_oa import build_auth_tag
from tests.mcp.session import BUZZ, mcp_server
from tests.support.deadline import scaled
from tests.support.relay import Identity, RunningRelay
from tests.workspace.helpers import create_channel

TOOLS = {
    "send_message": (
        {"channel_id", "content", "reply_to", "mentions", "broadcast", "files"},
        {"channel_id"},  # and content or files (anyOf)
    ),
    "get_messages": ({"channel_id", "limit", "before", "since", "kinds"}, {"channel_id"}),
    "get_thread": ({"channel_id", "event_id", "limit", "depth_limit"}, {"channel_id", "event_id"}),
    "search": ({"query", "channel_id", "author", "since", "limit"}, {"query"}),
    "list_channels": ({"member_only", "visibility", "limit"}, set()),
    "join_channel": ({"channel_id"}, {"channel_id"}),
    "add_reaction": ({"event_id", "emoji"}, {"event_id", "emoji"}),
    "mem_get": ({"slug"}, {"slug"}),
    "mem_set": ({"slug", "value"}, {"slug", "value"}),
    "mem_ls": (set(), set()),
    "mem_search": ({"text", "limit"}, {"text"}),
    "upload_file": ({"path"}, {"path"}),
    "get_file": ({"url", "sha256", "path"}, set()),  # url or sha256 (oneOf)
    "send_private_dm": ({"pubkeys", "content", "reply_to"}, {"pubkeys", "content"}),
    "get_private_dms": ({"pubkeys", "limit"}, set()),
    "request_job": (
        {"channel_id", "agent", "prompt", "requested_outcome", "deadline_secs", "parent_job"},
        {"channel_id", "agent", "prompt"},
    ),
    "list_jobs": ({"channel_id", "state", "limit"}, {"channel_id"}),
    "get_job": ({"job_id"}, {"job_id"}),
    "cancel_job": ({"job_id", "reason"}, {"job_id"}),
    "submit_job_result": ({"channel_id", "job_id", "manifest"}, {"channel_id", "job_id", "manifest"}),
    # workflows.md §17
    "list_workflows": ({"channel_id"}, {"channel_id"}),
    "get_workflow": ({"workflow_id"}, {"workflow_id"}),
    "create_workflow": ({"channel_id", "yaml", "name"}, {"channel_id", "yaml"}),
    "update_workflow": ({"workflow_id", "yaml", "name"}, {"workflow_id", "yaml"}),
    "delete_workflow": ({"workflow_id"}, {"workflow_id"}),
    "enable_workflow": ({"workflow_id"}, {"workflow_id"}),
    "disable_workflow": ({"workflow_id"}, {"workflow_id"}),
    "trigger_workflow": ({"workflow_id", "inputs"}, {"workflow_id"}),
    "list_workflow_runs": ({"workflow_id", "limit", "before", "before_id"}, {"workflow_id"}),
    "get_workflow_run": ({"workflow_id", "run_id"}, {"workflow_id", "run_id"}),
    "approve_workflow_step": ({"approval", "note"}, {"approval"}),
    "deny_workflow_step": ({"approval", "note"}, {"approval"}),
}
SEND_KEYS = {"event_id", "channel_id", "created_at", "reply_to", "root", "mention_pubkeys"}
MESSAGE_KEYS = {"id", "pubkey", "created_at", "kind", "tags", "content", "sig"}
MESSAGE_KEYS |= {"channel_id", "reply_to", "root", "mentions", "edited_at"}


async def _stored(relay: RunningRelay, reader: Identity, event_id: str) -> Event:
    async with relay.client(reader) as c:
        found = await c.query([{"ids": [event_id]}])
    assert len(found) == 1
    verify_event(found[0])
    return found[0]


def test_readme_names_exactly_the_tools_the_server_lists() -> None:
    """The README's MCP section (its tool list and the sample `list_tools` output) must not go
    stale when a tool is added."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme.split("<!-- BEGIN: mcp-server", 1)[1].split("<!-- END: mcp-server", 1)[0]
    prose = section.split("Tools: ", 1)[1].split(";", 1)[0]
    assert re.findall(r"`(\w+)`", prose) == list(TOOLS)
    listed = re.search(r"^\['send_message'.*\]$", section, re.M)
    assert listed is not None and re.findall(r"'(\w+)'", listed.group(0)) == list(TOOLS)


# -- item 37: exactly the tools with their parameter schemas --------------------------------
async def test_lists_exactly_the_tools(sqlite_relay: RunningRelay, alice: Identity) -> None:
    async with mcp_server(sqlite_relay.url, alice) as server:
        assert server.init.server_info.name == "buzz"
        assert server.init.server_info.version == buzz.__version__
        tools = (await server.session.list_tools()).tools
        assert [t.name for t in tools] == list(TOOLS)
        for tool in tools:
            schema = tool.input_schema
            properties, required = TOOLS[tool.name]
            assert schema["type"] == "object" and schema["additionalProperties"] is False
            assert set(schema["properties"]) == properties, tool.name
            assert set(schema.get("required", [])) == required, tool.name
            assert tool.description
        by_name = {t.name: t.input_schema["properties"] for t in tools}
        assert by_name["get_messages"]["limit"] == {
            "type": "integer",
            "minimum": 1,
            "maximum": 500,
            "default": 50,
        }
        assert by_name["get_thread"]["depth_limit"]["maximum"] == 100
        assert by_name["search"]["query"]["maxLength"] == 4096
        assert by_name["list_channels"]["member_only"]["default"] is True
        assert by_name["send_message"]["mentions"]["maxItems"] == 50
        assert by_name["add_reaction"]["emoji"]["maxLength"] == 64
    log = server.log()
    assert alice.pubkey in log and alice.secret not in log


# -- item 38 and the §7 table: messages, channels, reactions, memory -------------------------------
async def test_round_trip(relay: RunningRelay, alice: Identity, bob: Identity, tmp_path: Path) -> None:
    agent, owner = alice, bob
    async with relay.client(owner) as o:
        channel = await create_channel(o, owner, "open", name="mcp-lab")
    tag = build_auth_tag(owner.secret, agent.pubkey)
    async with mcp_server(relay.url, agent, tag, env={"XDG_CACHE_HOME": str(tmp_path)}) as server:
        joined = await server.ok("join_channel", {"channel_id": channel})
        assert (
            joined["channel_id"] == channel and (await _stored(relay, owner, joined["event_id"])).kind == 9021
        )
        channels = (await server.ok("list_channels"))["channels"]
        assert [(c["id"], c["name"], c["member"]) for c in channels] == [(channel, "mcp-lab", True)]

        first = await server.ok("send_message", {"channel_id": channel, "content": "hello from mcp"})
        assert set(first) == SEND_KEYS
        assert (first["channel_id"], first["reply_to"], first["root"], first["mention_pubkeys"]) == (
            channel,
            None,
            None,
            [],
        )
        reply = await server.ok(
            "send_message",
            {
                "channel_id": channel,
                "content": "a reply that pings",
                "reply_to": first["event_id"],
                "mentions": [nip19.encode("npub", owner.pubkey)],
            },
        )
        assert (reply["reply_to"], reply["root"], reply["mention_pubkeys"]) == (
            first["event_id"],
            first["event_id"],
            [owner.pubkey],
        )
        # Signed by the agent key with the tags `messages send` produces (§2.3, §3.2).
        stored = await _stored(relay, owner, reply["event_id"])
        assert stored.pubkey == agent.pubkey and stored.kind == 9
        assert [list(t) for t in stored.tags] == [
            ["h", channel],
            ["e", first["event_id"], "", "reply"],
            ["p", owner.pubkey],
        ]

        messages = (await server.ok("get_messages", {"channel_id": channel}))["messages"]
        by_id = {m["id"]: m for m in messages}
        assert len(messages) == 2 and set(by_id) == {reply["event_id"], first["event_id"]}
        assert messages[0]["created_at"] >= messages[1]["created_at"]  # newest first (ties by id)
        assert all(set(m) == MESSAGE_KEYS for m in messages)
        assert (by_id[first["event_id"]]["content"], by_id[first["event_id"]]["pubkey"]) == (
            "hello from mcp",
            agent.pubkey,
        )
        assert by_id[reply["event_id"]]["mentions"] == [owner.pubkey]
        assert by_id[reply["event_id"]]["reply_to"] == first["event_id"]
        only_joins = await server.ok("get_messages", {"channel_id": channel, "kinds": [9021], "limit": 5})
        assert [m["id"] for m in only_joins["messages"]] == [joined["event_id"]]

        thread = await server.ok("get_thread", {"channel_id": channel, "event_id": reply["event_id"]})
        assert thread["root"] == first["event_id"]
        assert [m["id"] for m in thread["messages"]] == [first["event_id"], reply["event_id"]]
        found = await server.ok("search", {"query": "pings", "channel_id": channel})
        assert [m["id"] for m in found["messages"]] == [reply["event_id"]]

        reaction = await server.ok("add_reaction", {"event_id": first["event_id"], "emoji": "👍"})
        assert set(reaction) == {"event_id", "target"} and reaction["target"] == first["event_id"]
        again = await server.error("add_reaction", {"event_id": first["event_id"], "emoji": "👍"})
        assert (again["error"], again["relay_message"]) == ("conflict", "duplicate: reaction already exists")

        assert await server.ok("mem_get", {"slug": "notes"}) == {"slug": "mem/notes", "value": None}
        written = await server.ok("mem_set", {"slug": "notes", "value": "line one\nline two\n"})
        assert set(written) == {"slug", "event_id", "created_at"} and written["slug"] == "mem/notes"
        assert await server.ok("mem_get", {"slug": "mem/notes"}) == {
            "slug": "mem/notes",
            "value": "line one\nline two\n",
        }
        await server.ok("mem_set", {"slug": "core", "value": "I am the lab agent."})
        assert await server.ok("mem_get", {"slug": "core"}) == {
            "slug": "core",
            "value": "I am the lab agent.",
        }
        assert await server.ok("mem_ls") == {"slugs": ["mem/notes"], "complete": True}  # core excluded
        await server.ok("mem_set", {"slug": "dana", "value": "Dana prefers async reviews over meetings"})
        found = await server.ok("mem_search", {"text": "how does Dana like to get feedback?", "limit": 2})
        assert [r["slug"] for r in found["results"]] == ["mem/dana", "mem/notes"]
        assert found["results"][0]["snippet"] == "Dana prefers async reviews over meetings"
        assert list((tmp_path / "buzz" / "recall").glob("*.bin"))  # the encrypted vector cache
        empty = await server.error("mem_search", {"text": "  "})
        assert (empty["error"], empty["message"]) == ("user_error", "search text is empty")
        bad_slug = await server.error("mem_get", {"slug": "Bad Slug"})
        assert bad_slug["error"] == "user_error" and bad_slug["message"].startswith("invalid slug:")
        engram = await _stored(relay, agent, written["event_id"])
        assert engram.kind == 30174 and engram.first_tag("p") == owner.pubkey
    assert agent.secret not in server.log()


# -- §7 item 4: failures are tool errors carrying the CLI category and the relay's reason ----------
async def test_refusals_are_tool_errors(sqlite_relay: RunningRelay, alice: Identity, carol: Identity) -> None:
    async with sqlite_relay.client(carol) as c:
        private = await create_channel(c, carol, "private", name="secret")
        open_channel = await create_channel(c, carol, "open", name="lobby")
    async with mcp_server(sqlite_relay.url, alice) as server:
        refused = await server.error("send_message", {"channel_id": private, "content": "let me in"})
        assert refused == {
            "error": "error",
            "message": "restricted: not a channel member",
            "retryable": False,
            "relay_message": "restricted: not a channel member",
            "refusal": "restricted",
            "hint": REFUSALS["restricted"],
        }
        joined = await server.error("join_channel", {"channel_id": private})
        assert joined["relay_message"] == "restricted: channel is private"

        # Schema violations, checked before anything is sent.
        for arguments, needle in (
            ({"channel_id": open_channel, "limit": 0}, "limit"),
            ({"channel_id": open_channel, "colour": "red"}, "colour"),
            ({"channel_id": "not-a-uuid"}, "channel_id"),
            ({}, "channel_id"),
        ):
            bad = await server.error("get_messages", arguments)
            assert bad["error"] == "user_error" and needle in bad["message"], bad
            assert bad["message"].startswith("invalid arguments for get_messages: ")
        # CLI rules shared with `messages send` (§2.3): mentions must be members; broadcast needs reply_to.
        outsider = await server.error(
            "send_message", {"channel_id": open_channel, "content": "hi", "mentions": [Identity.new().pubkey]}
        )
        assert outsider["error"] == "user_error" and "not a member of the channel" in outsider["message"]
        unresolved = await server.error("send_message", {"channel_id": open_channel, "content": "hi @Nobody"})
        assert unresolved["error"] == "user_error" and "@Nobody" in unresolved["message"]
        assert (
            await server.error(
                "send_message", {"channel_id": open_channel, "content": "x", "broadcast": True}
            )
        )["message"] == "--broadcast requires --reply-to"
        missing = await server.error("get_thread", {"channel_id": open_channel, "event_id": "0" * 64})
        assert missing == {
            "error": "not_found",
            "message": f"event not found: {'0' * 64}",
            "retryable": False,
        }
        # Memory needs the owner from BUZZ_AUTH_TAG (engram.md §12.3).
        no_owner = await server.error("mem_ls")
        assert no_owner["error"] == "user_error" and "BUZZ_AUTH_TAG" in no_owner["message"]
        assert (await server.error("mem_set", {"slug": "notes", "value": "x"}))["error"] == "user_error"
        unknown = await server.error("no_such_tool", {})
        assert unknown["error"] == "user_error" and "no_such_tool" in unknown["message"]
        # The server is still serving after every refusal.
        await server.ok("send_message", {"channel_id": open_channel, "content": "still here"})
    async with sqlite_relay.client(carol) as c:
        assert await c.query([{"kinds": [9], "#h": [private]}]) == []


# -- §7 item 2: no key → exit 3 before serving -------------------------------------------------------
async def test_missing_or_invalid_key_exits_3_before_serving(
    sqlite_relay: RunningRelay, alice: Identity
) -> None:
    base = {k: v for k, v in os.environ.items() if not k.startswith("BUZZ_")}
    cases = (
        ({}, "auth_error"),
        ({"BUZZ_PRIVATE_KEY": "nsec1notakey"}, "key_error"),
        ({"BUZZ_PRIVATE_KEY": alice.secret, "BUZZ_AUTH_TAG": '["auth","x","","y"]'}, "auth_error"),
    )
    for extra, category in cases:
        proc = await asyncio.create_subprocess_exec(
            BUZZ,
            "mcp",
            env=base | {"BUZZ_RELAY_URL": sqlite_relay.url} | extra,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        stdout, stderr = await proc.communicate(b"")
        assert (proc.returncode, stdout) == (3, b"")
        error = orjson.loads(stderr.decode().strip().splitlines()[-1])
        assert error["error"] == category and error["retryable"] is False


# -- JSON-RPC 2.0 §5.1: a line that cannot be read is answered, and the session goes on ---------------
async def test_unreadable_lines_are_answered_and_the_session_goes_on(
    sqlite_relay: RunningRelay, alice: Identity
) -> None:
    base = {k: v for k, v in os.environ.items() if not k.startswith("BUZZ_")}
    proc = await asyncio.create_subprocess_exec(
        BUZZ,
        "mcp",
        env=base | {"BUZZ_RELAY_URL": sqlite_relay.url, "BUZZ_PRIVATE_KEY": alice.secret},
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert proc.stdin is not None and proc.stdout is not None

    async def answer(*lines: bytes) -> dict:
        proc.stdin.write(b"".join(line + b"\n" for line in lines))
        await proc.stdin.drain()
        return orjson.loads(await asyncio.wait_for(proc.stdout.readline(), scaled(30)))

    try:
        hello = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        }
        init = await answer(
            orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello})
        )
        assert init["id"] == 1 and "result" in init
        assert await answer(b"not json") == {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": -32700, "message": "Parse error: the line is not JSON"},
        }
        bad = await answer(b'{"jsonrpc": "2.0", "nothing": 1}')
        assert (bad["id"], bad["error"]["code"]) == (None, -32600)
        listed = await answer(
            b'{"jsonrpc": "2.0", "method": "notifications/initialized"}',
            b'{"jsonrpc": "2.0", "id": 2, "method": "tools/list"}',
        )
        assert listed["id"] == 2 and len(listed["result"]["tools"]) == len(TOOLS)
    finally:
        proc.stdin.close()
        await asyncio.wait_for(proc.wait(), scaled(30))


# -- media.md §14.2: attach and fetch files -------------------------------------------------------
async def test_files_through_mcp(
    sqlite_relay: RunningRelay, alice: Identity, bob: Identity, tmp_path: Path
) -> None:
    """`send_message` with `files`, `upload_file` (a descriptor usable as a NIP-AJ media artifact)
    and `get_file` (hash-checked), as an agent's MCP client calls them."""
    from tests.media.support import png

    async with sqlite_relay.client(bob) as b:
        channel = await create_channel(b, bob, "open", name="files")
    shot = tmp_path / "chart.png"
    shot.write_bytes(png(90, 60))
    log = tmp_path / "build.log"
    log.write_text("ok\n")
    async with mcp_server(sqlite_relay.url, alice) as server:
        await server.ok("join_channel", {"channel_id": channel})
        sent = await server.ok("send_message", {"channel_id": channel, "files": [str(shot), str(log)]})
        assert set(sent) == SEND_KEYS | {"files"}
        assert [f["name"] for f in sent["files"]] == ["chart.png", "build.log"]
        stored = await _stored(sqlite_relay, bob, sent["event_id"])
        assert stored.content == "\n".join(f["url"] for f in sent["files"])
        descriptor = await server.ok("upload_file", {"path": str(log)})
        assert descriptor["sha256"] == sent["files"][1]["sha256"] and descriptor["type"] == "text/plain"
        target = tmp_path / "copy.png"
        got = await server.ok("get_file", {"url": sent["files"][0]["url"], "path": str(target)})
        assert got["path"] == str(target) and target.read_bytes() == shot.read_bytes()
        neither = await server.error("get_file", {})
        assert neither["error"] == "user_error"
        missing = await server.error("upload_file", {"path": str(tmp_path / "nope")})
        assert missing["error"] == "user_error" and "no such file" in missing["message"]
        empty = await server.error("send_message", {"channel_id": channel})
        assert empty["error"] == "user_error"
