"""Pure pieces of the CLI: mention resolution (agents.md §2.3 item 2), thread links (§3.3),
message objects (§2.1 item 5)."""

from __future__ import annotations

from buzz.client.mentions import resolve_names, uri_mentions
from buzz.client.views import message_view, newest_edits, thread_links
from buzz.core import nip19
from buzz.core.event import Event
from tests.support.relay import Identity

A, B, C = "a" * 64, "b" * 64, "c" * 64


def test_longest_exact_name_wins() -> None:
    names = {A: "Ann", B: "Ann Lee", C: "Bo"}
    r = resolve_names("hi @Ann Lee and @Ann, @Bo!", names)
    assert (r.resolved, r.unresolved, r.ambiguous) == ([B, A, C], [], [])


def test_unresolved_ambiguous_and_non_tokens() -> None:
    names = {A: "Sam", B: "Sam"}
    r = resolve_names("@Sam @Samuel mail me at x@example.com @ alone", names)
    assert r.ambiguous == ["@Sam"]
    assert r.unresolved == ["@Samuel"]  # "Sam" must end at a non-word character
    assert r.resolved == []
    assert resolve_names("@ann", {A: "Ann"}).unresolved == ["@ann"]  # case-sensitive


def test_npub_uris_are_explicit_mentions(alice: Identity) -> None:
    text = f"ping nostr:{nip19.npub(alice.pubkey)} and again nostr:{nip19.npub(alice.pubkey)}; nostr:npub1bad"
    assert uri_mentions(text) == [alice.pubkey]


def test_thread_links_and_message_view(alice: Identity) -> None:
    root = Event.create(alice.secret, 9, "root", [["h", "0b6c2f5e-6f7a-4c1d-9e2b-3a4b5c6d7e8f"]])
    direct = Event.create(alice.secret, 9, "r1", [["h", "x"], ["e", root.id, "", "reply"]])
    deep = Event.create(alice.secret, 9, "r2", [["e", root.id, "", "root"], ["e", direct.id, "", "reply"]])
    unmarked = Event.create(alice.secret, 9, "q", [["e", root.id]])
    assert thread_links(root) == (None, None)
    assert thread_links(direct) == (root.id, root.id)
    assert thread_links(deep) == (direct.id, root.id)
    assert thread_links(unmarked) == (None, None)  # unmarked e tags are never thread links

    old = Event.create(alice.secret, 40003, "v2", [["e", root.id]], created_at=100)
    new = Event.create(alice.secret, 40003, "v3", [["e", root.id]], created_at=200)
    edits = newest_edits([old, new])
    view = message_view(root, edits[root.id])
    assert (view.content, view.edited_at, view.channel_id) == (
        "v3",
        200,
        "0b6c2f5e-6f7a-4c1d-9e2b-3a4b5c6d7e8f",
    )
    assert (view.reply_to, view.root, view.mentions) == (None, None, [])
    assert message_view(direct).channel_id is None  # "x" is not a channel id
