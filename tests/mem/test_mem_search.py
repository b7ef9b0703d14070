"""`buzz mem search` (issue 16 item 1) against a real relay: ranked by meaning for the agent and
its owner, nothing for a third key, the encrypted cache reused and refreshed, errors as JSON."""

from __future__ import annotations

from pathlib import Path

from tests.mem.cli import buzz_mem
from tests.support.relay import Identity, RunningRelay

NOTES = {
    "people/dana": "Dana prefers async reviews over meetings",
    "people/omar": "Omar is allergic to peanuts",
    "projects/atlas": "The Q3 budget for project Atlas is 40,000 euros",
}


async def _seed(relay: RunningRelay, agent: Identity, owner: Identity) -> None:
    for slug, value in NOTES.items():
        r = await buzz_mem(relay, agent, "set", slug, value, "--owner", owner.pubkey)
        assert r.code == 0, r.stderr


async def test_agent_and_owner_find_by_meaning(
    sqlite_relay: RunningRelay, alice: Identity, bob: Identity, carol: Identity, tmp_path: Path
) -> None:
    relay, agent, owner = sqlite_relay, alice, bob
    env = {"XDG_CACHE_HOME": str(tmp_path)}
    await _seed(relay, agent, owner)
    query = "what food should Omar avoid?"
    r = await buzz_mem(relay, agent, "search", query, "--owner", owner.pubkey, env=env)
    assert r.code == 0, r.stderr
    results = r.json["results"]
    assert results[0]["slug"] == "mem/people/omar"
    assert {x["slug"] for x in results} == {f"mem/{slug}" for slug in NOTES}
    assert results[0]["snippet"] == NOTES["people/omar"]
    assert results[0]["score"] > results[1]["score"]

    mine = list((tmp_path / "buzz" / "recall").glob("*.bin"))
    assert len(mine) == 1 and b"Omar" not in mine[0].read_bytes()

    r = await buzz_mem(
        relay,
        owner,
        "search",
        "how does Dana like feedback?",
        "--agent",
        agent.pubkey,
        "--limit",
        "1",
        env=env,
    )
    assert r.code == 0, r.stderr
    assert [x["slug"] for x in r.json["results"]] == ["mem/people/dana"]
    assert len(list((tmp_path / "buzz" / "recall").glob("*.bin"))) == 2  # one file per reader

    r = await buzz_mem(relay, carol, "search", query, "--agent", agent.pubkey, env=env)
    assert (r.code, r.json) == (0, {"results": []})


async def test_a_changed_head_is_searched_with_its_new_text(
    sqlite_relay: RunningRelay, alice: Identity, bob: Identity, tmp_path: Path
) -> None:
    relay, agent, owner = sqlite_relay, alice, bob
    env = {"XDG_CACHE_HOME": str(tmp_path)}
    o = ("--owner", owner.pubkey)
    await _seed(relay, agent, owner)
    first = await buzz_mem(relay, agent, "search", "how much money can Atlas spend?", *o, env=env)
    assert first.json["results"][0]["slug"] == "mem/projects/atlas"
    assert (await buzz_mem(relay, agent, "set", "projects/atlas", "Atlas was cancelled in May", *o)).code == 0
    assert (await buzz_mem(relay, agent, "rm", "people/omar", *o)).code == 0
    r = await buzz_mem(relay, agent, "search", "is Atlas still going ahead?", *o, env=env)
    results = r.json["results"]
    assert results[0]["slug"] == "mem/projects/atlas"
    assert {x["slug"] for x in results} == {"mem/projects/atlas", "mem/people/dana"}  # tombstone gone
    assert results[0]["snippet"] == "Atlas was cancelled in May"


async def test_bad_arguments_are_json_errors(
    sqlite_relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    o = ("--owner", bob.pubkey)
    (await buzz_mem(sqlite_relay, alice, "search", "   ", *o)).expect_error(
        1, "user_error", "search text is empty"
    )
    # bytes that are not UTF-8 (they reach argv as lone surrogates) are the user's error, not ours
    (await buzz_mem(sqlite_relay, alice, "search", "ok \udce9", *o)).expect_error(
        1, "user_error", "search text is not valid UTF-8"
    )
    (await buzz_mem(sqlite_relay, alice, "search", "x", "--limit", "0", *o)).expect_error(
        1, "user_error", "--limit"
    )
    (await buzz_mem(sqlite_relay, alice, "search", "x", *o, "--agent", bob.pubkey)).expect_error(
        1, "user_error", "mutually exclusive"
    )
