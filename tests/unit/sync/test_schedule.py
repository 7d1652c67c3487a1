"""Fire times of scheduled policies: ``every`` intervals and five-field cron expressions (UTC)."""

from __future__ import annotations

import datetime as dt

import pytest

from waggle.config.cron import parse_cron
from waggle.sync.schedule import Schedule

UTC = dt.UTC


def at(*parts: int) -> dt.datetime:
    return dt.datetime(*parts, tzinfo=UTC)


def ts(*parts: int) -> float:
    return at(*parts).timestamp()


def test_every_fires_at_once_then_at_its_interval():
    s = Schedule(every=60, start=1000.0)
    assert s.first(1000.0) == 1000.0
    assert s.next_after(1000.0) == 1060.0
    assert s.next_after(1059.9) == 1060.0
    assert s.next_after(1060.0) == 1120.0


def test_an_overrun_folds_missed_fire_times_into_one_at_once():
    s = Schedule(every=60, start=0.0)
    assert s.due(fired=0.0, now=30.0) == 60.0  # on time: the next tick
    assert s.due(fired=0.0, now=250.0) == 250.0  # overran four ticks: one run at once, not four


@pytest.mark.parametrize("expr, after, expected", [
    ("*/15 * * * *", at(2026, 1, 1, 10, 7), at(2026, 1, 1, 10, 15)),
    ("*/15 * * * *", at(2026, 1, 1, 10, 15), at(2026, 1, 1, 10, 30)),  # strictly after
    ("*/15 * * * *", at(2026, 1, 1, 23, 50), at(2026, 1, 2, 0, 0)),
    ("0 2 * * *", at(2026, 1, 1, 3, 0), at(2026, 1, 2, 2, 0)),
    ("30 9 * * mon-fri", at(2026, 11, 27, 10, 0), at(2026, 11, 30, 9, 30)),  # Friday after 9:30 -> Monday
    ("0 0 1 jan *", at(2026, 3, 1), at(2027, 1, 1)),
    ("0 0 29 2 *", at(2026, 3, 1), at(2028, 2, 29)),  # the next leap day
    ("0 12 13 * 5", at(2026, 2, 1), at(2026, 2, 6, 12, 0)),  # day 13 OR a Friday: Friday the 6th comes first
    ("0 0 * * 7", at(2026, 11, 25), at(2026, 11, 29)),  # 7 is Sunday too
    ("5-10/5,40 * * * *", at(2026, 1, 1, 0, 11), at(2026, 1, 1, 0, 40)),
    ("10/20 * * * *", at(2026, 1, 1, 0, 31), at(2026, 1, 1, 0, 50)),
])
def test_cron_next_fire(expr, after, expected):
    assert parse_cron(expr).next_after(after) == expected


def test_cron_schedule_in_epoch_seconds():
    s = Schedule(cron="0 * * * *")
    assert s.first(ts(2026, 1, 1, 10, 0, 0)) == ts(2026, 1, 1, 11, 0)
    assert s.next_after(ts(2026, 1, 1, 10, 30)) == ts(2026, 1, 1, 11, 0)


@pytest.mark.parametrize("expr, reason", [
    ("* * * *", "expected 5 fields, not 4"),
    ("* 24 * * *", "hour: 24 is out of range 0..23"),
    ("*/0 * * * *", "the step must be a positive number"),
    ("10-5 * * * *", "the range runs backwards"),
    ("* * * foo *", "month: 'foo' is not a number nor a name"),
    ("0 0 31 4 *", "the schedule never fires"),
])
def test_cron_refuses_with_the_field_at_fault(expr, reason):
    with pytest.raises(ValueError, match=reason):
        parse_cron(expr)


def test_a_schedule_is_every_or_cron():
    with pytest.raises(ValueError):
        Schedule()
    with pytest.raises(ValueError):
        Schedule(every=1, cron="* * * * *")
