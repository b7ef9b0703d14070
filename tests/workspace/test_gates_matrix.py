"""Read gates on every path (relay.md §5.3–§5.5, §6.3, §11, §12.1): a matrix generated from the
kind registry, checked against the running relay over WebSocket on both backends.

Rows: every registered kind whose visibility sets are non-empty (shared-gated kinds also in the
§5.2 tag shapes) plus the channel-scoped kinds 9, 43001–43006, the agent work status 30181
and the workflow kinds 46001–46031 in a private channel. Columns: the read paths (stored REQ,
live subscription, ids lookup with and without `kinds`, COUNT, NIP-50 search) × the readers
(author, p-target, channel member, non-member, unauthenticated), each path with the filters a
client would use — with their `kinds`, and the same filters without `kinds` (issue 25
item 3: served, each gated event dropped for a reader who may not see it), and on the stored
REQ path also `{}`. The expected outcome is computed here from the spec's rules (the
`spec_*` functions re-state §5.2–§5.4, §6.3 and §11 from the text), never from the relay's
code; only the registry's set column is read. A kind given a set in the registry joins the
matrix without any change here.

Events are injected through the relay's own internal path (verified envelope → store → fan-out),
so the matrix tests reading, not the writers of each kind (which have their own tests).

The history path (`POST /history`, docs/decisions.md 81) is the one path that serves superseded
versions: the 30174 row also has an older, superseded version, which every path above must
hide from everyone, and which the history path serves to the author and the p-target (the
engram's owner) only; a channel member, a non-member and another agent of the same owner get
exactly the answer for an address with no versions.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import pytest_asyncio

from buzz.client import RelayClient, RelayError
from buzz.client.relay_client import Subscription
from buzz.core.event import Event
from buzz.core.kinds import REGISTRY, Scope, StorageClass
from buzz.core.stored import verify_stored
from buzz.store.base import InsertOutcome
from tests.bridge.helpers import post
from tests.conftest import _start
from tests.support.deadline import scaled
from tests.support.relay import Identity, RunningRelay
from tests.workspace.helpers import create_channel, drain, put_user

pytestmark = pytest.mark.asyncio(loop_scope="module")

KNOWN_SETS = {"AO", "PG", "RG", "SG", "EG"}
GATED = sorted(k for k, info in REGISTRY.items() if info.sets)
CHANNEL_KIND = 9
# Channel-scoped rows: a message, the job kinds (issue 27: a job is visible to the channel's
# readers only, on every path), and the workflow kinds (issue 28 item 5: a run's lifecycle and
# approvals are part of the channel's signed history, readable by its members and nobody else),
# and an agent's work status in the channel (jobs spec §12.2: non-readers never see it).
JOB_KINDS = (43001, 43002, 43003, 43004, 43005, 43006)
WORK_STATUS_KIND = 30181
WORKFLOW_KINDS = (*range(46001, 46008), 46010, 46011, 46012, 46020, 46030, 46031)
CHANNEL_KINDS = (CHANNEL_KIND, *JOB_KINDS, WORK_STATUS_KIND, *WORKFLOW_KINDS)
READERS = ("author", "p-target", "member", "non-member", "unauthenticated")
PATHS = ("req", "live", "ids", "ids+kinds", "count", "search")
# relay.md §5.2: tag shapes of a shared-gated event beyond "no shared tag" (None = no extra tags).
SHARED_SHAPES: dict[str, tuple[tuple[str, ...], ...]] = {
    "shared": (("shared", "true"),),
    "shared-TRUE": (("shared", "TRUE"),),
    "shared-3": (("shared", "true", "x"),),
    "shared-twice": (("shared", "true"), ("shared", "true")),
}


def _with(sets: str) -> frozenset[int]:
    return frozenset(k for k, info in REGISTRY.items() if sets in info.sets)


PG, RG, AO, SG, EG = _with("PG"), _with("RG"), _with("AO"), _with("SG"), _with("EG")
HISTORY_KINDS = frozenset({30174})  # docs/decisions.md 81: the only kind with a history path
HISTORY_READERS = ("author", "p-target", "member", "non-member", "sibling", "unauthenticated")
NO_VERSIONS = {"events": [], "next": None}


@dataclass(frozen=True)
class Variant:
    """One matrix row: an event of `kind` with `p` = the p-target and a unique `t` and word."""

    name: str
    kind: int
    extra: tuple[tuple[str, ...], ...] = ()
    in_channel: bool = False

    @property
    def relay_authored(self) -> bool:
        return REGISTRY[self.kind].scope is Scope.RELAY

    @property
    def stored(self) -> bool:
        return REGISTRY[self.kind].storage is not StorageClass.EPHEMERAL

    @property
    def tag(self) -> str:
        return "gm-" + self.name

    @property
    def word(self) -> str:
        return "gmword" + "".join(ch for ch in self.name if ch.isalnum())


def _variants() -> list[Variant]:
    out = []
    for kind in GATED:
        out.append(Variant(str(kind), kind))
        if kind in SG:
            out += [Variant(f"{kind}-{shape}", kind, extra) for shape, extra in SHARED_SHAPES.items()]
    out += [Variant(f"{kind}-private-channel", kind, in_channel=True) for kind in CHANNEL_KINDS]
    return out


VARIANTS = _variants()
BY_NAME = {v.name: v for v in VARIANTS}


# -- the spec, re-stated -------------------------------------------------------------------------
def spec_shared(tags: list[list[str]]) -> bool:
    """§5.2: walk the tags; a `shared` tag not of length 2 or not "true" → false; exactly one."""
    n = 0
    for t in tags:
        if t[0] == "shared":
            if len(t) != 2 or t[1] != "true":
                return False
            n += 1
    return n == 1


@dataclass
class World:
    running: RunningRelay
    who: dict[str, Identity]  # "A" author, "R" relay, "P" p-target, "M" member, "N" non-member, "U"
    clients: dict[str, RelayClient]
    channel_id: str = ""
    events: dict[str, Event] = field(default_factory=dict)
    superseded: dict[str, Event] = field(default_factory=dict)  # row → its older version
    live: dict[tuple[str, str, int], tuple[str, Any]] = field(default_factory=dict)

    def author(self, v: Variant) -> str:
        return "R" if v.relay_authored else "A"

    def reader(self, v: Variant, role: str) -> str:
        """The identity key playing `role` for this row."""
        return {
            "author": self.author(v),
            "p-target": "P",
            "member": "M",
            "non-member": "N",
            "unauthenticated": "U",
        }[role]

    def members(self) -> set[str]:
        return {self.who["A"].pubkey, self.who["M"].pubkey}


def spec_visible(world: World, v: Variant, reader: str) -> bool:
    """§5.3 items 2–6 for this row's event and `reader` (a pubkey)."""
    event = world.events[v.name]
    sets = REGISTRY[v.kind].sets
    p_values = {t[1] for t in event.tags if t[0] == "p" and len(t) >= 2}
    author = event.pubkey
    if "AO" in sets and reader != author:
        return False
    if "SG" in sets and reader != author and not spec_shared([list(t) for t in event.tags]):
        return False
    if "PG" in sets and reader not in p_values:
        return False
    if "EG" in sets and reader != author and reader not in p_values:
        return False
    return not (v.in_channel and reader not in world.members())  # private channel: members only


