"""`buzz mem log`, `orphans`, `export` / `import` and `set`'s JSON line (issue 16 items 3–4)
against real relays on loopback ports."""

from __future__ import annotations

import hashlib
import re
import time
from pathlib import Path

import orjson

from buzz.core import engram
from tests.mem.cli import buzz_mem
from tests.support.relay import Identity, RunningRelay, relay_on


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


_WROTE = re.compile(r"^wrote (\S+) \(event ([0-9a-f]{64}), created_at (\d+)\)$")


def _wrote(stderr: str) -> dict[str, object]:
    """The `wrote …` line of `set` (stdout stays empty, engram.md §12.8 step 8)."""
    m = _WROTE.match(stderr.strip())
    assert m, stderr
    return {"slug": m[1], "event_id": m[2], "created_at": int(m[3])}


async def test_set_keeps_stdout_empty(sqlite_relay: RunningRelay, alice: Identity, bob: Identity) -> None:
    r = await buzz_mem(sqlite_relay, alice, "set", "notes/a", "one", "--owner", bob.pubkey)
    assert (r.code, r.stdout) == (0, b""), r.stderr
    out = _wrote(r.stderr)
    assert out["slug"] == "mem/notes/a"
    ls = (await buzz_mem(sqlite_relay, alice, "ls", "--owner", bob.pubkey)).json
    assert ls == [out]


async def test_log_shows_every_kept_version_to_the_pair_only(
    relay: RunningRelay, alice: Identity, bob: Identity, carol: Identity
) -> None:
    agent, owner, stranger = alice, bob, carol
    o = ("--owner", owner.pubkey)
    writes = []
    for value in ("first", "second", "third"):
        r = await buzz_mem(relay, agent, "set", "notes/a", value, *o)
        assert r.code == 0, r.stderr
        writes.append(_wrote(r.stderr))
    head = (await buzz_mem(relay, agent, "ls", *o)).json[0]
    assert head["event_id"] == writes[-1]["event_id"]

    r = await buzz_mem(relay, agent, "log", "notes/a", *o)
    assert r.code == 0, r.stderr
    # the superseded versions are kept (soft-deleted) and served to the pair by POST /history
    assert r.json == {
        "slug": "mem/notes/a",
        "versions": [
            {
                "event_id": w["event_id"],
                "created_at": w["created_at"],
                "sha256": _sha(value),
                "tombstone": False,
                "head": w is writes[-1],
            }
            for w, value in reversed(list(zip(writes, ("first", "second", "third"), strict=True)))
        ],
        "complete": True,
    }
    assert (await buzz_mem(relay, owner, "log", "notes/a", "--agent", agent.pubkey)).json == r.json
    # still the head only on every other read path
    async with relay.client(agent) as client:
        served = await client.query([{"kinds": [engram.KIND_ENGRAM], "authors": [agent.pubkey]}])
    assert [e.id for e in served] == [head["event_id"]]

    r = await buzz_mem(relay, agent, "log", "notes/a", "--limit", "2", *o)
    assert [v["sha256"] for v in r.json["versions"]] == [_sha("third"), _sha("second")]
    assert r.json["complete"] is False

    assert (await buzz_mem(relay, agent, "rm", "notes/a", *o)).code == 0
    r = await buzz_mem(relay, owner, "log", "notes/a", "--agent", agent.pubkey)
    versions = r.json["versions"]
    assert len(versions) == 4
    assert (versions[0]["tombstone"], versions[0]["sha256"], versions[0]["head"]) == (True, None, True)
    assert [v["head"] for v in versions[1:]] == [False] * 3

    # nobody else learns anything: the same answer as for a slug never written
    never = await buzz_mem(relay, stranger, "log", "never/written", "--agent", agent.pubkey)
    never.expect_error(1, "not_found", "not found: mem/never/written")
    r = await buzz_mem(relay, stranger, "log", "notes/a", "--agent", agent.pubkey)
    r.expect_error(1, "not_found", "not found: mem/notes/a")
    peer = Identity.new()  # another agent of the same owner reads only its own pair's memory
    r = await buzz_mem(relay, peer, "log", "notes/a", "--owner", owner.pubkey)
    r.expect_error(1, "not_found", "not found: mem/notes/a")
    (await buzz_mem(relay, agent, "log", "Bad Slug", *o)).expect_error(1, "user_error", "invalid slug")
    r = await buzz_mem(relay, agent, "log", "notes/a", "--limit", "0", *o)
    r.expect_error(1, "user_error", "invalid --limit")


