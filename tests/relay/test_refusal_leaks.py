"""Refusals keep nothing alive (issue 9 item 1).

A module-level exception instance raised again and again grows its `__traceback__` with
every raise, and each frame on it keeps its locals (the event, the filters, the connection).
Two guards: no module of buzz holds an exception instance, and each refusal path, run a
thousand times against a real relay, leaves traced memory flat.
"""

from __future__ import annotations

import gc
import importlib
import pkgutil
import tracemalloc
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import aiohttp
import orjson
import pytest

import buzz
from buzz.core.event import Event
from buzz.core.nip42 import build_auth_event
from tests.support.relay import Identity, RunningRelay, relay_on

ROUNDS = 1000
WARMUP = 50
PAD = "p" * 20_000  # per refusal: a leak of the frame locals is ≥ 20 MB over the rounds
TAGS = [f"{i:03d}" + "t" * 97 for i in range(200)]  # a ~20 KB filter
MAX_GROWTH = 3 << 20  # bytes of traced memory the rounds may add (caches, counters)


def _modules() -> Iterator[object]:
    for info in pkgutil.walk_packages(buzz.__path__, "buzz."):
        yield importlib.import_module(info.name)  # every dependency is in pyproject.toml


def _exception_instances(value: object, depth: int = 0) -> Iterator[BaseException]:
    if isinstance(value, BaseException):
        yield value
    elif depth < 2 and isinstance(value, dict):
        for v in value.values():
            yield from _exception_instances(v, depth + 1)
    elif depth < 2 and isinstance(value, list | tuple | set | frozenset):
        for v in value:
            yield from _exception_instances(v, depth + 1)


def test_no_module_holds_an_exception_instance() -> None:
    """Refusals are `Refusal` values (buzz.core.errors): `raise X()` builds a fresh one."""
    found = []
    for module in _modules():
        for name, value in vars(module).items():
            if isinstance(value, type) and value.__module__ == module.__name__:
                holders = vars(value).items()
                found += [
                    f"{module.__name__}.{name}.{a}" for a, v in holders if list(_exception_instances(v))
                ]
            elif list(_exception_instances(value)):
                found.append(f"{module.__name__}.{name}")
    assert found == []


# -- refusal paths against a real relay --------------------------------------------------------
async def _answer(ws: aiohttp.ClientWebSocketResponse) -> list:
    return orjson.loads((await ws.receive(10)).data)


async def _authed(session: aiohttp.ClientSession, url: str, who: Identity) -> aiohttp.ClientWebSocketResponse:
    ws = await session.ws_connect(url, max_msg_size=0)
    challenge = (await _answer(ws))[1]
    await ws.send_str(orjson.dumps(["AUTH", build_auth_event(who.secret, challenge, url).to_dict()]).decode())
    assert (await _answer(ws))[2] is True
    return ws


Round = Callable[[], Awaitable[list]]


async def _measure(one_round: Round) -> int:
    """Traced bytes added by ROUNDS refusals after WARMUP ones; each must be refused."""
    for _ in range(WARMUP):
        await one_round()
    gc.collect()
    before = tracemalloc.get_traced_memory()[0]
    for _ in range(ROUNDS):
        answer = await one_round()
        assert answer[0] in ("OK", "CLOSED") and answer[-1] != "" and answer[-2] is not True, answer
    gc.collect()
    return tracemalloc.get_traced_memory()[0] - before


def _paths(running: RunningRelay, s: aiohttp.ClientSession, alice: Identity, who_ws, stranger_ws):
    url = running.url

    async def unauthenticated_event() -> list:
        event = Event.create(alice.secret, 1, PAD)
        await stranger_ws.send_str(orjson.dumps(["EVENT", event.to_dict()]).decode())
        return await _answer(stranger_ws)

    async def req_unknown_channel() -> list:
        await who_ws.send_str(orjson.dumps(["REQ", "s", {"#h": [str(uuid.uuid4())], "#t": TAGS}]).decode())
        return await _answer(who_ws)

    async def count_unknown_channel() -> list:
        await who_ws.send_str(orjson.dumps(["COUNT", "c", {"#h": [str(uuid.uuid4())], "#t": TAGS}]).decode())
        return await _answer(who_ws)

    async def mixed_search() -> list:
        await who_ws.send_str(
            orjson.dumps(["REQ", "m", {"search": "a", "#t": TAGS}, {"kinds": [1]}]).decode()
        )
        return await _answer(who_ws)

    async def event_to_unknown_channel() -> list:
        event = Event.create(alice.secret, 9, PAD, [["h", str(uuid.uuid4())]])
        await who_ws.send_str(orjson.dumps(["EVENT", event.to_dict()]).decode())
        return await _answer(who_ws)

    async def failed_auth() -> list:
        async with s.ws_connect(url) as ws:
            await _answer(ws)
            bad = build_auth_event(alice.secret, "0" * 64, url)  # the wrong challenge
            await ws.send_str(orjson.dumps(["AUTH", bad.to_dict()]).decode())
            return await _answer(ws)

    return {
        "unauthenticated EVENT": unauthenticated_event,
        "REQ naming an unknown channel": req_unknown_channel,
        "COUNT naming an unknown channel": count_unknown_channel,
        "mixed search REQ": mixed_search,
        "EVENT to an unknown channel": event_to_unknown_channel,
        "failed AUTH": failed_auth,
    }


@pytest.fixture
def traced() -> Iterator[None]:
    tracemalloc.start()
    try:
        yield
    finally:
        tracemalloc.stop()


async def test_each_refusal_path_a_thousand_times_keeps_memory_flat(
    tmp_path: Path, alice: Identity, traced: None
) -> None:
    async with relay_on(tmp_path, auth_timeout_s=600) as running, aiohttp.ClientSession() as s:
        who_ws = await _authed(s, running.url, alice)
        stranger_ws = await s.ws_connect(running.url, max_msg_size=0)
        await _answer(stranger_ws)  # challenge, never answered
        growth = {}
        for name, one_round in _paths(running, s, alice, who_ws, stranger_ws).items():
            growth[name] = await _measure(one_round)
        await who_ws.close()
        await stranger_ws.close()
    assert {k: v for k, v in growth.items() if v > MAX_GROWTH} == {}, growth
