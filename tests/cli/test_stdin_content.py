"""`--content -` reads stdin without its one final newline (`echo hi | buzz messages send …`
sends "hi", like `git commit -F -`); any other newline is the author's and stays."""

from __future__ import annotations

from tests.cli.helpers import buzz
from tests.support.relay import Identity, RunningRelay


async def test_stdin_content_loses_exactly_one_trailing_newline(
    sqlite_relay: RunningRelay, alice: Identity
) -> None:
    url = sqlite_relay.url
    channel = (await buzz(url, alice, "channels", "create", "--name", "pipes")).json["channel_id"]
    sent = {}
    for stdin, stored in (
        (b"hello\n", "hello"),
        (b"windows\r\n", "windows"),
        (b"two lines\nand a blank one\n\n", "two lines\nand a blank one\n"),
        (b"no newline", "no newline"),
    ):
        send = await buzz(url, alice, "messages", "send", "--channel", channel, "--content", "-", stdin=stdin)
        sent[send.json["event_id"]] = stored
    edited = next(iter(sent))
    edit = await buzz(url, alice, "messages", "edit", "--event", edited, "--content", "-", stdin=b"edited\n")
    assert edit.code == 0, edit.stderr
    sent[edited] = "edited"
    shown = (await buzz(url, alice, "messages", "get", "--channel", channel)).json["messages"]
    assert {m["id"]: m["content"] for m in shown} == sent
    only_newline = await buzz(
        url, alice, "messages", "send", "--channel", channel, "--content", "-", stdin=b"\n"
    )
    assert (only_newline.code, only_newline.error["error"]) == (1, "user_error")  # empty, like b""
    blanks = [
        await buzz(url, alice, "messages", "send", "--channel", channel, "--content", " \t "),
        await buzz(url, alice, "messages", "send", "--channel", channel, "--content", "-", stdin=b"\n\n"),
        await buzz(url, alice, "messages", "edit", "--event", edited, "--content", "   "),
    ]
    assert [(b.code, b.error["message"]) for b in blanks] == [(1, "content is only whitespace")] * 3
    after = (await buzz(url, alice, "messages", "get", "--channel", channel)).json["messages"]
    assert {m["id"]: m["content"] for m in after} == sent  # nothing was sent or edited