def _all_are(values: list[str] | None, reader: str) -> bool:
    return bool(values) and all(x == reader for x in values)


P_REFUSAL = "restricted: p-gated events require #p matching your pubkey"
EG_REFUSAL = "restricted: agent-engram reads require authors=[self] or #p=[self]"
AO_REFUSAL = "restricted: author-only kinds require authors=[self]"


def spec_gate(flt: dict[str, Any], reader: str) -> str | None:
    """§5.4 gates on a filter without `#h`, as issue 25 item 3 restates them: the filter is
    refused only when every kind it can match is gated for the reader (a filter without
    `kinds` can match ungated kinds: never); then with the first gate, in the order
    p-gate → engram gate → author-only gate, that refuses one of its kinds."""
    if "#h" in flt or not flt.get("kinds"):
        return None
    ids, authors, p = flt.get("ids"), flt.get("authors"), flt.get("#p")
    refused: set[str] = set()
    for kind in flt["kinds"]:
        if kind in PG and not (_all_are(p, reader) or (ids and kind not in RG)):
            refused.add(P_REFUSAL)
        elif kind in EG and not (_all_are(authors, reader) or _all_are(p, reader)):
            refused.add(EG_REFUSAL)
        elif kind in AO and not _all_are(authors, reader):
            refused.add(AO_REFUSAL)
        else:
            return None  # a kind the filter may read: served
    return next(m for m in (P_REFUSAL, EG_REFUSAL, AO_REFUSAL) if m in refused)


