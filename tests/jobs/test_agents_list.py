"""`buzz agents list` (jobs spec §13.1, §13.2; checklist item 59): the real executable against a
real relay, with a real harness (the rules agent as its ACP subprocess) turning in a private
`#eng`. A member of `#eng` sees the agent "working in #eng" on the request, with its owner and
whom it answers; a viewer who cannot read `#eng` sees the agent (it is in `#general` with them)
but nothing of `#eng`; a snapshot whose `updatedAt` is over 600 s old is not "working"."""

from __future__ import annotations

import json
import time
from pathlib import Path

import orjson
import pytest

from buzz.core.event import Event
from buzz.jobs import work_status
from tests.agent.support import Workspace, add_member, create_channel, publish, set_profile, workspace
from tests.cli.helpers import buzz
from tests.support.relay import Identity, RunningRelay


async def _listed(ws: Workspace, who: Identity, *args: str) -> dict:
    result = await buzz(ws.relay.url, who, "agents", "list", *args)
    assert result.code == 0, result.error
    (row,) = [r for r in result.json["agents"] if r["pubkey"] == ws.agent.pubkey]
    return row


async def test_directory_shows_status_only_to_readers(
    sqlite_relay: RunningRelay,
    alice: Identity,
    bob: Identity,
    carol: Identity,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    agent = Identity.new()
    async with workspace(sqlite_relay, alice, agent, tmp_path, monkeypatch) as ws:
        oc = ws.owner_client
        eng = await create_channel(oc, alice, "eng", "private")
        old = await create_channel(oc, alice, "old", "private")
        for channel in (eng, old):
            await add_member(oc, alice, channel, agent.pubkey, "bot")
            await add_member(oc, alice, channel, carol.pubkey)
        await add_member(oc, alice, ws.channel, bob.pubkey)  # bob reads #general only
        async with sqlite_relay.client(carol) as cc:
            await set_profile(cc, carol, "Carol")
        # #old: a `working` snapshot nobody refreshed for 601 s (the harness does not serve #old)
        stale = work_status.snapshot(old, "working", now=time.time() - 601)
        async with sqlite_relay.client(agent, auth_tags=[ws.auth_tag]) as ac:
            await publish(ac, Event.create(agent.secret, stale.kind, stale.content, stale.tags))
        await ws.watch(eng)
        async with ws.harness(channels=f"{ws.channel},{eng}"):
            await ws.post(alice, "@Rulesbot sleep 60", mention=agent.pubkey, channel=eng)
            await ws.watcher.wait_for(
                lambda e: (
                    e.kind == 30181
                    and e.tag_values("h") == [eng]
                    and orjson.loads(e.content)["status"] == "working"
                ),
                what="working in #eng",
            )
            member = await _listed(ws, carol)
            outsider_result = await buzz(ws.relay.url, bob, "agents", "list")
            stale_only = await _listed(ws, carol, "--channel", old)
            refused = await buzz(ws.relay.url, bob, "agents", "list", "--channel", eng)
            await ws.post(alice, "@Rulesbot !cancel", mention=agent.pubkey, channel=eng)

    assert (
        member["owner"] == alice.pubkey and member["owner_name"] == "Olivia" and member["name"] == "Rulesbot"
    )
    assert member["respond_to"] == "owner-only"  # no 30177: what the harness reports
    assert member["presence"] == "online"
    assert member["status"] == {
        "state": "working",
        "channels": [{"id": eng, "name": "eng", "working_on": "sleep 60"}],  # not the stale #old
        "queued": 0,
    }
    # bob cannot read #eng or #old: he sees the agent, idle, and nothing of those channels
    assert outsider_result.code == 0
    (outsider,) = [r for r in outsider_result.json["agents"] if r["pubkey"] == agent.pubkey]
    assert outsider["status"] == {"state": "idle", "channels": [], "queued": 0}
    text = json.dumps(outsider_result.json)
    assert eng not in text and old not in text and "sleep 60" not in text
    # more than 600 s without refresh: not working
    assert stale_only["status"] == {"state": "idle", "channels": [], "queued": 0}
    assert refused.code == 1 and "channel not found" in refused.error["message"]


async def test_owner_policy_and_own_agents(
    sqlite_relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    """The owner's 30177 gives persona, respond-to, allowlist and parallelism; one by someone
    else is ignored; the owner sees its own agent though it is in no channel of theirs."""
    from buzz.core.nip_oa import build_auth_tag

    agent = Identity.new()
    tag = build_auth_tag(alice.secret, agent.pubkey)
    async with sqlite_relay.client(agent, auth_tags=[tag]) as c:
        await publish(c, Event.create(agent.secret, 0, json.dumps({"name": "helper"}), [tag]))
    url = sqlite_relay.url
    assert (
        await buzz(url, alice, "agents", "personas", "set", "--slug", "rev", "--display-name", "Reviewer")
    ).code == 0
    set_ = await buzz(url, alice, "agents", "managed", "set", "--agent", agent.pubkey, "--respond-to", "allowlist",
                      "--allowlist", bob.pubkey, "--parallelism", "3", "--persona", "rev")  # fmt: skip
    assert set_.code == 0, set_.error
    forged = {"respond_to": "anyone", "parallelism": 9}
    async with sqlite_relay.client(bob) as bc:
        await publish(bc, Event.create(bob.secret, 30177, json.dumps(forged), [["d", agent.pubkey]]))
    result = await buzz(url, alice, "agents", "list")
    assert result.code == 0, result.error
    (row,) = result.json["agents"]
    assert (row["pubkey"], row["owner"], row["name"]) == (agent.pubkey, alice.pubkey, "helper")
    assert (row["persona"], row["persona_name"]) == ("rev", "Reviewer")
    assert (row["respond_to"], row["respond_to_allowlist"], row["parallelism"]) == (
        "allowlist",
        [bob.pubkey],
        3,
    )
    assert row["presence"] == "offline" and row["status"] == {"state": "offline", "channels": [], "queued": 0}
    assert (await buzz(url, bob, "agents", "list")).json == {"agents": []}  # not in bob's channels
