"""What an owner can learn about their running agents (issue 14 item 12).

Status: each harness with a known owner keeps one status snapshot on the relay, a kind 30078
(NIP-78 app data) at `d` = `buzz-agent-status`, tagged `["p", <owner>]`, its content NIP-44
encrypted to the owner. It is republished at start, after every turn, every 60 s and as
`stopped` on a graceful exit:

    {"agent", "name", "state": "running"|"stopped", "started_at", "updated_at",
     "channels": [{"id", "name", "queue", "in_flight"}],
     "turns", "failures", "dead_letters", "last_turn": {"channel", "ended", "at"} | null}

`agent_status` reads every snapshot addressed to the owner; one whose `updated_at` is older
than `STALE_AFTER_S` (150 s, two missed refreshes) is reported `not_responding`.

Usage: `agent_usage` decrypts the owner's kind 44200 turn metrics (agents.md §5.1) and sums
them per agent and per channel: turns, errors (stopReason `error`), input/output/total tokens
and cost (USD). Unknown (null) values are never summed as zero: a sum is null until one turn
reported it.

Builders and aggregation are pure; the two `agent_*` functions take a `query` callable
(the HTTP bridge's `POST /query`) and the owner's secret key. The CLI only renders.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

import orjson

from buzz.core import nip44
from buzz.core.event import Event

STATUS_KIND = 30078
STATUS_D = "buzz-agent-status"
STATUS_REFRESH_S = 60.0
STALE_AFTER_S = 150
METRIC_KIND = 44200
USAGE_FIELDS = ("inputTokens", "outputTokens", "totalTokens", "costUsd")

Query = Callable[[Iterable[Mapping[str, Any]]], Awaitable[list[Event]]]


def status_event(agent_secret: str, owner: str, snapshot: Mapping[str, Any], created_at: int) -> Event:
    """The status snapshot event (encrypted to `owner`)."""
    key = nip44.get_conversation_key(agent_secret, owner)
    content = nip44.encrypt(orjson.dumps(snapshot).decode(), key)
    return Event.create(agent_secret, STATUS_KIND, content, [["d", STATUS_D], ["p", owner]], created_at)


def _decrypt(owner_secret: str, event: Event) -> dict[str, Any] | None:
    try:
        key = nip44.get_conversation_key(owner_secret, event.pubkey)
        body = orjson.loads(nip44.decrypt(event.content, key))
    except Exception:  # not for us, or not ours: skipped
        return None
    return body if isinstance(body, dict) else None


def summarize_status(owner_secret: str, events: Iterable[Event], now: int) -> dict[str, Any]:
    """`{"agents": [...]}`: the newest snapshot per agent, newest first, with `state`
    downgraded to `not_responding` when stale."""
    newest: dict[str, Event] = {}
    for ev in events:
        if ev.kind != STATUS_KIND or ev.d_tag != STATUS_D:
            continue
        cur = newest.get(ev.pubkey)
        if cur is None or (ev.created_at, cur.id) > (cur.created_at, ev.id):
            newest[ev.pubkey] = ev
    agents = []
    for pubkey, ev in newest.items():
        body = _decrypt(owner_secret, ev)
        if body is None:
            continue
        body["agent"] = pubkey
        updated = body.get("updated_at")
        if body.get("state") == "running" and (not isinstance(updated, int) or now - updated > STALE_AFTER_S):
            body["state"] = "not_responding"
        agents.append(body)
    agents.sort(key=lambda a: -(a.get("updated_at") or 0))
    return {"agents": agents}


COST_DIGITS = 10  # a summed USD cost is shown to 1e-10 dollars: no binary-float tail (0.0013739999999999998)


def _add(total: dict[str, Any], turn: Mapping[str, Any]) -> None:
    for name in USAGE_FIELDS:
        value = turn.get(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            summed = (total.get(name) or 0) + value
            total[name] = round(summed, COST_DIGITS) if name == "costUsd" else summed
        else:
            total.setdefault(name, None)


def _bucket() -> dict[str, Any]:
    return {"turns": 0, "errors": 0, **dict.fromkeys(USAGE_FIELDS)}


def summarize_usage(owner_secret: str, events: Iterable[Event], since: int | None) -> dict[str, Any]:
    """`{"since", "agents": [{"agent", "turns", "errors", <usage>, "channels": [{"channel", …}]}]}`
    from the owner's 44200 metrics; metrics that do not decrypt are skipped."""
    per_agent: dict[str, dict[str, Any]] = {}
    for ev in events:
        if ev.kind != METRIC_KIND:
            continue
        body = _decrypt(owner_secret, ev)
        if body is None:
            continue
        agent = per_agent.setdefault(ev.pubkey, {"agent": ev.pubkey, **_bucket(), "channels": {}})
        channel = agent["channels"].setdefault(
            body.get("channelId"), {"channel": body.get("channelId"), **_bucket()}
        )
        turn = body.get("turn") if isinstance(body.get("turn"), dict) else {}
        for bucket in (agent, channel):
            bucket["turns"] += 1
            bucket["errors"] += body.get("stopReason") == "error"
            _add(bucket, turn)
    agents = []
    for agent in per_agent.values():
        agent["channels"] = sorted(agent["channels"].values(), key=lambda c: -c["turns"])
        agents.append(agent)
    agents.sort(key=lambda a: -a["turns"])
    return {"since": since, "agents": agents}