def spec_matches(world: World, v: Variant, flt: dict[str, Any]) -> bool:
    """§6.1 for the filter shapes built below (every field present must hold)."""
    event = world.events[v.name]
    tags: dict[str, set[str]] = {}
    for t in event.tags:
        if len(t) >= 2:
            tags.setdefault(t[0], set()).add(t[1])
    if "ids" in flt and event.id not in flt["ids"]:
        return False
    if "kinds" in flt and event.kind not in flt["kinds"]:
        return False
    if "authors" in flt and event.pubkey not in flt["authors"]:
        return False
    return all(tags.get(key[1:], set()) & set(values) for key, values in flt.items() if key.startswith("#"))


def spec_outcome(world: World, v: Variant, path: str, role: str, flt: dict[str, Any]) -> tuple[str, Any]:
    """("refused", <CLOSED message>) or ("visible", <bool>) for one cell."""
    reader = world.who[world.reader(v, role)].pubkey
    if role == "unauthenticated":
        return ("refused", "auth-required: not authenticated")  # §7.3 item 6
    if world.channel_id in flt.get("#h", []) and reader not in world.members():
        return ("refused", "restricted: not a channel member")  # §6.3 item 1
    refusal = spec_gate(flt, reader)
    if refusal is not None:
        return ("refused", refusal)
    seen = spec_matches(world, v, flt) and spec_visible(world, v, reader)
    if path == "live":
        # §6.3 item 3: a channel event is delivered live only through a filter naming its channel.
        return ("visible", seen and (not v.in_channel or world.channel_id in flt.get("#h", [])))
    if not v.stored:
        return ("visible", False)  # ephemeral kinds are never served from storage
    if path == "search" and REGISTRY[v.kind].sets & {"PG", "AO", "EG"}:
        return ("visible", False)  # §11 item 1: non-searchable kinds never match
    if path == "search" and v.kind in WORKFLOW_KINDS:
        return ("visible", False)  # workflows.md §2.2 item 6: run records are not message text
    return ("visible", seen)


# -- filters a client would send -------------------------------------------------------------------
def narrow(world: World, v: Variant, reader: str) -> dict[str, Any]:
    """The filter that narrows to what the reader may ask for (the gate's own shape)."""
    sets = REGISTRY[v.kind].sets
    base: dict[str, Any] = {"kinds": [v.kind], "#t": [v.tag]}
    if v.in_channel:
        return {**base, "#h": [world.channel_id]}
    if "PG" in sets:
        return {**base, "#p": [reader]}
    if "AO" in sets:
        return {**base, "authors": [reader]}
    if "EG" in sets:
        return (
            {**base, "authors": [reader]}
            if reader == world.events[v.name].pubkey
            else {**base, "#p": [reader]}
        )
    return {**base, "authors": [world.events[v.name].pubkey]}


def broad(world: World, v: Variant) -> dict[str, Any]:
    """Kind + author, no reader narrowing: gates refuse it or `visible` filters it."""
    return {"kinds": [v.kind], "authors": [world.events[v.name].pubkey], "#t": [v.tag]}


def without_kinds(flt: dict[str, Any]) -> dict[str, Any]:
    """The same filter naming no kinds (`{"authors":[pk]}`, `{"#p":[me]}`, …: issue 25 item 3)."""
    return {k: v for k, v in flt.items() if k != "kinds"}


def filters(world: World, v: Variant, path: str, role: str) -> list[dict[str, Any]]:
    reader = world.who[world.reader(v, role)].pubkey
    event = world.events[v.name]
    if path == "ids":
        return [{"ids": [event.id]}]
    if path == "ids+kinds":
        return [{"ids": [event.id], "kinds": [v.kind]}]
    shapes = [narrow(world, v, reader), broad(world, v)]
    shapes += [without_kinds(f) for f in shapes]
    if path == "search":
        return [{**f, "search": v.word} for f in shapes]
    if path == "req":
        shapes.append({})  # every event the reader may see, newest first (the world holds < 1000)
    return shapes


