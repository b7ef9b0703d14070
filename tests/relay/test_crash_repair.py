"""A crash between a channel change's commit and its relay-signed state (issue 9 item 5).

A real `buzz relay serve` process is killed with SIGKILL right after the commit (the test-only
`BUZZ_TEST_KILL_AFTER_COMMIT_KIND` hook, `buzz.relay.operator.crash_hook`); the restarted relay must
serve complete and current 39000–39003. A creator's repeated 9007 repairs the state too.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path

import pytest

from buzz.client import RelayClient
from buzz.client.relay_client import ConnectionLost
from buzz.core.channel_id import new_channel_id
from buzz.core.event import Event
from buzz.core.stored import verify_stored
from buzz.relay.operator import crash_hook
from buzz.store.base import Channel, CreateChannel, PutMember
from tests.operator.support import served
from tests.support.deadline import scaled
from tests.support.relay import Identity, relay_on
from tests.workspace.helpers import accepted, create_channel, put_user

STATE = (39000, 39001, 39002, 39003)


async def _state(client: RelayClient, channel_id: str) -> dict[int, Event]:
    events = await client.query([{"kinds": list(STATE), "#d": [channel_id]}])
    return {e.kind: e for e in events}


def _members(state: dict[int, Event]) -> set[str]:
    return {t[1] for t in state[39002].tags if t[0] == "p"}


async def _killed_by_hook(client: RelayClient, proc: asyncio.subprocess.Process, event: Event) -> None:
    """Publish `event`; the relay dies (SIGKILL) after committing it, before any answer."""
    with pytest.raises(ConnectionLost):
        await client.publish(event)
    assert await asyncio.wait_for(proc.wait(), scaled(20)) == -9


def _env(owner: Identity, crash_kind: int | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != crash_hook.ENV}
    env["RELAY_OWNER_PUBKEY"] = owner.pubkey
    if crash_kind is not None:
        env[crash_hook.ENV] = str(crash_kind)
    return env


async def test_kill_after_9007_commit_then_restart_serves_full_state(tmp_path: Path) -> None:
    owner = Identity.new()
    channel_id = new_channel_id()
    create = Event.create(owner.secret, 9007, "", [["h", channel_id], ["name", "crashy"]])
    async with served(tmp_path / "data", env=_env(owner, 9007)) as _served:
        proc, port = _served.proc, _served.port
        async with RelayClient(f"ws://127.0.0.1:{port}", owner.secret) as client:
            await _killed_by_hook(client, proc, create)
    async with served(tmp_path / "data", env=_env(owner, None)) as _served:
        _proc, port = _served.proc, _served.port
        async with RelayClient(f"ws://127.0.0.1:{port}", owner.secret) as client:
            assert [e.id for e in await client.query([{"ids": [create.id]}])] == [create.id]  # committed
            state = await _state(client, channel_id)
            assert sorted(state) == list(STATE)
            assert ["name", "crashy"] in [list(t) for t in state[39000].tags]
            assert _members(state) == {owner.pubkey}
            first = {kind: e.id for kind, e in state.items()}
            retry = await client.publish(create)
            assert (retry.accepted, retry.message) == (False, "duplicate: channel already exists")
    async with served(tmp_path / "data", env=_env(owner, None)) as _served:
        _proc, port = _served.proc, _served.port
        async with RelayClient(f"ws://127.0.0.1:{port}", owner.secret) as client:
            # A complete channel is left alone: no new versions on a clean restart or a retry.
            assert {kind: e.id for kind, e in (await _state(client, channel_id)).items()} == first


async def test_kill_after_9000_commit_then_restart_lists_the_new_member(tmp_path: Path) -> None:
    owner, bob = Identity.new(), Identity.new()
    async with served(tmp_path / "data", env=_env(owner, 9000)) as _served:
        proc, port = _served.proc, _served.port
        async with RelayClient(f"ws://127.0.0.1:{port}", owner.secret) as client:
            channel_id = await create_channel(client, owner, "private")
            assert _members(await _state(client, channel_id)) == {owner.pubkey}
            put = Event.create(owner.secret, 9000, "", [["h", channel_id], ["p", bob.pubkey]])
            await _killed_by_hook(client, proc, put)
    async with served(tmp_path / "data", env=_env(owner, None)) as _served:
        _proc, port = _served.proc, _served.port
        async with RelayClient(f"ws://127.0.0.1:{port}", owner.secret) as client:
            state = await _state(client, channel_id)
            assert sorted(state) == list(STATE)
            assert _members(state) == {owner.pubkey, bob.pubkey}
            # and the state keeps following later changes
            carol = Identity.new()
            await put_user(client, owner, channel_id, carol.pubkey)
            assert _members(await _state(client, channel_id)) == {owner.pubkey, bob.pubkey, carol.pubkey}


async def test_creators_repeated_9007_repairs_missing_state(tmp_path: Path) -> None:
    """The committed 9007 without follow-ups (what the crash leaves), then the creator retries."""
    owner, stranger = Identity.new(), Identity.new()
    async with relay_on(tmp_path, owner_pubkey=owner.pubkey) as running:
        channel_id = new_channel_id()
        create = Event.create(owner.secret, 9007, "", [["h", channel_id], ["name", "half"]])
        row = Channel(channel_id, "half", "open", owner.pubkey, create.created_at)
        stored = verify_stored(create).with_channel(channel_id)
        await running.relay.store.insert(
            stored, [CreateChannel(row), PutMember(channel_id, owner.pubkey, "owner")]
        )
        await running.relay.store.put_relay_member(stranger.pubkey, "member")  # type: ignore[attr-defined]
        async with running.client(stranger) as other:
            assert await _state(other, channel_id) == {}
            again = Event.create(stranger.secret, 9007, "", [["h", channel_id], ["name", "mine"]])
            refused = await other.publish(again)
            assert (refused.accepted, refused.message) == (False, "duplicate: channel already exists")
            assert await _state(other, channel_id) == {}  # only the creator's retry repairs
        async with running.client(owner) as client:
            retry = await client.publish(create)
            assert (retry.accepted, retry.message) == (False, "duplicate: channel already exists")
            state = await _state(client, channel_id)
            assert sorted(state) == list(STATE)
            assert _members(state) == {owner.pubkey}
            await accepted(client, Event.create(owner.secret, 9, "hello", [["h", channel_id]]))


async def test_kill_9_during_a_burst_of_channel_creations(tmp_path: Path) -> None:
    """An outside `kill -9` while 60 9007s are in flight on six connections: every channel
    that was committed comes back with its whole state, wherever the kill landed. (An invariant
    check; the hook tests above are the deterministic regression tests.)"""
    owner = Identity.new()
    creates = [
        Event.create(owner.secret, 9007, "", [["h", new_channel_id()], ["name", f"burst{i}"]])
        for i in range(60)
    ]
    async with served(tmp_path / "data", env=_env(owner, None)) as _served:
        proc, port = _served.proc, _served.port
        clients = [RelayClient(f"ws://127.0.0.1:{port}", owner.secret) for _ in range(6)]
        for client in clients:
            await client.connect()
        try:
            pending = [asyncio.create_task(clients[i % 6].publish(e)) for i, e in enumerate(creates)]
            for done, next_done in enumerate(asyncio.as_completed(pending), 1):
                with contextlib.suppress(Exception):
                    await next_done
                if done == 12:  # a fifth of the OKs in: kill -9 from outside
                    proc.kill()
                    break
            results = await asyncio.gather(*pending, return_exceptions=True)
            assert await proc.wait() == -9
        finally:
            for client in clients:
                await client.close()
    acknowledged = {r.event_id for r in results if not isinstance(r, BaseException) and r.accepted}
    assert acknowledged and len(acknowledged) < len(creates)  # the kill landed mid-burst
    async with served(tmp_path / "data", env=_env(owner, None)) as _served:
        _proc, port = _served.proc, _served.port
        async with RelayClient(f"ws://127.0.0.1:{port}", owner.secret) as client:
            committed = await client.query([{"kinds": [9007], "authors": [owner.pubkey]}])
            assert acknowledged <= {e.id for e in committed}  # nothing acknowledged is lost
            for event in committed:
                channel_id = event.first_tag("h")
                assert channel_id is not None
                state = await _state(client, channel_id)
                assert sorted(state) == list(STATE), (channel_id, sorted(state))
                assert _members(state) == {owner.pubkey}