async def test_orphans_follow_references_from_core(
    sqlite_relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    relay, agent, owner = sqlite_relay, alice, bob
    o = ("--owner", owner.pubkey)
    for slug, value in (
        ("core", "I am Ada. See [[mem/projects]]."),
        ("projects", "Atlas: [[mem/projects/atlas]]; gone: [[mem/projects/old]]"),
        ("projects/atlas", "budget 40k"),
        ("projects/old", "x"),
        ("scratch", "points at [[mem/projects/atlas]] but nothing reaches it"),
        ("lost", "nobody refers to me"),
    ):
        assert (await buzz_mem(relay, agent, "set", slug, value, *o)).code == 0
    assert (await buzz_mem(relay, agent, "rm", "projects/old", *o)).code == 0

    r = await buzz_mem(relay, agent, "orphans", *o)
    assert r.code == 0, r.stderr
    assert r.json == {
        "orphans": ["mem/lost", "mem/scratch"],
        "dangling": ["mem/projects/old"],
        "complete": True,
        "reason": None,
    }
    assert (await buzz_mem(relay, owner, "orphans", "--agent", agent.pubkey)).json == r.json
    listed = [e["slug"] for e in (await buzz_mem(relay, agent, "ls", *o)).json]
    assert "mem/lost" in listed  # review only: nothing was deleted


async def _seed_old(
    relay: RunningRelay, agent: Identity, owner: Identity, age_s: int
) -> dict[str, str | None]:
    """Heads written `age_s` seconds in the past (relay A has its past-drift check off)."""
    key = engram.conversation_key(agent.secret, owner.pubkey)
    assert key
    bodies: list[engram.Body] = [
        engram.CoreBody("I am Ada. [[mem/people/dana]]"),
        engram.MemoryBody("mem/people/dana", "Dana prefers async reviews"),
        engram.MemoryBody("mem/projects/atlas", "The Atlas budget is 40,000 euros\nline two\n"),
        engram.MemoryBody("mem/old", None),
    ]
    then = int(time.time()) - age_s
    async with relay.client(agent) as client:
        for body in bodies:
            result = await client.publish(engram.build_event(agent.secret, owner.pubkey, body, then))
            assert result.accepted, result.message
    return {b.slug: b.text for b in bodies}


async def test_export_then_import_moves_memory_to_a_new_relay(
    tmp_path: Path, alice: Identity, bob: Identity, carol: Identity
) -> None:
    agent, owner = alice, bob
    o = ("--owner", owner.pubkey)
    bundle = tmp_path / "memory.bundle"
    async with (
        relay_on(tmp_path / "a", max_past_drift_s=0) as relay_a,
        relay_on(tmp_path / "b") as relay_b,
    ):
        values = await _seed_old(relay_a, agent, owner, 3600)
        r = await buzz_mem(relay_a, agent, "export", str(bundle), *o)
        assert r.code == 0, r.stderr
        assert r.json["heads"] == 4 and r.json["file"] == str(bundle)
        assert bundle.stat().st_mode & 0o777 == 0o600
        raw = bundle.read_bytes()
        assert b"Dana" not in raw and b"Atlas" not in raw

        # the exported heads as they are: relay B's 900 s past-drift window refuses them
        async with relay_a.client(agent) as client:
            old = await client.query([{"kinds": [engram.KIND_ENGRAM], "authors": [agent.pubkey]}])
        async with relay_b.client(agent) as client:
            refused = await client.publish(old[0])
        assert not refused.accepted

        r = await buzz_mem(relay_b, agent, "import", str(bundle), *o)
        assert r.code == 0, r.stderr
        assert r.json == {
            "written": ["core", "mem/people/dana", "mem/projects/atlas"],
            "unchanged": [],
            "conflicts": [],
            "skipped": 0,
            # the tombstone of a slug never written here is reported, not silently dropped
            "tombstones_skipped": ["mem/old"],
            "exported_at": orjson.loads(raw)["exported_at"],
        }
        assert "1 tombstone" in r.stderr
        ls_a = (await buzz_mem(relay_a, agent, "ls", *o)).json
        ls_b = (await buzz_mem(relay_b, agent, "ls", *o)).json
        assert (
            [e["slug"] for e in ls_b]
            == [e["slug"] for e in ls_a]
            == ["mem/people/dana", "mem/projects/atlas"]
        )
        assert all(b["created_at"] > a["created_at"] for a, b in zip(ls_a, ls_b, strict=True))
        for slug in ("core", "mem/people/dana", "mem/projects/atlas"):
            got_a = await buzz_mem(relay_a, agent, "get", slug, *o)
            got_b = await buzz_mem(relay_b, owner, "get", slug, "--agent", agent.pubkey)
            assert got_b.stdout == got_a.stdout == str(values[slug]).encode()

        # a second import changes nothing; an entry changed on B since is left alone
        assert (await buzz_mem(relay_b, agent, "set", "people/dana", "changed on B", *o)).code == 0
        r = await buzz_mem(relay_b, agent, "import", str(bundle), *o)
        assert r.code == 0, r.stderr
        assert (r.json["written"], r.json["conflicts"]) == ([], ["mem/people/dana"])
        assert r.json["unchanged"] == ["core", "mem/projects/atlas"]
        assert r.json["tombstones_skipped"] == ["mem/old"]
        assert (await buzz_mem(relay_b, agent, "get", "people/dana", *o)).stdout == b"changed on B"

        # only the agent imports and exports; another agent's bundle and a tampered one fail
        r = await buzz_mem(relay_b, owner, "export", str(tmp_path / "x"), "--agent", agent.pubkey)
        r.expect_error(1, "user_error", "No such option")
        r = await buzz_mem(relay_b, carol, "import", str(bundle), *o)
        r.expect_error(1, "user_error", "invalid bundle")
        tampered = tmp_path / "tampered.bundle"
        obj = orjson.loads(raw)
        obj["exported_at"] += 1
        tampered.write_bytes(orjson.dumps(obj))
        r = await buzz_mem(relay_b, agent, "import", str(tampered), *o)
        r.expect_error(1, "user_error", "signature does not verify")
        r = await buzz_mem(relay_b, agent, "import", str(tmp_path / "missing"), *o)
        r.expect_error(1, "user_error", "cannot read")


async def test_export_refuses_an_existing_file_without_force(
    sqlite_relay: RunningRelay, tmp_path: Path, alice: Identity, bob: Identity
) -> None:
    """As `admin backup` does: an existing FILE is left alone unless --force (issue 24 item 8)."""
    agent, owner = alice, bob
    o = ("--owner", owner.pubkey)
    assert (await buzz_mem(sqlite_relay, agent, "set", "notes/a", "kept", *o)).code == 0
    (tmp_path / "out").mkdir()
    bundle = tmp_path / "out" / "memory.bundle"
    bundle.write_bytes(b"yesterday's bundle")
    r = await buzz_mem(sqlite_relay, agent, "export", str(bundle), *o)
    r.expect_error(1, "user_error", f"{bundle} already exists", "--force")
    assert bundle.read_bytes() == b"yesterday's bundle"

    r = await buzz_mem(sqlite_relay, agent, "export", str(bundle), "--force", *o)
    assert r.code == 0, r.stderr
    assert r.json["heads"] == 1 and orjson.loads(bundle.read_bytes())["exported_at"] == r.json["exported_at"]
    assert bundle.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in bundle.parent.iterdir()] == ["memory.bundle"]  # no temporary left