# -- the world: one relay per backend, events injected once ---------------------------------------
def _event(world: World, v: Variant, created_at: int | None = None) -> Event:
    author = world.who[world.author(v)]
    tags = [["p", world.who["P"].pubkey], ["t", v.tag], *map(list, v.extra)]
    if REGISTRY[v.kind].storage is StorageClass.ADDRESSABLE:
        tags.append(["d", world.channel_id if v.kind == WORK_STATUS_KIND else v.name])
    if v.in_channel:
        tags.insert(0, ["h", world.channel_id])
    content = f"gate matrix {v.word}" if created_at is None else f"gate matrix older {v.word}"
    return Event.create(author.secret, v.kind, content, tags, created_at)


async def _observe(client: RelayClient, flt: dict[str, Any], path: str, event_id: str) -> tuple[str, Any]:
    try:
        if path == "count":
            n = await client.count([flt])
            assert n in (0, 1), n
            return ("visible", n == 1)
        return ("visible", event_id in {e.id for e in await client.query([flt])})
    except RelayError as err:
        return ("refused", err.message)


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=["sqlite", "postgres"])
async def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[World]:
    # The unauthenticated reader's socket must outlive the whole matrix, however slow the box:
    # the relay's 5 s authentication deadline would otherwise close it mid-run.
    async for running in _start(request.param, tmp_path_factory.mktemp("gates"), auth_timeout_s=3600):
        relay = running.relay
        # "S": another agent whose registered owner is the p-target (the engram's owner)
        who = {key: Identity.new() for key in "APMNUS"}
        who["R"] = Identity(relay.secret_key, relay.pubkey)
        async with contextlib.AsyncExitStack() as stack:
            clients = {}
            for key, identity in who.items():
                client = running.client(identity if key != "U" else None)
                clients[key] = await stack.enter_async_context(client)
            w = World(running, who, clients)
            w.channel_id = await create_channel(clients["A"], who["A"], "private")
            await put_user(clients["A"], who["A"], w.channel_id, who["M"].pubkey)
            await relay.store.set_agent_owner_if_absent(who["S"].pubkey, who["P"].pubkey)
            for v in VARIANTS:
                w.events[v.name] = _event(w, v)
                if v.kind in HISTORY_KINDS:
                    w.superseded[v.name] = _event(w, v, w.events[v.name].created_at - 60)
            subs = await _subscribe_live(w)
            for older in w.superseded.values():  # stored first, then replaced by the row's event
                assert await relay.store.insert(verify_stored(older)) is InsertOutcome.STORED
            for v in VARIANTS:  # what ingest does after the rules: store, then fan out
                stored = verify_stored(w.events[v.name]).with_channel(w.channel_id if v.in_channel else None)
                if v.stored:
                    await relay.store.insert(stored)
                await relay.fanout.publish(stored)
            for key, client in clients.items():
                if key != "U":
                    await client.count([{"kinds": [1], "authors": [who[key].pubkey]}])  # round trip
            for cell, (sub, event_id) in subs.items():
                if sub.closed_reason is not None:
                    w.live[cell] = ("refused", sub.closed_reason)
                else:
                    w.live[cell] = ("visible", event_id in {e.id for e in drain(sub)})
            yield w


async def _subscribe_live(w: World) -> dict[tuple[str, str, int], tuple[Subscription, str]]:
    subs = {}
    for v in VARIANTS:
        for role in READERS:
            client = w.clients[w.reader(v, role)]
            for i, flt in enumerate(filters(w, v, "live", role)):
                subs[(v.name, role, i)] = (await client.subscribe([flt]), w.events[v.name].id)
    await asyncio.wait_for(asyncio.gather(*(sub.eose.wait() for sub, _ in subs.values())), scaled(10))
    for sub, _ in subs.values():
        assert drain(sub) == []  # nothing stored yet
    return subs


# -- the matrix --------------------------------------------------------------------------------------
async def test_matrix_covers_every_gated_kind() -> None:
    assert {v.kind for v in VARIANTS} == set(GATED) | set(CHANNEL_KINDS)
    assert set().union(*(REGISTRY[k].sets for k in GATED)) <= KNOWN_SETS  # a new set needs a spec rule here
    assert {1059, 24200, 30174, 30175, 30178, 30179, 30300, 30350, 44100, 44101, 44200} <= set(GATED)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("row", [v.name for v in VARIANTS])