async def agent_status(query: Query, owner_secret: str, owner: str, now: int | None = None) -> dict[str, Any]:
    """Status snapshots of the owner's agents. Raises what `query` raises."""
    events = await query([{"kinds": [STATUS_KIND], "#p": [owner], "#d": [STATUS_D]}])
    return summarize_status(owner_secret, events, int(time.time()) if now is None else now)


async def agent_usage(
    query: Query, owner_secret: str, owner: str, since: int | None = None
) -> dict[str, Any]:
    """Turn-metric totals of the owner's agents since `since` (unix seconds; None = all)."""
    flt: dict[str, Any] = {"kinds": [METRIC_KIND], "#p": [owner]}
    if since is not None:
        flt["since"] = since
    return summarize_usage(owner_secret, await query([flt]), since)


SINCE_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_since(text: str, now: int) -> int:
    """`--since`: unix seconds, or a duration back from `now` (`90m`, `24h`, `7d`).
    Raises ValueError."""
    value = text.strip().lower()
    if value.isdigit():
        return int(value)
    if len(value) >= 2 and value[:-1].isdigit() and value[-1] in SINCE_UNITS:
        return now - int(value[:-1]) * SINCE_UNITS[value[-1]]
    raise ValueError(f"--since must be unix seconds or a duration like 24h or 7d, got {text!r}")


# -- table rows for `--format table` -------------------------------------------------------------
STATUS_COLUMNS = ("agent", "name", "state", "channels", "queue", "turns", "failures", "last turn")
USAGE_COLUMNS = ("agent", "channel", "turns", "errors", "input", "output", "total", "cost usd")


def _text(value: Any) -> str:
    return "-" if value is None else f"{value:.4f}" if isinstance(value, float) else str(value)


def _utc(at: Any) -> str:
    """Unix seconds → ISO-8601 UTC (`2026-11-30T08:36:16Z`) for people; anything else as is."""
    if isinstance(at, int | float) and not isinstance(at, bool):
        return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return _text(at)


def status_rows(report: Mapping[str, Any]) -> list[list[str]]:
    rows = []
    for a in report["agents"]:
        channels = a.get("channels") or []
        last = a.get("last_turn") or {}
        rows.append([
            a["agent"][:12],
            _text(a.get("name")),
            _text(a.get("state")),
            ", ".join(c.get("name") or c.get("id", "") for c in channels) or "-",
            str(sum(int(c.get("queue") or 0) for c in channels)),
            _text(a.get("turns")),
            _text(a.get("failures")),
            f"{last.get('ended')} @ {_utc(last.get('at'))}" if last else "-",
        ])  # fmt: skip
    return rows


def usage_rows(report: Mapping[str, Any]) -> list[list[str]]:
    rows = []
    for a in report["agents"]:
        for c in [{"channel": "(all)", **a}, *a["channels"]]:
            rows.append([
                a["agent"][:12], _text(c["channel"]), str(c["turns"]), str(c["errors"]),
                _text(c["inputTokens"]), _text(c["outputTokens"]), _text(c["totalTokens"]), _text(c["costUsd"]),
            ])  # fmt: skip
    return rows
