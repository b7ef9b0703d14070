"""The pure core of kind 30181 (jobs spec §12.1, §13.1 item 2): what a harness signs and what a
directory reads back from it."""

from __future__ import annotations

import orjson
import pytest

from buzz.core.errors import Invalid
from buzz.core.event import Event
from buzz.core.keys import generate_secret_key
from buzz.jobs import work_status
from buzz.jobs.build import Template
from buzz.jobs.limits import WORK_STATUS_MAX_ACTIVITY, WORK_STATUS_STALE_S

CHANNEL = "0b0e9c4e-8b1a-4d27-9b1c-2f1d1b6a0c11"
NOW = 1_800_000_000.0


def _sign(template: Template) -> Event:
    return Event.create(generate_secret_key(), template.kind, template.content, template.tags)


def test_snapshot_carries_every_required_member_and_redacts_titles() -> None:
    activity = tuple(
        work_status.Activity(NOW, "message", f"read /home/user/secret{i}.txt please") for i in range(25)
    )
    template = work_status.snapshot(CHANNEL, "working", now=NOW, activity=activity, queued=3, turnId="t1")
    body = orjson.loads(template.content)
    assert template.tags == (("h", CHANNEL), ("d", CHANNEL))
    assert {k: body[k] for k in ("v", "source", "status", "queued", "turnId")} == {
        "v": 1,
        "source": "buzz-agent-harness",
        "status": "working",
        "queued": 3,
        "turnId": "t1",
    }
    assert work_status.parse_rfc3339(body["updatedAt"]) == NOW
    assert len(body["activity"]) == WORK_STATUS_MAX_ACTIVITY
    assert body["activity"][-1]["title"] == "read … please"  # the newest kept, the path gone
    assert all("/home" not in a["title"] for a in body["activity"])


def test_snapshot_refuses_an_unknown_status() -> None:
    with pytest.raises(Invalid, match="status must be one of"):
        work_status.snapshot(CHANNEL, "busy", now=NOW)


def test_read_working_on_and_freshness() -> None:
    long_title = "x" * 400
    activity = (
        work_status.Activity(NOW, "message", "fix the login bug"),
        work_status.Activity(NOW, "tool", "run tests"),
        work_status.Activity(NOW, "message", long_title),
    )
    seen = work_status.read(
        _sign(work_status.snapshot(CHANNEL, "working", now=NOW, activity=activity, queued=2))
    )
    assert seen is not None
    assert (seen.channel_id, seen.status, seen.queued) == (CHANNEL, "working", 2)
    assert seen.working_on is not None and len(seen.working_on) == 160  # the newest message, cut
    assert seen.is_working(NOW + WORK_STATUS_STALE_S)
    assert not seen.is_working(NOW + WORK_STATUS_STALE_S + 1)  # stale: not believed
    idle = work_status.read(_sign(work_status.snapshot(CHANNEL, "idle", now=NOW, queued=0)))
    assert idle is not None and not idle.is_working(NOW) and idle.is_fresh(NOW)


def test_read_ignores_what_the_relay_would_refuse() -> None:
    bad = Event.create(
        generate_secret_key(), 30181, '{"v":1,"status":"working"}', [["h", CHANNEL], ["d", "x"]]
    )
    assert work_status.read(bad) is None
    no_time = Event.create(
        generate_secret_key(), 30181, '{"v":1,"status":"working"}', [["h", CHANNEL], ["d", CHANNEL]]
    )
    seen = work_status.read(no_time)
    assert seen is not None and not seen.is_fresh(NOW)


def test_directory_status_folds_readable_fresh_snapshots() -> None:
    other = "1b0e9c4e-8b1a-4d27-9b1c-2f1d1b6a0c11"
    hidden = "2b0e9c4e-8b1a-4d27-9b1c-2f1d1b6a0c11"
    key = generate_secret_key()

    def seen(channel: str, status: str, at: float, queued: int = 0) -> work_status.Seen:
        activity = (work_status.Activity(at, "message", f"task in {channel[:2]}"),)
        template = work_status.snapshot(channel, status, now=at, activity=activity, queued=queued)
        out = work_status.read(Event.create(key, template.kind, template.content, template.tags))
        assert out is not None
        return out

    names = {CHANNEL: "eng", other: "ops"}
    snaps = [
        seen(CHANNEL, "working", NOW, queued=2),
        seen(other, "idle", NOW, queued=1),
        seen(hidden, "working", NOW, queued=5),  # not readable: never shown or counted
    ]
    assert work_status.directory_status(snaps, "online", NOW, names) == {
        "state": "working",
        "channels": [{"id": CHANNEL, "name": "eng", "working_on": "task in 0b"}],
        "queued": 3,
    }
    later = NOW + WORK_STATUS_STALE_S + 1  # every snapshot stale
    assert work_status.directory_status(snaps, "online", later, names)["state"] == "idle"
    assert work_status.directory_status(snaps, "offline", later, names) == {
        "state": "offline",
        "channels": [],
        "queued": 0,
    }
    assert work_status.directory_status([], None, NOW, names)["state"] == "unknown"
