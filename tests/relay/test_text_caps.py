"""Text field caps (core.limits.TEXT_CAPS, docs/decisions.md 94): channel name/about/topic/purpose
on 9007 and 9002, profile `name`/`display_name` on kind 0, and the ban reason of `buzz admin ban`.
At the cap a value is accepted; one code point over it is refused `invalid: <field> too long
(<n> characters, max <cap>)` (an error line from the CLI). Real relay, real `buzz` command."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest

from buzz.client import RelayClient
from buzz.core.event import Event
from buzz.core.limits import TEXT_CAPS
from buzz.store import open_store
from tests.operator.support import buzz
from tests.support.relay import Identity, RunningRelay
from tests.workspace.helpers import accepted, create_channel

WIDE = "é"  # one code point, two UTF-8 bytes: caps count characters, not bytes


def _over(field: str) -> tuple[str, str]:
    """(a value exactly at the cap, one a code point over it)."""
    cap = TEXT_CAPS[field]
    return WIDE * cap, WIDE * (cap + 1)


def _too_long(field: str) -> str:
    cap = TEXT_CAPS[field]
    return f"invalid: {field} too long ({cap + 1} characters, max {cap})"


async def _answer(client: RelayClient, event: Event) -> str | None:
    """None when accepted, else the refusal."""
    result = await client.publish(event)
    return None if result.accepted else result.message


@pytest.mark.parametrize("tag", ["name", "about", "topic", "purpose"])
async def test_channel_text_tags_are_capped_on_create_and_edit(
    sqlite_relay: RunningRelay, alice: Identity, tag: str
) -> None:
    field = f"channel {tag}"
    at_cap, over = _over(field)
    async with sqlite_relay.client(alice) as a:

        def create(value: str) -> Event:
            named = [] if tag == "name" else [["name", "capped"]]
            tags = [["h", str(uuid.uuid4())], *named, [tag, value]]
            return Event.create(alice.secret, 9007, "", tags)

        assert await _answer(a, create(over)) == _too_long(field)
        assert await _answer(a, create(at_cap)) is None
        channel = await create_channel(a, alice, "open")
        edit = Event.create(alice.secret, 9002, "", [["h", channel], [tag, over]])
        assert await _answer(a, edit) == _too_long(field)
        await accepted(a, Event.create(alice.secret, 9002, "", [["h", channel], [tag, at_cap]]))


async def test_the_name_cap_counts_the_name_without_its_leading_hash(
    sqlite_relay: RunningRelay, alice: Identity
) -> None:
    at_cap, _ = _over("channel name")
    async with sqlite_relay.client(alice) as a:
        tags = [["h", str(uuid.uuid4())], ["name", f"  #{at_cap} "]]
        assert await _answer(a, Event.create(alice.secret, 9007, "", tags)) is None


@pytest.mark.parametrize("key", ["name", "display_name"])
async def test_profile_names_are_capped(sqlite_relay: RunningRelay, alice: Identity, key: str) -> None:
    field = f"profile {key}"
    at_cap, over = _over(field)
    async with sqlite_relay.client(alice) as a:
        refused = Event.create(alice.secret, 0, json.dumps({key: over, "about": "hi"}))
        assert await _answer(a, refused) == _too_long(field)
        now = int(time.time())
        assert await _answer(a, Event.create(alice.secret, 0, json.dumps({key: at_cap}), (), now - 1)) is None
        odd = Event.create(alice.secret, 0, json.dumps({key: 12345}), (), now)  # not a string: no cap
        assert await _answer(a, odd) is None


async def test_ban_reasons_are_capped(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    store = open_store(None, data)
    await store.open()
    await store.close()
    at_cap, over = _over("ban reason")
    key = Identity.new().pubkey
    done = buzz("admin", "--data-dir", str(data), "ban", key, "--reason", over)
    assert done.returncode == 1, done.stderr
    error = json.loads(done.stderr.strip().splitlines()[-1])
    assert error["error"] == "user_error"
    assert error["message"] == _too_long("ban reason").removeprefix("invalid: ")
    done = buzz("--format", "compact", "admin", "--data-dir", str(data), "ban", key, "--reason", at_cap)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["banned"] is True


def test_docs_list_the_caps_the_relay_enforces() -> None:
    """docs/limits.md's table of text field caps is TEXT_CAPS, row for row."""
    text = (Path(__file__).parents[2] / "docs" / "limits.md").read_text()
    section = text.split("# Text field caps", 1)[1].split("\n# ", 1)[0]  # other limits follow it
    rows = [
        line.split("|")[1:3] for line in section.splitlines() if line.startswith("| ") and "---" not in line
    ]
    documented = {field.strip(): int(cap) for field, cap in rows[1:]}
    assert documented == TEXT_CAPS
