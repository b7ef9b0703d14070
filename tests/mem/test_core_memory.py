"""Core-memory injection for new agent sessions (engram.md §13.3–§13.5; checklist 24):
Found, ConfirmedEmpty (the onboarding nudge) and Failure (nothing) against real relays."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from buzz.agent.core_memory import (
    CORE_MEMORY_TAG,
    LEGACY_CORE_LABEL,
    ONBOARDING_NUDGE,
    fetch_core_memory,
    normalize_semantic_section,
    semantic_section,
)
from buzz.core import engram
from buzz.core.engram import CoreState
from buzz.core.event import Event
from buzz.core.nip_oa import build_auth_tag
from tests.engram import vectors
from tests.support.relay import Identity, RunningRelay, relay_on


async def _publish(relay: RunningRelay, agent: Identity, event: Event) -> None:
    async with relay.client(agent) as c:
        result = await c.publish(event)
        assert (result.accepted, result.message) == (True, "")


def _core(agent: Identity, owner: Identity, profile: str) -> Event:
    return engram.build_event(agent.secret, owner.pubkey, engram.CoreBody(profile), int(time.time()))


async def test_found_renders_the_profile_verbatim(
    relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    profile = "I am Ada.\n  Rules: be kind. [[mem/notes]]\n"
    await _publish(relay, alice, _core(alice, bob, profile))
    got = await fetch_core_memory(alice.secret, bob.pubkey, relay_url=relay.url)
    assert got.state is CoreState.FOUND
    assert got.section == f"<core-memory>\n{profile}\n</core-memory>"


async def test_found_empty_profile(sqlite_relay: RunningRelay, alice: Identity, bob: Identity) -> None:
    await _publish(sqlite_relay, alice, _core(alice, bob, ""))
    got = await fetch_core_memory(alice.secret, bob.pubkey, relay_url=sqlite_relay.url)
    assert (got.state, got.section) == (CoreState.FOUND, "<core-memory>\n\n</core-memory>")


async def test_confirmed_empty_gives_the_nudge(relay: RunningRelay, alice: Identity, bob: Identity) -> None:
    # Memory of another pair and other slugs of this pair do not count as core.
    await _publish(relay, alice, _core(alice, Identity.new(), "someone else's core"))
    await _publish(
        relay,
        alice,
        engram.build_event(alice.secret, bob.pubkey, engram.MemoryBody("mem/x", "v"), int(time.time())),
    )
    got = await fetch_core_memory(alice.secret, bob.pubkey, relay_url=relay.url)
    assert got.state is CoreState.CONFIRMED_EMPTY
    assert got.section == f"<core-memory>\n{ONBOARDING_NUDGE}\n</core-memory>"
    for phrase in (
        "No core memory exists yet",
        'buzz mem set core "…"',
        "identity, rules",
        "goals",
        "Ask your user",
    ):
        assert phrase in ONBOARDING_NUDGE


async def test_uses_an_existing_connection(
    sqlite_relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    await _publish(sqlite_relay, alice, _core(alice, bob, "via the harness connection"))
    tag = build_auth_tag(bob.secret, alice.pubkey)
    async with sqlite_relay.client(alice, auth_tags=[tag]) as c:
        got = await fetch_core_memory(alice.secret, tag[1], client=c)
    assert got.section == "<core-memory>\nvia the harness connection\n</core-memory>"


async def test_undecryptable_candidates_are_a_failure(
    sqlite_relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    """A core-addressed event this pair cannot open: AllInvalid, which injection treats as Failure."""
    key = engram.conversation_key(alice.secret, bob.pubkey)
    foreign = _core(alice, Identity.new(), "encrypted to someone else")
    tags = [["d", engram.d_tag(key, "core")], ["p", bob.pubkey]]
    await _publish(sqlite_relay, alice, Event.create(alice.secret, 30174, foreign.content, tags))
    got = await fetch_core_memory(alice.secret, bob.pubkey, relay_url=sqlite_relay.url)
    assert (got.state, got.section) == (CoreState.FAILURE, None)
    assert got.reason and "decryptable" in got.reason


async def test_closed_query_is_a_failure(sqlite_relay: RunningRelay, alice: Identity, bob: Identity) -> None:
    await _publish(sqlite_relay, alice, _core(alice, bob, "exists"))
    async with sqlite_relay.client() as unauthenticated:  # the relay CLOSEs its REQ (auth-required)
        got = await fetch_core_memory(alice.secret, bob.pubkey, client=unauthenticated)
    assert (got.state, got.section) == (CoreState.FAILURE, None)
    assert got.reason and "auth-required: not authenticated" in got.reason


async def test_refused_auth_is_a_failure(tmp_path: Path, alice: Identity, bob: Identity) -> None:
    async with relay_on(tmp_path, require_relay_membership=True) as closed:
        got = await fetch_core_memory(alice.secret, bob.pubkey, relay_url=closed.url)
    assert (got.state, got.section) == (CoreState.FAILURE, None)
    assert got.reason and got.reason.startswith("relay refused:")  # AUTH denied to a non-member


async def test_unreachable_relay_is_a_failure(alice: Identity, bob: Identity) -> None:
    got = await fetch_core_memory(alice.secret, bob.pubkey, relay_url="ws://127.0.0.1:9")
    assert (got.state, got.section) == (CoreState.FAILURE, None)


@contextlib.asynccontextmanager
async def _silent_server() -> AsyncIterator[str]:
    """A TCP listener that accepts connections and never answers (a hung relay)."""
    writers: list[Any] = []

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"ws://127.0.0.1:{port}"
    finally:
        for w in writers:
            w.close()
        server.close()
        await server.wait_closed()


async def test_slow_relay_times_out_after_3_seconds(alice: Identity, bob: Identity) -> None:
    async with _silent_server() as url:
        start = time.monotonic()
        got = await fetch_core_memory(alice.secret, bob.pubkey, relay_url=url)
        elapsed = time.monotonic() - start
    assert (got.state, got.section) == (CoreState.FAILURE, None)
    assert engram.CORE_FETCH_TIMEOUT <= elapsed < engram.CORE_FETCH_TIMEOUT + 1.0


async def test_no_owner_fetches_nothing(alice: Identity) -> None:
    got = await fetch_core_memory(alice.secret, None, relay_url="ws://127.0.0.1:9")
    assert (got.state, got.section) == (None, None)


async def test_bad_owner_key_is_a_failure(alice: Identity) -> None:
    got = await fetch_core_memory(alice.secret, "00" * 31 + "05", relay_url="ws://127.0.0.1:9")
    assert (got.state, got.section) == (CoreState.FAILURE, None)


# -- prompt_framing_rs_tests (§13.5) ---------------------------------------------------------------
FRAMING = vectors.nip_ae()["prompt_framing_rs_tests"]


@pytest.mark.parametrize(
    "case",
    FRAMING["normalize_semantic_section"],
    ids=[f"normalize-{i}" for i in range(len(FRAMING["normalize_semantic_section"]))],
)
def test_normalize_semantic_section(case: dict[str, Any]) -> None:
    assert (case["tag"], case["legacy_label"]) == (CORE_MEMORY_TAG, LEGACY_CORE_LABEL)
    assert normalize_semantic_section(case["tag"], case["legacy_label"], case["input"]) == case["output"]


@pytest.mark.parametrize(
    "case", FRAMING["semantic_section"], ids=[f"section-{i}" for i in range(len(FRAMING["semantic_section"]))]
)
def test_semantic_section(case: dict[str, Any]) -> None:
    assert semantic_section(case["tag"], case["content"]) == case["output"]
