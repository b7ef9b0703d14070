"""Table-driven tests of the pure room state (huddle.md §5, checklist 17–24)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from buzz.core.huddle_admission import Admitted, Refusal, Refused, Room, RoomRegistry
from buzz.core.huddle_wire import MAX_PEERS_PER_ROOM, REVISION_MODULUS


def key(n: int) -> str:
    return f"{n:064x}"


@dataclass(frozen=True)
class Join:
    """Admit `key(who)` at `version`; expect the index, or the refusal."""

    who: int
    version: int
    expect: int | Refusal


@dataclass(frozen=True)
class Leave:
    """Remove the seat admitted as step `step` (0-based); expect `should_end`."""

    step: int
    should_end: bool = False


SCENARIOS: dict[str, list[Join | Leave]] = {
    "indices start at 0 and count up": [Join(1, 2, 0), Join(2, 2, 1), Join(3, 2, 2)],
    "least recently freed index is reused first (FIFO, issue 13)": [
        Join(1, 2, 0),
        Join(2, 2, 1),
        Join(3, 2, 2),
        Leave(0),
        Leave(1),
        Join(4, 2, 0),
        Join(5, 2, 1),
        Join(6, 2, 3),
    ],
    "one pubkey may hold two seats": [Join(1, 2, 0), Join(1, 2, 1)],
    "26th peer gets room_full": [*(Join(i, 2, i) for i in range(25)), Join(99, 2, Refusal.FULL)],
    "v1 joiner in a v2 room gets upgrade_required": [Join(1, 2, 0), Join(2, 1, Refusal.VERSION_MISMATCH)],
    "full beats version mismatch": [*(Join(i, 2, i) for i in range(25)), Join(99, 1, Refusal.FULL)],
    "no pin from a full refusal": [
        *(Join(i, 2, i) for i in range(25)),
        Join(99, 1, Refusal.FULL),
        Join(98, 2, Refusal.FULL),
    ],
    "pin survives a leave": [Join(1, 2, 0), Join(2, 2, 1), Leave(0), Join(3, 1, Refusal.VERSION_MISMATCH)],
    "last leaver ends the room once; later joiners get room_ended": [
        Join(1, 1, 0),
        Leave(0, should_end=True),
        Join(2, 1, Refusal.ENDED),
        Join(2, 2, Refusal.ENDED),
    ],
    "absent version (1) pins a fresh room to 1": [Join(1, 1, 0), Join(2, 2, Refusal.VERSION_MISMATCH)],
}


@pytest.mark.parametrize("steps", SCENARIOS.values(), ids=SCENARIOS.keys())
def test_admission_scenarios(steps: list[Join | Leave]) -> None:
    room: Room[None] = Room()
    seats: list[Admitted[None] | Refused] = []
    for step in steps:
        if isinstance(step, Leave):
            seat = seats[step.step]
            assert isinstance(seat, Admitted)
            removed = room.remove(seat.peer.peer_id)
            assert removed is not None
            assert removed.should_end == step.should_end
            seats.append(seat)  # keep step numbering aligned
            continue
        before = copy.deepcopy(
            (room.peers, room.free_indices, room.next_fresh, room.pinned_version, room.revision)
        )
        outcome = room.admit(key(step.who), step.version, None)
        seats.append(outcome)
        if isinstance(step.expect, Refusal):
            assert isinstance(outcome, Refused)
            assert outcome.reason is step.expect
            after = (room.peers, room.free_indices, room.next_fresh, room.pinned_version, room.revision)
            assert after == before  # a failed admission changes nothing
        else:
            assert isinstance(outcome, Admitted), outcome
            assert outcome.peer.peer_index == step.expect


def _fill(room: Room[None]) -> None:
    for i in range(MAX_PEERS_PER_ROOM):
        room.admit(key(i), 2, None)


@pytest.mark.parametrize(
    ("prepare", "version", "reason"),
    [
        # Ended > Full > VersionMismatch (§5.4)
        (lambda r: setattr(r, "ended", True), 2, Refusal.ENDED),
        (lambda r: setattr(r, "unusable", True), 2, Refusal.ENDED),
        (lambda r: (_fill(r), setattr(r, "ended", True)), 1, Refusal.ENDED),
        (_fill, 1, Refusal.FULL),
        (lambda r: r.admit(key(1), 2, None), 1, Refusal.VERSION_MISMATCH),
    ],
)
def test_refusal_precedence(prepare: Callable[[Room[None]], object], version: int, reason: Refusal) -> None:
    room: Room[None] = Room()
    prepare(room)
    outcome = room.admit(key(77), version, None)
    assert isinstance(outcome, Refused)
    assert outcome.reason is reason


def test_refusal_errors() -> None:
    assert Refused(Refusal.ENDED, 2).error().code == "room_ended"
    assert Refused(Refusal.FULL, 1).error().code == "room_full"
    error = Refused(Refusal.VERSION_MISMATCH, 1, 2).error()
    assert (error.code, error.pinned_version, error.requested_version) == ("upgrade_required", 2, 1)


def test_index_space_is_0_to_254() -> None:
    room: Room[None] = Room(max_peers=1000)
    indices = []
    for i in range(255):
        outcome = room.admit(key(i), 2, None)
        assert isinstance(outcome, Admitted)
        indices.append(outcome.peer.peer_index)
    assert indices == list(range(255))
    full = room.admit(key(999), 2, None)
    assert isinstance(full, Refused) and full.reason is Refusal.FULL
    seat = next(iter(room.peers.values()))
    room.remove(seat.peer_id)
    again = room.admit(key(999), 2, None)
    assert isinstance(again, Admitted) and again.peer.peer_index == seat.peer_index


def test_joined_and_left_messages() -> None:
    room: Room[str] = Room()
    first = room.admit(key(1), 2, "sink-1")
    second = room.admit(key(2), 2, "sink-2")
    assert isinstance(first, Admitted) and isinstance(second, Admitted)
    assert second.revision == first.revision + 1 == 2
    assert second.joined.pubkey == key(2) and second.joined.peer_index == 1
    assert [(e.peer_index, e.pubkey) for e in second.joined.peers] == [(0, key(1)), (1, key(2))]
    assert {p.sink for p in second.recipients} == {"sink-1", "sink-2"}  # joiner included
    removed = room.remove(first.peer.peer_id)
    assert removed is not None
    assert (removed.left.revision, removed.left.pubkey, removed.left.peer_index) == (3, key(1), 0)
    assert [p.sink for p in removed.recipients] == ["sink-2"]
    assert room.remove(first.peer.peer_id) is None


def test_receivers_exclude_only_the_sending_seat() -> None:
    room: Room[None] = Room()
    a = room.admit(key(1), 2, None)
    b = room.admit(key(1), 2, None)  # same pubkey, second device
    c = room.admit(key(2), 2, None)
    assert isinstance(a, Admitted) and isinstance(b, Admitted) and isinstance(c, Admitted)
    assert {p.peer_index for p in room.receivers(a.peer.peer_id)} == {1, 2}


def test_revision_wraps_at_2_64() -> None:
    room: Room[None] = Room(revision=REVISION_MODULUS - 1)
    outcome = room.admit(key(1), 2, None)
    assert isinstance(outcome, Admitted) and outcome.revision == 0


def test_only_one_last_leaver_should_end_and_reopen_keeps_pin() -> None:
    room: Room[None] = Room()
    a = room.admit(key(1), 2, None)
    assert isinstance(a, Admitted)
    first = room.remove(a.peer.peer_id)
    assert first is not None and first.should_end
    room.reopen()  # archive failed: the room stays usable and keeps its pin
    again = room.admit(key(2), 1, None)
    assert isinstance(again, Refused) and again.reason is Refusal.VERSION_MISMATCH
    b = room.admit(key(2), 2, None)
    assert isinstance(b, Admitted)
    room.ended = True  # someone else ended it meanwhile
    removed = room.remove(b.peer.peer_id)
    assert removed is not None and not removed.should_end


def test_exception_in_critical_section_makes_room_unusable(monkeypatch: pytest.MonkeyPatch) -> None:
    room: Room[None] = Room()

    def boom(*args: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(room, "_insert", boom)
    with pytest.raises(RuntimeError):
        room.admit(key(1), 2, None)
    monkeypatch.undo()
    outcome = room.admit(key(1), 2, None)
    assert isinstance(outcome, Refused) and outcome.reason is Refusal.ENDED


def test_admit_at_index_for_mirror_rooms() -> None:
    room: Room[None] = Room()
    at5 = room.admit_at_index(key(1), 2, None, 5)
    assert isinstance(at5, Admitted) and at5.peer.peer_index == 5 and room.next_fresh == 6
    taken = room.admit_at_index(key(2), 2, None, 5)
    assert isinstance(taken, Refused) and taken.reason is Refusal.FULL
    mismatch = room.admit_at_index(key(2), 1, None, 7)
    assert isinstance(mismatch, Refused) and mismatch.reason is Refusal.VERSION_MISMATCH
    at2 = room.admit_at_index(key(2), 2, None, 2)
    assert isinstance(at2, Admitted) and room.next_fresh == 6
    room.remove(at5.peer.peer_id)
    assert list(room.free_indices) == [5]
    again = room.admit_at_index(key(3), 2, None, 5)
    assert isinstance(again, Admitted) and not room.free_indices


def test_registry_reclaim_and_fresh_pin() -> None:
    registry: RoomRegistry[None] = RoomRegistry()
    room = registry.get_or_create("c1", "ch")
    assert registry.get_or_create("c1", "ch") is room
    assert registry.get_or_create("c2", "ch") is not room  # one UUID in two communities: two rooms
    assert registry.by_channel("ch") is None  # ambiguous: fail closed (§9.8)
    seat = room.admit(key(1), 2, None)
    assert isinstance(seat, Admitted)
    assert not registry.reclaim("c1", "ch", room)  # not empty
    room.remove(seat.peer.peer_id)
    assert registry.reclaim("c1", "ch", room)
    assert not registry.reclaim("c1", "ch", room)  # already gone
    fresh = registry.get_or_create("c1", "ch")
    assert fresh is not room
    v1 = fresh.admit(key(2), 1, None)  # checklist 21: a reclaimed room's pin is gone
    assert isinstance(v1, Admitted) and fresh.pinned_version == 1
    registry.reclaim("c2", "ch", registry.get_or_create("c2", "ch"))
    assert registry.by_channel("ch") is fresh
