"""Engram reads without I/O: head selection, read outcomes, listing, references and writes' clock.

Rule source: engram.md §5.2 (`monotonic_created_at`, clock poisoning), §8 (head selection and
its outcomes), §9 (listing), §10.3 (reachability, orphans), §13.4 (core-memory states). The
caller does the query; these functions take the relay's answer (a JSON array of events).
Re-exported by `buzz.core.engram`.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from buzz.core.engram_body import (
    CLOCK_POISON_MARGIN,
    CORE_SLUG,
    LIST_QUERY_LIMIT,
    Body,
    CoreBody,
    MemoryBody,
    extract_refs,
)
from buzz.core.engram_event import validate_and_decrypt
from buzz.core.errors import BuzzError
from buzz.core.event import MAX_CREATED_AT, Event, verify_event


# -- the created_at rule ----------------------------------------------------------------------
def monotonic_created_at(now: int, head_created_at: int | None) -> int:
    """`created_at` for a new write (engram.md §5.2), unix seconds.

    `now` with no head; otherwise `max(now, head_created_at + 1)`, the addition saturating at
    2^53 - 1 (the largest `created_at` the relay accepts). Pure: the clock-poisoning check is
    the writer's (`is_clock_poisoned`).
    """
    if head_created_at is None:
        return now
    following = head_created_at + 1 if head_created_at < MAX_CREATED_AT else head_created_at
    return max(now, following)


def is_clock_poisoned(created_at: int, now: int) -> bool:
    """True when a write at `created_at` lies more than CLOCK_POISON_MARGIN (600 s) after `now`.

    A writer MUST NOT publish then, and reports a conflict naming the head's created_at (§5.2).
    """
    return created_at > now + CLOCK_POISON_MARGIN


# -- head selection ---------------------------------------------------------------------------
class Stamped(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def created_at(self) -> int: ...


S = TypeVar("S", bound=Stamped)


def select_head(candidates: Iterable[S]) -> S | None:
    """The head: greatest `created_at`, ties to the lowest lowercase-hex `id` (engram.md §8 step 4).

    Works on Events or Records; copies with the same id count once. None when empty.
    """
    return min(candidates, key=lambda c: (-c.created_at, c.id), default=None)


@dataclass(frozen=True, slots=True)
class Record:
    """A verified, validated engram event and its decrypted body."""

    event: Event
    body: Body

    @property
    def id(self) -> str:
        return self.event.id

    @property
    def created_at(self) -> int:
        return self.event.created_at

    @property
    def d(self) -> str:
        return self.event.d_tag


@dataclass(frozen=True, slots=True)
class Opened:
    """`open_candidates` result: the survivors, the number skipped and the last skip reason."""

    records: tuple[Record, ...]
    skipped: int
    last_error: str | None


def open_candidates(
    answer: Iterable[Any], agent: str, owner: str, my_seckey: str | bytes, their_pubkey: str | bytes
) -> Opened:
    """Verify and open every element of a relay answer (engram.md §8 steps 2–3, §9 step 2).

    Each element is an `Event` or a decoded NIP-01 JSON object. It is parsed, its id and
    signature are verified (before any decryption), then `validate_and_decrypt` runs. Any
    failure skips that element silently (counted in `skipped`); this never raises.
    """
    records = []
    skipped = 0
    last_error = None
    for element in answer:
        try:
            event = element if isinstance(element, Event) else Event.from_json(element)
            verify_event(event)
            body = validate_and_decrypt(event, agent, owner, my_seckey, their_pubkey)
        except (BuzzError, ValueError) as exc:
            skipped += 1
            last_error = str(exc)
            continue
        records.append(Record(event, body))
    return Opened(tuple(records), skipped, last_error)


@dataclass(frozen=True, slots=True)
class Found:
    """The head and its body. A tombstone body reads as "no entry" (§8 step 5)."""

    event: Event
    body: Body


@dataclass(frozen=True, slots=True)
class EmptyAnswer:
    """The relay answered zero events: confirmed absence (§8 step 5)."""


@dataclass(frozen=True, slots=True)
class AllInvalid:
    """The relay answered `count` elements and none survived; `last_error` is the last reason."""

    count: int
    last_error: str

    @property
    def reason(self) -> str:
        return (
            f"none of {self.count} candidates is a valid, decryptable engram; last error: {self.last_error}"
        )


@dataclass(frozen=True, slots=True)
class Failure:
    """The query did not complete or its answer is unusable (transport, timeout, auth,
    CLOSED, not a JSON array). Not absence: no write may rest on it (§8 step 5)."""

    reason: str


HeadOutcome = Found | EmptyAnswer | AllInvalid | Failure


def head_outcome(
    answer: Any, agent: str, owner: str, my_seckey: str | bytes, their_pubkey: str | bytes
) -> HeadOutcome:
    """Turn a relay answer into the §8 outcome: Found, EmptyAnswer, AllInvalid or Failure.

    `answer` is the decoded answer to the head query (a list of events / JSON objects);
    anything that is not a list or tuple is a Failure. The head's body is not compared with
    the slug that was asked for: a valid head of another slug is still Found (§13.4 treats a
    non-core body as ConfirmedEmpty). Transport failures are the caller's Failure. Never raises.
    """
    if not isinstance(answer, list | tuple):
        return Failure("relay answer is not a JSON array")
    if not answer:
        return EmptyAnswer()
    opened = open_candidates(answer, agent, owner, my_seckey, their_pubkey)
    head = select_head(opened.records)
    if head is None:
        return AllInvalid(len(answer), opened.last_error or "no candidate")
    return Found(head.event, head.body)


class CoreState(enum.Enum):
    """Session-injection states of engram.md §13.4."""

    FOUND = "found"
    CONFIRMED_EMPTY = "confirmed_empty"
    FAILURE = "failure"


def core_state(outcome: HeadOutcome) -> tuple[CoreState, str | None]:
    """Map a core head outcome to its §13.4 state and, when FOUND, the profile (verbatim).

    Found with a core body → FOUND; EmptyAnswer, or a valid head whose body is not core →
    CONFIRMED_EMPTY (onboarding nudge); Failure or AllInvalid → FAILURE (inject nothing).
    """
    if isinstance(outcome, Found):
        if isinstance(outcome.body, CoreBody):
            return CoreState.FOUND, outcome.body.profile
        return CoreState.CONFIRMED_EMPTY, None
    if isinstance(outcome, EmptyAnswer):
        return CoreState.CONFIRMED_EMPTY, None
    return CoreState.FAILURE, None


# -- listing ----------------------------------------------------------------------------------
def heads_by_slug(records: Iterable[Record]) -> dict[str, Record]:
    """Group records by their `d` value and keep each group's head, keyed by the head's slug.

    Includes tombstones and core (engram.md §9 step 3); filter with `listing`.
    """
    groups: dict[str, list[Record]] = {}
    for record in records:
        groups.setdefault(record.d, []).append(record)
    heads = (select_head(group) for group in groups.values())
    return {head.body.slug: head for head in heads if head is not None}


@dataclass(frozen=True, slots=True)
class ListEntry:
    """One listed memory entry (engram.md §9 step 5); `created_at` in unix seconds."""

    slug: str
    event_id: str
    created_at: int

    def to_dict(self) -> dict[str, Any]:
        """`{"slug", "event_id", "created_at"}` in that key order (the `buzz mem ls` JSON)."""
        return {"slug": self.slug, "event_id": self.event_id, "created_at": self.created_at}


def listing(heads: Mapping[str, Record]) -> list[ListEntry]:
    """Live memory entries of `heads_by_slug`: tombstones and core dropped, sorted by slug (§9).

    A best-effort snapshot: callers must not infer deletion from a missing entry.
    """
    live = [r for r in heads.values() if isinstance(r.body, MemoryBody) and not r.body.is_tombstone]
    return sorted(
        (ListEntry(r.body.slug, r.id, r.created_at) for r in live),
        key=lambda e: e.slug.encode("utf-8"),
    )


def is_listing_truncated(count: int, limit: int = LIST_QUERY_LIMIT, max_limit: int | None = None) -> bool:
    """True when an answer of `count` events may be cut off: `count ≥ min(limit, max_limit)` (§9).

    `max_limit` is the relay's advertised NIP-11 `limitation.max_limit` (None when unknown).
    """
    bound = limit if max_limit is None else min(limit, max_limit)
    return count >= bound


# -- references -------------------------------------------------------------------------------
def _live_bodies(heads: Mapping[str, Body | Record]) -> dict[str, Body]:
    out = {}
    for slug, head in heads.items():
        body = head.body if isinstance(head, Record) else head
        if not body.is_tombstone:
            out[slug] = body
    return out


def reachable_from_core(heads: Mapping[str, Body | Record]) -> list[str]:
    """The reached set R of engram.md §10.3, in breadth-first order.

    `heads` maps slug → head (Body or Record, tombstones allowed). R starts as the references
    of a live core's profile (empty without one) and grows through the values of reached
    slugs that have a live head. Reached slugs without a live head are dangling references.
    """
    live = _live_bodies(heads)
    core = live.get(CORE_SLUG)
    reached = extract_refs(core.text) if isinstance(core, CoreBody) else []
    seen = set(reached)
    queue = deque(reached)
    while queue:
        slug = queue.popleft()
        body = live.get(slug)
        if slug == CORE_SLUG or not isinstance(body, MemoryBody) or body.value is None:
            continue
        for ref in extract_refs(body.value):
            if ref not in seen:
                seen.add(ref)
                reached.append(ref)
                queue.append(ref)
    return reached


def find_orphans(heads: Mapping[str, Body | Record]) -> list[str]:
    """Live memory slugs unreachable from core, sorted (engram.md §10.3).

    Dangling references are not orphans. Orphans are for review only: nothing may delete or
    tombstone them unless the user or the agent asks for that slug.
    """
    reached = set(reachable_from_core(heads))
    live = _live_bodies(heads)
    return sorted(s for s, b in live.items() if isinstance(b, MemoryBody) and s not in reached)


def dangling_refs(heads: Mapping[str, Body | Record]) -> list[str]:
    """Reached slugs with no live head (absent or tombstoned), in reach order (§10.3)."""
    live = _live_bodies(heads)
    return [s for s in reachable_from_core(heads) if s not in live]