async def test_gate(world: World, row: str, path: str) -> None:
    v = BY_NAME[row]
    event_id = world.events[v.name].id
    wrong = []
    for role in READERS:
        client = world.clients[world.reader(v, role)]
        for i, flt in enumerate(filters(world, v, path, role)):
            expected = spec_outcome(world, v, path, role, flt)
            if path == "live":
                observed = world.live[(v.name, role, i)]
            else:
                observed = await _observe(client, flt, path, event_id)
            if observed != expected:
                wrong.append(f"{role} {flt}: expected {expected}, got {observed}")
    assert not wrong, "\n".join(wrong)


# -- the history path (docs/decisions.md 81) -------------------------------------------------------
def spec_history(world: World, v: Variant, role: str) -> tuple[int, Any]:
    """The decision re-stated: NIP-98 first; a kind without a history path is refused; the
    versions kept at the address (newest first) that name the reader as author or in `p`;
    anyone else the answer of an address with no versions."""
    if role == "unauthenticated":
        return (401, "NIP-98")
    if v.kind not in HISTORY_KINDS:
        return (403, {"error": "restricted: history is served for kind 30174 only"})
    reader = world.who[_history_reader(v, role)].pubkey
    kept = [world.events[v.name], world.superseded[v.name]]
    readable = [
        e.to_dict() for e in kept if reader == e.pubkey or reader in {t[1] for t in e.tags if t[0] == "p"}
    ]
    return (200, {"events": readable, "next": None})


def _history_reader(v: Variant, role: str) -> str:
    return {"author": "A", "p-target": "P", "member": "M", "non-member": "N", "sibling": "S"}[role]


async def _history(world: World, who: Identity | None, body: dict[str, Any]) -> tuple[int, Any]:
    status, answer = await post(world.running, "/history", body, who)
    if status == 401:
        assert isinstance(answer, dict) and answer["error"].startswith("NIP-98"), answer
        return (401, "NIP-98")
    return (status, answer)


@pytest.mark.parametrize("row", [v.name for v in VARIANTS if not v.in_channel and v.stored])
async def test_history_gate(world: World, row: str) -> None:
    v = BY_NAME[row]
    event = world.events[v.name]
    body = {"kind": v.kind, "pubkey": event.pubkey, "d": event.d_tag}
    wrong = []
    for role in HISTORY_READERS:
        who = None if role == "unauthenticated" else world.who[_history_reader(v, role)]
        expected = spec_history(world, v, role)
        observed = await _history(world, who, body)
        if observed != expected:
            wrong.append(f"{role}: expected {expected}, got {observed}")
        if v.kind in HISTORY_KINDS and who is not None and expected[1]["events"] == []:
            # indistinguishable from an address that has no versions at all
            nothing = await _history(world, who, {**body, "d": "no-such-address"})
            if observed != nothing or nothing != (200, NO_VERSIONS):
                wrong.append(f"{role}: {observed} differs from the empty address's {nothing}")
    assert not wrong, "\n".join(wrong)


async def test_superseded_version_is_served_on_no_other_path(world: World) -> None:
    """Every reader, every stored path of the matrix, plus `ids` naming the old version."""
    served = []
    for name, older in world.superseded.items():
        v = BY_NAME[name]
        for role in READERS:
            if role == "unauthenticated":
                continue
            client = world.clients[world.reader(v, role)]
            shapes = [{"ids": [older.id]}, {"ids": [older.id], "kinds": [v.kind]}]
            for path in ("req", "count", "search"):
                shapes += filters(world, v, path, role)
            for flt in shapes:
                try:
                    if flt and "search" not in flt and "ids" not in flt:  # `{}`: by its query below
                        n = await client.count([flt])
                        if n > 1:
                            served.append(f"{role} count {flt}: {n}")
                    got = {e.id for e in await client.query([flt])}
                except RelayError:
                    continue  # refused by a gate: served to nobody either
                if older.id in got:
                    served.append(f"{role} {flt}")
    assert world.superseded and not served, served
