"""Buzz's cron and intervals (spec/workflows.md §3.4, §12; checklist 8–10, 77, 78)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from buzz.workflows.schedule import (
    Interval,
    ScheduleError,
    due,
    last_fire,
    next_fire,
    next_fires,
    parse_cron,
    parse_interval,
)
from tests.workflows.support import NOW, utc


def weekday(t: int) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%a %H:%M:%S")


def test_checklist_8_day_of_week_is_buzz_numbered() -> None:
    sundays = next_fires(parse_cron("0 9 * * 1", NOW), NOW, 3)
    assert [weekday(t) for t in sundays] == ["Sun 09:00:00"] * 3
    assert [weekday(t) for t in next_fires(parse_cron("0 9 * * MON", NOW), NOW, 2)] == ["Mon 09:00:00"] * 2
    assert [weekday(t) for t in next_fires(parse_cron("0 9 * * 7", NOW), NOW, 1)] == ["Sat 09:00:00"]
    with pytest.raises(ScheduleError, match="day of week value 0 is outside 1-7"):
        parse_cron("0 9 * * 0", NOW)


def test_day_names_full_and_short_any_case() -> None:
    for spelling in ("tues", "TUE", "Tuesday", "3"):
        assert weekday(next_fire(parse_cron(f"0 12 * * {spelling}", NOW), NOW) or 0) == "Tue 12:00:00"
    assert weekday(next_fire(parse_cron("0 12 * * thurs", NOW), NOW) or 0) == "Thu 12:00:00"
    assert next_fire(parse_cron("0 0 1 March *", NOW), NOW) == utc(2024, 3, 1)


def test_checklist_9_day_of_month_and_day_of_week_combine_with_and() -> None:
    fires = next_fires(parse_cron("0 9 1 * MON", NOW), NOW - 1, 3)
    assert fires == [utc(2024, 1, 1, 9), utc(2024, 4, 1, 9), utc(2024, 7, 1, 9)]  # Mondays that are the 1st


def test_checklist_10_five_six_seven_fields_agree() -> None:
    five = next_fires(parse_cron("30 9 * * MON-FRI", NOW), NOW, 10)
    six = next_fires(parse_cron("0 30 9 * * MON-FRI", NOW), NOW, 10)
    seven = next_fires(parse_cron("0 30 9 * * MON-FRI *", NOW), NOW, 10)
    assert five == six == seven and len(five) == 10


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("0 9 * *", "5, 6 or 7 fields, got 4"),
        ("0 0 9 * * * * *", "5, 6 or 7 fields, got 8"),
        ("*/10 * * * * *", "more than once a minute"),
        ("0-5 * * * * *", "more than once a minute"),
        ("0 L * * *", "not valid"),
        ("0 9 1W * *", "not valid"),
        ("0 9 * * 2#1", "not valid"),
        ("0 9 5-1 * *", "runs backwards"),
        ("0 9 * * */0", "step '0'"),
        ("0 24 * * *", "outside 0-23"),
        ("0 0 12 * * * 1969", "outside 1970-2100"),
        ("0 0 12 * * * 2023", "cron never fires"),
        ("0 0 0 30 2 *", "cron never fires"),
        ("0 9 ? ? ? *", "not valid"),  # ? only in day of month and day of week
    ],
)
def test_invalid_crons(expression: str, message: str) -> None:
    with pytest.raises(ScheduleError, match=message):
        parse_cron(expression, NOW)


def test_steps_ranges_lists_and_question_marks() -> None:
    cron = parse_cron("0 5/20 8-9 ? * ?", NOW)
    assert [weekday(t) for t in next_fires(cron, NOW, 4)] == [
        "Mon 08:05:00", "Mon 08:25:00", "Mon 08:45:00", "Mon 09:05:00"
    ]  # fmt: skip
    assert next_fires(parse_cron("0 0 12 1,15 * *", NOW), NOW, 2) == [
        utc(2024, 1, 1, 12),
        utc(2024, 1, 15, 12),
    ]
    assert next_fire(parse_cron("0 0 0 1 1 * 2028", NOW), NOW) == utc(2028, 1, 1)
    with pytest.raises(ScheduleError, match="never fires"):  # beyond the 5-year horizon
        parse_cron("0 0 0 1 1 * 2030", NOW)


def test_next_fire_is_strictly_after() -> None:
    cron = parse_cron("0 9 * * *", NOW)
    assert next_fire(cron, utc(2024, 1, 1, 9)) == utc(2024, 1, 2, 9)
    assert last_fire(cron, utc(2024, 1, 1, 9)) == utc(2024, 1, 1, 9)
    assert next_fire(Interval(3600), utc(2024, 1, 1, 9)) == utc(2024, 1, 1, 10)


def test_checklist_78_interval_instants_are_epoch_multiples() -> None:
    saved = utc(2024, 1, 1, 10, 0, 30)
    assert next_fire(parse_interval(3600), saved) == utc(2024, 1, 1, 11)
    with pytest.raises(ScheduleError):
        parse_interval(59)
    with pytest.raises(ScheduleError):
        parse_interval(31_536_001)


def test_checklist_77_due_claims_the_newest_instant_and_counts_the_missed() -> None:
    hourly = parse_interval(3600)
    last = utc(2024, 1, 1, 10)
    # stopped across 11:00, 12:00 and 13:00; back at 14:00:20: 14:00 fires, three were missed
    assert due(hourly, last, utc(2024, 1, 1, 14, 0, 20)) == due(hourly, last, utc(2024, 1, 1, 14, 0, 20))
    d = due(hourly, last, utc(2024, 1, 1, 14, 0, 20))
    assert (d.fire, d.missed, d.missed_first, d.missed_last) == (
        utc(2024, 1, 1, 14), 3, utc(2024, 1, 1, 11), utc(2024, 1, 1, 13)
    )  # fmt: skip
    late = due(hourly, last, utc(2024, 1, 1, 14, 5))  # past the 60 s grace: nothing fires
    assert late.fire is None and late.missed == 4
    assert due(hourly, utc(2024, 1, 1, 14), utc(2024, 1, 1, 14, 0, 30)).fire is None  # already claimed
    minutely = parse_cron("* * * * *", NOW)
    d = due(minutely, NOW, NOW + 3600 + 30)
    assert d.fire == NOW + 3600 and d.missed == 59
