"""End to end: the real `buzz` CLI against a running relay (agents.md §2, §3; relay.md §15).

Two people share a private channel and hold a threaded conversation with mentions,
reactions, an edit and deletions; a third person is kept out of reads, writes and search.
"""

from __future__ import annotations

import pytest

from buzz.core import nip19
from tests.cli.helpers import buzz
from tests.support.relay import Identity, RunningRelay


@pytest.mark.timeout(240)
async def test_private_channel_conversation(
    relay: RunningRelay, alice: Identity, bob: Identity, carol: Identity
) -> None:
    url = relay.url

    async def as_(who: Identity, *args: str, stdin: bytes | None = None):
        return await buzz(url, who, *args, stdin=stdin)

    # profiles, so @Name mentions resolve
    for who, name in ((alice, "Alice"), (bob, "Bob"), (carol, "Carol")):
        assert (await as_(who, "users", "set-profile", "--name", name)).json["profile"] == {"name": name}

    # Alice creates a private channel and adds Bob (by npub)
    created = (await as_(alice, "channels", "create", "--name", "design", "--visibility", "private")).json
    channel = created["channel_id"]
    assert len(created["event_id"]) == 64
    added = (
        await as_(alice, "channels", "add-member", "--channel", channel, "--pubkey", nip19.npub(bob.pubkey))
    ).json
    assert (added["channel_id"], added["pubkey"]) == (channel, bob.pubkey)

    members = (await as_(bob, "channels", "members", "--channel", channel)).json["members"]
    assert {(m["pubkey"], m["role"], m["display_name"], m["is_agent"]) for m in members} == {
        (alice.pubkey, "owner", "Alice", False),
        (bob.pubkey, "member", "Bob", False),
    }
    listed = (await as_(bob, "channels", "list", "--member")).json["channels"]
    assert listed == [
        {
            "id": channel,
            "name": "design",
            "type": "stream",
            "visibility": "private",
            "about": "",
            "archived": False,
            "member": True,
        }
    ]
    got = (await as_(bob, "channels", "get", "--channel", channel)).json
    assert (got["id"], got["visibility"], got["member"], got["role"]) == (channel, "private", True, "member")

    # a thread: root (mentions Bob by name), Bob's reply from stdin, Alice's nested reply
    root = (
        await as_(
            alice,
            "messages",
            "send",
            "--channel",
            channel,
            "--content",
            "Kickoff: @Bob please review the mockups",
        )
    ).json
    assert (root["reply_to"], root["root"], root["mention_pubkeys"]) == (None, None, [bob.pubkey])
    reply = (
        await as_(
            bob,
            "messages",
            "send",
            "--channel",
            channel,
            "--reply-to",
            root["event_id"],
            "--content",
            "-",
            stdin=b"On it",
        )
    ).json
    assert (reply["reply_to"], reply["root"], reply["mention_pubkeys"]) == (
        root["event_id"],
        root["event_id"],
        [],
    )
    nested = (
        await as_(
            alice,
            "messages",
            "send",
            "--channel",
            channel,
            "--reply-to",
            reply["event_id"],
            "--content",
            "Thanks!",
            "--mention",
            bob.pubkey,
            "--broadcast",
        )
    ).json
    assert (nested["reply_to"], nested["root"], nested["mention_pubkeys"]) == (
        reply["event_id"],
        root["event_id"],
        [bob.pubkey],
    )

    # mention rules (agents.md §2.3): unresolved name, non-member mention
    unresolved = await as_(alice, "messages", "send", "--channel", channel, "--content", "@Nobody there?")
    assert (unresolved.code, unresolved.error["error"]) == (1, "user_error")
    outsider = await as_(
        alice, "messages", "send", "--channel", channel, "--content", "hi", "--mention", carol.pubkey
    )
    assert (outsider.code, outsider.error["error"]) == (1, "user_error")
    crowd = [arg for _ in range(51) for arg in ("--mention", Identity.new().pubkey)]
    too_many = await as_(alice, "messages", "send", "--channel", channel, "--content", "all", *crowd)
    assert (too_many.code, too_many.error["error"]) == (1, "user_error")
    empty = await as_(alice, "messages", "send", "--channel", channel, "--content", "-", stdin=b"")
    assert (empty.code, empty.error["error"]) == (1, "user_error")
    history = (await as_(alice, "messages", "get", "--channel", channel)).json["messages"]
    assert len(history) == 3  # none of the refused sends published anything (§9.2 items 8–9)
    # with an explicit mention, an unresolved @name is presentation only
    presented = (
        await as_(
            alice,
            "messages",
            "send",
            "--channel",
            channel,
            "--content",
            "@Nobody fyi",
            "--mention",
            bob.pubkey,
        )
    ).json
    assert presented["mention_pubkeys"] == [bob.pubkey]
    assert (await as_(alice, "messages", "delete", "--event", presented["event_id"])).json["kind"] == 5

    # reactions: add, duplicate → conflict (exit 5)
    reacted = (await as_(bob, "reactions", "add", "--event", root["event_id"], "--emoji", "👍")).json
    assert reacted["target_id"] == root["event_id"]
    again = await as_(bob, "reactions", "add", "--event", root["event_id"], "--emoji", "👍")
    assert (again.code, again.error["error"], again.error["relay_message"]) == (
        5,
        "conflict",
        "duplicate: reaction already exists",
    )

    # edit the root; the thread shows the new text with edited_at
    edited = (
        await as_(
            alice,
            "messages",
            "edit",
            "--event",
            root["event_id"],
            "--content",
            "Kickoff: review the mockups by Friday",
        )
    ).json
    assert edited["target_id"] == root["event_id"]
    not_author = await as_(bob, "messages", "edit", "--event", root["event_id"], "--content", "hijack")
    assert (not_author.code, not_author.error["relay_message"]) == (
        4,
        "invalid: must be event author to edit",
    )

    thread = (await as_(bob, "messages", "thread", "--channel", channel, "--event", nested["event_id"])).json
    assert thread["root"] == root["event_id"]
    assert [m["id"] for m in thread["messages"]] == [root["event_id"], reply["event_id"], nested["event_id"]]
    first = thread["messages"][0]
    assert first["content"] == "Kickoff: review the mockups by Friday" and first["edited_at"] is not None
    assert [(m["reply_to"], m["root"]) for m in thread["messages"]] == [
        (None, None),
        (root["event_id"], root["event_id"]),
        (reply["event_id"], root["event_id"]),
    ]
    assert thread["messages"][2]["tags"] == [
        ["h", channel],
        ["e", root["event_id"], "", "root"],
        ["e", reply["event_id"], "", "reply"],
        ["p", bob.pubkey],
        ["broadcast", "1"],
    ]
    shallow = (
        await as_(
            bob, "messages", "thread", "--channel", channel, "--event", root["event_id"], "--depth-limit", "1"
        )
    ).json
    assert [m["id"] for m in shallow["messages"]] == [root["event_id"], reply["event_id"]]

    # search: members find it, Carol does not
    hits = (await as_(bob, "messages", "search", "--query", "mockups")).json["messages"]
    assert [m["id"] for m in hits] == [root["event_id"]]
    assert (await as_(carol, "messages", "search", "--query", "mockups")).json["messages"] == []

    # Carol is restricted on read and write, and cannot see the channel
    read = await as_(carol, "messages", "get", "--channel", channel)
    assert (read.code, read.error["error"], read.error["relay_message"]) == (
        3,
        "auth_error",
        "restricted: not a channel member",
    )
    write = await as_(carol, "messages", "send", "--channel", channel, "--content", "let me in")
    assert (write.code, write.error["error"], write.error["relay_message"]) == (
        4,
        "error",
        "restricted: not a channel member",
    )
    hidden = await as_(carol, "channels", "get", "--channel", channel)
    assert (hidden.code, hidden.error["error"]) == (1, "not_found")
    assert (await as_(carol, "channels", "list")).json["channels"] == []

    # deletions: Bob's own reply (kind 5), Bob's off-topic note by the owner (kind 9005)
    removed = (await as_(bob, "reactions", "remove", "--event", root["event_id"], "--emoji", "👍")).json
    assert removed["reaction_id"] == reacted["event_id"]
    offtopic = (await as_(bob, "messages", "send", "--channel", channel, "--content", "lunch?")).json
    moderated = (
        await as_(alice, "messages", "delete", "--event", offtopic["event_id"], "--reason-code", "off_topic")
    ).json
    assert (moderated["kind"], moderated["channel_id"]) == (9005, channel)
    own = (await as_(bob, "messages", "delete", "--event", reply["event_id"])).json
    assert own["kind"] == 5

    timeline = (await as_(alice, "messages", "get", "--channel", channel)).json["messages"]
    newest_first = sorted((nested, root), key=lambda m: (-m["created_at"], m["event_id"]))  # relay.md §6.4
    assert [m["id"] for m in timeline] == [m["event_id"] for m in newest_first]
    assert {m["id"]: m["content"] for m in timeline}[
        root["event_id"]
    ] == "Kickoff: review the mockups by Friday"

    # DMs
    dm = (await as_(alice, "dms", "open", "--pubkey", bob.pubkey)).json["channel_id"]
    assert (await as_(bob, "dms", "open", "--pubkey", alice.pubkey)).json == {"channel_id": dm}
    dms = (await as_(bob, "dms", "list")).json["dms"]
    assert [(d["channel_id"], sorted(d["participants"])) for d in dms] == [
        (dm, sorted([alice.pubkey, bob.pubkey]))
    ]
    assert (await as_(bob, "messages", "send", "--channel", dm, "--content", "psst")).json["channel_id"] == dm
