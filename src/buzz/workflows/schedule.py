"""Schedules: buzz's cron dialect and fixed intervals, in UTC, as pure functions (§3.4, §12).

Buzz's cron is not Unix cron: seconds come first, a year may come last, day of week runs
1 (Sunday) to 7 (Saturday), and day of month AND day of week must both match. `parse_cron`
reads each field by that grammar into the set of values it names and hands croniter an
explicit, Unix-numbered expression with `day_or=False`, so croniter only does the calendar
search (month lengths, leap years, the next/previous instant); its own field parsing and day
numbering never see the user's text.

`next_fire(schedule, after)` is the first instant strictly after `after`; `due(schedule,
last, now)` is what the scheduler claims at a tick and what it logs as missed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import pairwise

from croniter import CroniterBadDateError, croniter

from buzz.workflows.limits import (
    CRON_HORIZON_YEARS,
    CRON_YEAR_MAX,
    CRON_YEAR_MIN,
    INTERVAL_MAX_S,
    INTERVAL_MIN_S,
    MISSED_COUNT_MAX,
    SCHEDULE_GRACE_S,
)

_MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
           "november", "december"]  # fmt: skip
_DAYS = ["sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"]


def _names(full: list[str], first: int, extra: dict[str, int] | None = None) -> dict[str, int]:
    table = {name: first + i for i, name in enumerate(full)}
    table.update({name[:3]: first + i for i, name in enumerate(full)})
    table.update(extra or {})
    return table


@dataclass(frozen=True)
class _Field:
    name: str
    low: int
    high: int
    names: dict[str, int]
    question: bool  # `?` accepted as `*`


# The seven fields in order (§3.4 item 1). Day of week is buzz's numbering: 1 = Sunday.
FIELDS = (
    _Field("second", 0, 59, {}, False),
    _Field("minute", 0, 59, {}, False),
    _Field("hour", 0, 23, {}, False),
    _Field("day of month", 1, 31, {}, True),
    _Field("month", 1, 12, _names(_MONTHS, 1), False),
    _Field("day of week", 1, 7, _names(_DAYS, 1, {"tues": 3, "thurs": 5}), True),
    _Field("year", CRON_YEAR_MIN, CRON_YEAR_MAX, {}, False),
)
_VALUE = re.compile(r"[0-9]+|[A-Za-z]+")


class ScheduleError(ValueError):
    """An invalid schedule; the message is the validator's reason."""


def _value(field: _Field, text: str) -> int:
    if not _VALUE.fullmatch(text):
        raise ScheduleError(f"cron {field.name} value {text!r} is not valid")
    if text.isdigit():
        value = int(text)
    elif text.lower() in field.names:
        value = field.names[text.lower()]
    else:
        raise ScheduleError(f"cron {field.name} value {text!r} is not valid")
    if not field.low <= value <= field.high:
        raise ScheduleError(f"cron {field.name} value {value} is outside {field.low}-{field.high}")
    return value


def _item(field: _Field, text: str) -> set[int]:
    base, slash, step_text = text.partition("/")
    step = 1
    if slash:
        if not step_text.isdigit() or int(step_text) < 1:
            raise ScheduleError(f"cron {field.name} step {step_text!r} must be a whole number of at least 1")
        step = int(step_text)
    if base == "*" or (base == "?" and field.question):
        low, high = field.low, field.high
    elif "-" in base:
        a, _, b = base.partition("-")
        low, high = _value(field, a), _value(field, b)
        if low > high:
            raise ScheduleError(f"cron {field.name} range {base} runs backwards")
    else:
        low = _value(field, base)
        high = field.high if slash else low  # `x/n` runs from x to the maximum
    return set(range(low, high + 1, step))


def _field(field: _Field, text: str) -> frozenset[int]:
    values: set[int] = set()
    for item in text.split(","):
        values |= _item(field, item)
    return frozenset(values)


@dataclass(frozen=True)
class Cron:
    """A parsed cron schedule: the values each of the seven fields names."""

    expression: str
    fields: tuple[frozenset[int], ...]
    field_count: int  # as written: 5, 6 or 7

    def croniter_expression(self) -> str:
        """The same instants in croniter's seconds-first, Unix-numbered form."""
        parts = []
        for spec, values in zip(FIELDS, self.fields, strict=True):
            if spec.name == "day of week":
                values = frozenset(v - 1 for v in values)  # buzz 1 = Sunday → Unix 0 = Sunday
                full = len(values) == 7
            else:
                full = len(values) == spec.high - spec.low + 1
            parts.append("*" if full else ",".join(str(v) for v in sorted(values)))
        return " ".join(parts)


