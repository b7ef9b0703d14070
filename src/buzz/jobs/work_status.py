"""Agent work status, kind 30181 (jobs spec §12, NIP-AW): one live snapshot per agent and
channel of what the agent is doing there, exactly as private as the channel.

- `check` is the relay's rule (§12.2): `d` equal to the first `h`, a JSON object of at most
  16 384 bytes with `v` = 1 and a known `status`. Producers run it before signing.
- `snapshot` builds the event a harness signs (§12.1): every required member, titles
  redacted and cut to 160 characters, at most 20 activity entries (the newest).
- `read` folds a stored 30181 into what a directory shows, and `is_fresh` says whether it
  may still be believed (`updatedAt` at most 600 s old, §13.1 item 2); `directory_status`
  folds an agent's readable snapshots and presence into its live status.

What an agent is working on is the title of the newest `message` activity of a `working`
snapshot: the harness opens each turn with one, naming the request (docs/decisions.md 331).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

from buzz.core.errors import Invalid
from buzz.core.event import Event
from buzz.jobs import limits as L
from buzz.jobs.build import Template
from buzz.jobs.redact import redact_title
from buzz.jobs.text import is_int, json_object

PREFIX = "agent work status"
D_MUST_EQUAL_H = f"{PREFIX} d tag must equal its h tag"
ACTIVITY_KINDS = ("tool", "message", "lifecycle")
ACTIVITY_STATUSES = ("running", "complete")


def check(event: Event) -> dict[str, Any]:
    """The relay's checks of a 30181 (§12.2); the content as a dict. Raises `Invalid`."""
    return _check(event.tags, event.content)


def _check(tags: tuple[tuple[str, ...], ...], content: str) -> dict[str, Any]:
    h = next((t[1] for t in tags if t[0] == "h" and len(t) >= 2), None)
    d = [t for t in tags if t[0] == "d"]
    if h is None or len(d) != 1 or len(d[0]) < 2 or d[0][1] != h:
        raise Invalid(D_MUST_EQUAL_H)
    body = json_object(content, PREFIX, L.WORK_STATUS_MAX_BYTES)
    if not is_int(body.get("v")) or body["v"] != 1:
        raise Invalid(f"{PREFIX}: v must be 1")
    if body.get("status") not in L.WORK_STATUSES:
        raise Invalid(f"{PREFIX}: status must be one of {', '.join(L.WORK_STATUSES)}")
    return body


def rfc3339(at: float) -> str:
    """`at` (epoch seconds) as RFC 3339 UTC, to the millisecond."""
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_rfc3339(value: object) -> float | None:
    """Epoch seconds of an RFC 3339 time with an offset, or None."""
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed.timestamp() if parsed.tzinfo is not None else None


@dataclass(frozen=True, slots=True)
class Activity:
    """One entry of `activity`: `kind` tool / message / lifecycle, `status` running / complete."""

    at: float
    kind: str
    title: str
    status: str = "running"

    def body(self) -> dict[str, Any]:
        return {
            "at": rfc3339(self.at),
            "kind": self.kind,
            "title": redact_title(self.title),
            "status": self.status,
        }


def snapshot(
    channel_id: str,
    status: str,
    *,
    now: float,
    activity: tuple[Activity, ...] = (),
    queued: int | None = None,
    **optional: Any,
) -> Template:
    """A 30181 for `channel_id`. `optional` holds the NIP-AW members by their wire names
    (`turnId`, `turnStartedAt`, `completedAt`, `stopReason`, `jobId`, `respondTo`, …); None
    values are left out."""
    body: dict[str, Any] = {
        "v": 1,
        "source": L.WORK_STATUS_SOURCE,
        "status": status,
        "updatedAt": rfc3339(now),
        "activity": [a.body() for a in activity[-L.WORK_STATUS_MAX_ACTIVITY :]],
    }
    if queued is not None:
        body["queued"] = queued
    body.update({k: v for k, v in optional.items() if v is not None})
    tags = (("h", channel_id), ("d", channel_id))
    content = orjson.dumps(body).decode()
    _check(tags, content)
    return Template(L.KIND_AGENT_WORK_STATUS, tags, content)


@dataclass(frozen=True, slots=True)
class Seen:
    """What a directory reads from one stored 30181."""

    agent: str
    channel_id: str
    status: str
    updated_at: float | None
    queued: int
    working_on: str | None
    respond_to: str | None
    job_id: str | None

    def is_fresh(self, now: float) -> bool:
        """§13.1 item 2: `updatedAt` at most 600 s old (a missing or future-dated one is not
        believed beyond the same window)."""
        return self.updated_at is not None and now - self.updated_at <= L.WORK_STATUS_STALE_S

    def is_working(self, now: float) -> bool:
        return self.status == "working" and self.is_fresh(now)


def read(event: Event) -> Seen | None:
    """The directory's view of a 30181, or None when it fails the relay's checks."""
    try:
        body = check(event)
    except Invalid:
        return None
    queued = body.get("queued")
    respond_to = body.get("respondTo")
    job_id = body.get("jobId")
    return Seen(
        agent=event.pubkey,
        channel_id=next(t[1] for t in event.tags if t[0] == "h"),
        status=body["status"],
        updated_at=parse_rfc3339(body.get("updatedAt")),
        queued=queued if is_int(queued) and queued > 0 else 0,
        working_on=_working_on(body.get("activity")),
        respond_to=respond_to if isinstance(respond_to, str) else None,
        job_id=job_id if isinstance(job_id, str) else None,
    )


def _working_on(activity: object) -> str | None:
    if not isinstance(activity, list):
        return None
    for entry in reversed(activity):
        if isinstance(entry, dict) and entry.get("kind") == "message" and isinstance(entry.get("title"), str):
            return entry["title"]
    return None


def directory_status(
    seen: Iterable[Seen], presence: str | None, now: float, names: Mapping[str, str]
) -> dict[str, Any]:
    """An agent's live status in the directory (§13.1 item 2, §13.2) from the snapshots the
    viewer could read: "working" in each channel whose fresh snapshot says so, `queued` the sum
    over fresh snapshots; else "idle" with a fresh snapshot or a live presence, "offline" when
    presence is offline, "unknown" when presence could not be read. `names` maps channel ids
    to names; a snapshot of a channel not in it is not counted (fail closed)."""
    fresh = sorted(
        (s for s in seen if s.channel_id in names and s.is_fresh(now)), key=lambda s: names[s.channel_id]
    )
    working = [s for s in fresh if s.status == "working"]
    if working:
        state = "working"
    elif fresh or presence in ("online", "away"):
        state = "idle"
    elif presence == "offline":
        state = "offline"
    else:
        state = "unknown"
    return {
        "state": state,
        "channels": [
            {"id": s.channel_id, "name": names[s.channel_id], "working_on": s.working_on} for s in working
        ],
        "queued": sum(s.queued for s in fresh),
    }
