"""The operator log of a real relay process (issue 10 item 4): one line per connection open and
close, per refused EVENT/REQ, per admin action; JSON on request; never content or secret keys."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import aiohttp
import pytest

from buzz.client import RelayClient, RelayError
from buzz.core import nip19
from buzz.core.channel_id import new_channel_id
from buzz.core.event import Event
from tests.operator.support import json_lines, lines_with, served
from tests.support.deadline import scaled
from tests.support.relay import Identity

SECRET_CONTENT = "operator-log-canary-accepted-7f3a"
REFUSED_CONTENT = "operator-log-canary-refused-91c2"


async def _traffic(url: str, alice: Identity, bob: Identity) -> dict[str, str]:
    """Accepted and refused events and REQs; returns the ids the log should name."""
    async with RelayClient(url, alice.secret) as a, RelayClient(url, bob.secret) as b:
        private = new_channel_id()
        create = Event.create(
            alice.secret, 9007, "", [["h", private], ["name", "ops"], ["visibility", "private"]]
        )
        assert (await a.publish(create)).accepted
        posted = Event.create(alice.secret, 9, SECRET_CONTENT, [["h", private]])
        assert (await a.publish(posted)).accepted
        refused = Event.create(bob.secret, 9, REFUSED_CONTENT, [["h", private]])
        answer = await b.publish(refused)
        assert not answer.accepted and answer.message.startswith("restricted:")
        sub = await b.subscribe([{"kinds": [9], "#h": [private]}])
        await asyncio.wait_for(_closed(sub), scaled(5))  # bob is not a member: CLOSED restricted
        put = Event.create(alice.secret, 9000, "", [["h", private], ["p", bob.pubkey]])
        assert (await a.publish(put)).accepted
    async with RelayClient(url) as stranger:  # no key: never authenticates
        sub = await stranger.subscribe([{"kinds": [1]}])
        await asyncio.wait_for(_closed(sub), scaled(5))
    return {"create": create.id, "posted": posted.id, "refused": refused.id, "put": put.id}


async def _closed(sub) -> None:
    while sub.closed_reason is None:
        await asyncio.sleep(0.02)


@pytest.mark.parametrize("fmt", ["text", "json"])
async def test_log_lines_name_connections_refusals_and_admin_actions_but_no_secrets(
    tmp_path: Path, fmt: str
) -> None:
    alice, bob = Identity.new(), Identity.new()
    data = tmp_path / "data"
    async with served(data, "--log-format", fmt) as relay:
        ids = await _traffic(relay.url, alice, bob)
        assert await relay.stop() == 0
        log = relay.log_text()
    relay_secret = (data / "relay.key").read_text().strip()
    for secret in (alice.secret, bob.secret, relay_secret):
        assert secret not in log and nip19.nsec(secret) not in log
    assert SECRET_CONTENT not in log and REFUSED_CONTENT not in log

    if fmt == "json":
        records = json_lines(log)  # every line is one JSON object
        events = [r for r in records if "event" in r]
        opened = [r for r in events if r["event"] == "connection opened"]
        closed = [r for r in events if r["event"] == "connection closed"]
        assert len(opened) == 3 and len(closed) == 3
        assert {r["pubkey"] for r in closed} == {alice.pubkey, bob.pubkey, "-"}
        assert all(r["remote"] == "127.0.0.1" and r["duration_s"] >= 0 and r["reason"] for r in closed)
        assert all(r["duration_s"] == round(r["duration_s"], 3) for r in closed)  # to the millisecond
        refused = [r for r in events if r["event"] == "event refused"]
        assert [(r["id"], r["kind"], r["author"]) for r in refused] == [(ids["refused"], 9, bob.pubkey)]
        assert refused[0]["reason"].startswith("restricted:")
        requests = [r for r in events if r["event"] == "request refused"]
        assert {r["reason"].split(":")[0] for r in requests} == {"restricted", "auth-required"}
        assert all(r["conn"] for r in refused + requests)  # lines name their connection
        admin = [r for r in events if r["event"] == "admin action"]
        assert [(r["id"], r["kind"], r["by"]) for r in admin] == [
            (ids["create"], 9007, alice.pubkey),
            (ids["put"], 9000, alice.pubkey),
        ]
        assert ids["posted"] not in log  # accepted non-admin events are not logged
    else:
        assert len(lines_with(log, "connection opened", "remote=127.0.0.1")) == 3
        assert lines_with(log, "connection closed", f"pubkey={alice.pubkey}", "duration_s=", "reason=")
        assert lines_with(log, "event refused", f"id={ids['refused']}", "kind=9", 'reason="restricted:')
        assert lines_with(log, "request refused", "verb=REQ", 'reason="auth-required:')
        assert lines_with(log, "admin action", f"id={ids['put']}", "kind=9000", 'action="put user"')


async def test_the_relay_closing_a_connection_is_logged_with_its_reason(tmp_path: Path) -> None:
    """A client that never authenticates is closed by the relay after the AUTH timeout (5 s)."""
    async with served(tmp_path / "data") as relay:
        async with aiohttp.ClientSession() as s, s.ws_connect(relay.url) as ws:
            msg = await ws.receive(timeout=15)  # the AUTH challenge
            while msg.type == aiohttp.WSMsgType.TEXT:
                msg = await ws.receive(timeout=15)
        await relay.stop()
    assert lines_with(
        relay.log_text(), "connection closed", "pubkey=-", 'reason="auth-required: authentication timeout"'
    )


async def test_a_banned_auth_is_logged_as_refused(tmp_path: Path) -> None:
    from tests.operator.support import admin

    data, mallory = tmp_path / "data", Identity.new()
    async with served(data) as relay:
        admin(data, "ban", nip19.npub(mallory.pubkey))
        with pytest.raises(RelayError):
            async with RelayClient(relay.url, mallory.secret):
                pass
        await relay.stop()
    log = relay.log_text()
    assert lines_with(log, "auth refused", f"pubkey={mallory.pubkey}", 'reason="blocked:')
    assert lines_with(log, "connection closed", "reason=blocked")


async def test_failed_nip42_and_nip98_authentications_are_logged(tmp_path: Path) -> None:
    from buzz.core.nip42 import build_auth_event

    who = Identity.new()
    async with served(tmp_path / "data") as relay:
        async with aiohttp.ClientSession() as s:
            async with s.ws_connect(relay.url) as ws:
                await ws.receive_json(timeout=5)  # the challenge, answered with another one
                await ws.send_json(["AUTH", build_auth_event(who.secret, "0" * 64, relay.url).to_dict()])
                answer = await ws.receive_json(timeout=5)
                assert answer[2] is False and answer[3] == "auth-required: verification failed"
            body = b'{"kinds": [1]}'
            async with s.post(
                relay.http_url + "/query", data=body, headers={"Authorization": "Nostr bm9wZQ=="}
            ) as r:
                assert r.status == 401
        await relay.stop()
    log = relay.log_text()
    assert lines_with(
        log, "auth refused", f"pubkey={who.pubkey}", 'reason="auth-required: verification failed"'
    )
    assert lines_with(log, "auth refused", "pubkey=?", 'reason="NIP-98:')


async def test_an_oversized_frame_is_logged_with_the_relays_own_limit(tmp_path: Path) -> None:
    """The 1009 close names the frame's size and BUZZ_MAX_FRAME_BYTES, not aiohttp's reader
    limit (one byte more), and is the relay's close, not a lost connection."""
    from buzz.core.limits import MAX_FRAME_BYTES

    size = MAX_FRAME_BYTES + 1000
    async with served(tmp_path / "data") as relay:
        async with aiohttp.ClientSession() as s, s.ws_connect(relay.url) as ws:
            await ws.receive_json(timeout=5)  # the AUTH challenge
            await ws.send_str("[" + " " * (size - 2) + "]")
            notice = await ws.receive_json(timeout=5)
            assert notice == ["NOTICE", f"error: frame too large ({size} > {MAX_FRAME_BYTES} bytes)"]
            closing = await ws.receive(timeout=5)
            assert closing.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED), closing
            assert ws.close_code == 1009
        assert await relay.stop() == 0
    log = relay.log_text()
    assert lines_with(
        log, "connection closed", "pubkey=-", f'reason="frame too large ({size} > {MAX_FRAME_BYTES} bytes)"'
    ), log
    assert str(MAX_FRAME_BYTES + 1) not in log, log


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
async def test_a_signal_logs_the_shutdown_before_and_after_the_closes(
    tmp_path: Path, sig: signal.Signals
) -> None:
    """`relay stopping` names the signal and what is open (one Nostr connection, one huddle
    seat), the sockets' closes follow, and `relay stopped` ends the log."""
    from tests.huddle.support import ChannelSpec, join, make_channel
    from tests.support.relay import RunningRelay

    alice = Identity.new()
    async with served(tmp_path / "data") as relay:
        running = RunningRelay(None, relay.url)  # type: ignore[arg-type]  # a process: no Relay object
        cid = await make_channel(running, ChannelSpec(alice))
        async with RelayClient(relay.url, alice.secret):
            seat = await join(running, alice, cid)
            assert seat.joined is not None and seat.joined["type"] == "joined", seat.joined
            relay.proc.send_signal(sig)
            await seat.expect_close(20)
            assert seat.close_frame == (1001, "relay shutting down"), seat.close_frame
            assert await asyncio.wait_for(relay.proc.wait(), scaled(20)) == 0
            await seat.close()
    log = relay.log_text()
    lines = log.splitlines()
    stopping = lines_with(
        log, f"relay stopping signal={sig.name} connections=1 huddle_sockets=1 huddles=close"
    )
    closed = lines_with(log, "connection closed", f"pubkey={alice.pubkey}", 'reason="relay shutting down"')
    assert len(stopping) == 1 and len(closed) == 1, log
    assert "relay stopped duration_s=" in lines[-1], log
    assert lines.index(stopping[0]) < lines.index(closed[0]) < len(lines) - 1, log