@dataclass(frozen=True)
class Interval:
    """A fixed interval: instants are the multiples of `seconds` since the Unix epoch."""

    seconds: int


Schedule = Cron | Interval


def parse_cron(expression: str, now: int) -> Cron:
    """Parse buzz's cron (§3.4 items 1–4). `now` anchors the "never fires" check. Raises ScheduleError."""
    words = expression.split()
    if len(words) == 5:
        words = ["0", *words, "*"]
    elif len(words) == 6:
        words = [*words, "*"]
    elif len(words) != 7:
        raise ScheduleError(f"cron needs 5, 6 or 7 fields, got {len(words)}")
    fields = tuple(_field(spec, word) for spec, word in zip(FIELDS, words, strict=True))
    if len(fields[0]) != 1 or not re.fullmatch(r"[0-9]+", words[0]):
        raise ScheduleError("cron fires more than once a minute")
    cron = Cron(expression, fields, len(expression.split()))
    try:
        _iter(cron, now).get_next(float)
    except CroniterBadDateError:
        raise ScheduleError("cron never fires") from None
    return cron


def parse_interval(seconds: int) -> Interval:
    if not INTERVAL_MIN_S <= seconds <= INTERVAL_MAX_S:
        raise ScheduleError(f"interval must be between {INTERVAL_MIN_S} and {INTERVAL_MAX_S} seconds")
    return Interval(seconds)


def _iter(cron: Cron, start: float) -> croniter:
    return croniter(
        cron.croniter_expression(),
        start,
        day_or=False,
        second_at_beginning=True,
        max_years_between_matches=CRON_HORIZON_YEARS,
    )


def next_fire(schedule: Schedule, after: int) -> int | None:
    """The first instant strictly after `after` (Unix seconds, UTC), None when there is none."""
    if isinstance(schedule, Interval):
        return (after // schedule.seconds + 1) * schedule.seconds
    try:
        return int(_iter(schedule, after).get_next(float))
    except CroniterBadDateError:
        return None


def last_fire(schedule: Schedule, at_or_before: int) -> int | None:
    """The newest instant ≤ `at_or_before`, None when there is none in the horizon."""
    if isinstance(schedule, Interval):
        return at_or_before // schedule.seconds * schedule.seconds
    try:
        return int(_iter(schedule, at_or_before + 1).get_prev(float))
    except CroniterBadDateError:
        return None


def next_fires(schedule: Schedule, after: int, count: int) -> list[int]:
    """Up to `count` instants after `after` (the validator's `next_fires` preview)."""
    out: list[int] = []
    t: int | None = after
    while len(out) < count:
        t = next_fire(schedule, t)
        if t is None:
            break
        out.append(t)
    return out


@dataclass(frozen=True)
class Due:
    """What the scheduler does at one tick for one workflow (§12 item 2)."""

    fire: int | None  # the instant to claim, or None
    missed: int  # instants in (last, now] that will never run (capped at MISSED_COUNT_MAX)
    missed_first: int | None
    missed_last: int | None


def due(schedule: Schedule, last: int, now: int, grace: int = SCHEDULE_GRACE_S) -> Due:
    """The newest instant t with last < t ≤ now is claimed when now − t ≤ grace; older ones are missed."""
    newest = last_fire(schedule, now)
    if newest is None or newest <= last:
        return Due(None, 0, None, None)
    fire = newest if now - newest <= grace else None
    missed_upto = newest if fire is None else newest - 1
    first = next_fire(schedule, last)
    if first is None or first > missed_upto:
        return Due(fire, 0, None, None)
    if isinstance(schedule, Interval):
        count = (missed_upto - first) // schedule.seconds + 1
        latest = first + (count - 1) * schedule.seconds
        return Due(fire, min(count, MISSED_COUNT_MAX), first, latest)
    count, latest, t = 0, first, first
    while t is not None and t <= missed_upto and count < MISSED_COUNT_MAX:
        count, latest = count + 1, t
        t = next_fire(schedule, t)
    return Due(fire, count, first, latest)


def is_more_than_hourly(schedule: Schedule, now: int) -> bool:
    """The editor's warning (§18 item 2): two of the next instants are less than an hour apart."""
    fires = next_fires(schedule, now, 4)
    return any(b - a < 3600 for a, b in pairwise(fires))


def numeric_day_of_week(expression: str) -> bool:
    """A 5-field cron whose day of week is written with digits (§3.4 item 2's warning)."""
    words = expression.split()
    return len(words) == 5 and any(ch.isdigit() for ch in words[4])
