"""Agent work status 30181 at the relay (jobs spec §12.2, checklist item 57): a real relay over
WebSocket; channel-scoped, `d` equal to `h`, the content rules, one live snapshot per agent and
channel, and invisible to whoever cannot read the channel (the gate matrix,
tests/workspace/test_gates_matrix.py, covers every read path)."""

from __future__ import annotations

import json
import time

from buzz.core.event import Event
from buzz.jobs import work_status
from buzz.jobs.limits import WORK_STATUS_MAX_BYTES
from tests.support.relay import Identity, RunningRelay
from tests.workspace.helpers import accepted, create_channel, ids, put_user, refused

D_REFUSAL = "invalid: agent work status d tag must equal its h tag"


def _body(status: str = "working", **over: object) -> str:
    body = {"v": 1, "source": "buzz-agent-harness", "status": status, "updatedAt": "2026-01-01T00:00:00Z"}
    body["activity"] = []
    body.update(over)
    return json.dumps(body)


def _status(who: Identity, tags: list[list[str]], content: str, at: int | None = None) -> Event:
    return Event.create(who.secret, 30181, content, tags, created_at=at)


async def test_snapshot_rules_and_replacement(sqlite_relay: RunningRelay) -> None:
    owner, agent, stranger = Identity.new(), Identity.new(), Identity.new()
    async with (
        sqlite_relay.client(owner) as oc,
        sqlite_relay.client(agent) as ac,
        sqlite_relay.client(stranger) as sc,
    ):
        channel = await create_channel(oc, owner, "open")
        other = await create_channel(oc, owner, "private", name="other")
        await put_user(oc, owner, channel, agent.pubkey)
        h, d = ["h", channel], ["d", channel]

        template = work_status.snapshot(channel, "working", now=time.time(), queued=2)
        now = int(time.time())
        first = _status(agent, [list(t) for t in template.tags], template.content, now - 1)
        await accepted(ac, first)
        later = _status(agent, [h, d], _body("idle", queued=0), now)
        await accepted(ac, later)
        got = await ids(oc, {"kinds": [30181], "authors": [agent.pubkey], "#h": [channel]})
        assert got == {later.id}  # addressable: one live snapshot per agent and channel

        await refused(sqlite_relay, ac, _status(agent, [h, ["d", other]], _body()), D_REFUSAL)
        await refused(sqlite_relay, ac, _status(agent, [h], _body()), D_REFUSAL)
        await refused(sqlite_relay, ac, _status(agent, [h, d, d], _body()), D_REFUSAL)
        await refused(sqlite_relay, ac, _status(agent, [h, ["d"]], _body()), D_REFUSAL)
        await refused(
            sqlite_relay,
            ac,
            _status(agent, [d], _body()),
            "invalid: channel-scoped events must include an h tag",
        )
        await refused(
            sqlite_relay, ac, _status(agent, [h, d], _body(v=2)), "invalid: agent work status: v must be 1"
        )
        await refused(
            sqlite_relay,
            ac,
            _status(agent, [h, d], _body("busy")),
            "invalid: agent work status: status must be one of working, complete, error, idle",
        )
        await refused(
            sqlite_relay,
            ac,
            _status(agent, [h, d], "[1]"),
            "invalid: agent work status: content must be a JSON object",
        )
        pad = WORK_STATUS_MAX_BYTES - len(_body(pad=""))
        at_cap = _body(pad="x" * pad)
        assert len(at_cap.encode()) == WORK_STATUS_MAX_BYTES
        await accepted(ac, _status(agent, [h, d], at_cap, now + 1))
        over = _body(pad="x" * (pad + 1))
        await refused(
            sqlite_relay,
            ac,
            _status(agent, [h, d], over, now + 2),
            f"invalid: agent work status: content too large ({WORK_STATUS_MAX_BYTES + 1} bytes, "
            f"max {WORK_STATUS_MAX_BYTES})",
        )
        # The write gate of the channel: a non-member may not say what it does in a private one.
        await refused(
            sqlite_relay,
            sc,
            _status(stranger, [["h", other], ["d", other]], _body()),
            "restricted: not a channel member",
        )


async def test_private_channel_snapshot_is_the_members_only(sqlite_relay: RunningRelay) -> None:
    owner, agent, outsider = Identity.new(), Identity.new(), Identity.new()
    async with (
        sqlite_relay.client(owner) as oc,
        sqlite_relay.client(agent) as ac,
        sqlite_relay.client(outsider) as xc,
    ):
        channel = await create_channel(oc, owner, "private")
        await put_user(oc, owner, channel, agent.pubkey)
        event = _status(agent, [["h", channel], ["d", channel]], _body())
        await accepted(ac, event)
        assert await ids(oc, {"kinds": [30181], "authors": [agent.pubkey]}) == {event.id}
        assert await ids(xc, {"kinds": [30181], "authors": [agent.pubkey]}) == set()
        assert await ids(xc, {"ids": [event.id]}) == set()
