"""Five-field cron expressions (``minute hour day-of-month month day-of-week``), as the sync file's ``cron`` key
spells a policy's schedule, and the next time one fires.

Pure functions of text and time, raising ``ValueError`` for an expression they do not accept (the sync file's
validator names the file, the key and the value). The fields follow the classic cron(8) rules: ``*``, numbers,
ranges ``a-b``, steps ``*/n`` and ``a-b/n``, lists ``a,b``, month and weekday names (``jan``, ``mon``), Sunday as 0
or 7; when both day-of-month and day-of-week are restricted, a day matching either fires. Times are UTC.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
#: (name, low, high, names) of each field, in order
_FIELDS = (("minute", 0, 59, ()), ("hour", 0, 23, ()), ("day-of-month", 1, 31, ()), ("month", 1, 12, _MONTHS),
           ("day-of-week", 0, 7, _DAYS))
#: how far ahead a schedule is looked at before it is declared one that never fires (30 February, say)
_HORIZON_DAYS = 366 * 5


@dataclass(frozen=True, slots=True)
class Cron:
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    any_day: bool  # day-of-month is '*'
    any_weekday: bool  # day-of-week is '*'

    def day_matches(self, day: dt.date) -> bool:
        if day.month not in self.months:
            return False
        by_day = day.day in self.days
        by_weekday = (day.isoweekday() % 7) in self.weekdays
        if self.any_day:
            return by_weekday
        if self.any_weekday:
            return by_day
        return by_day or by_weekday

    def next_after(self, after: dt.datetime) -> dt.datetime:
        """The first minute strictly after ``after`` (UTC) at which this schedule fires."""
        start = after.astimezone(dt.UTC).replace(second=0, microsecond=0) + dt.timedelta(minutes=1)
        day = start.date()
        for _ in range(_HORIZON_DAYS):
            if self.day_matches(day):
                first = start if day == start.date() else None
                for hour in sorted(self.hours):
                    if first is not None and hour < first.hour:
                        continue
                    for minute in sorted(self.minutes):
                        if first is not None and hour == first.hour and minute < first.minute:
                            continue
                        return dt.datetime(day.year, day.month, day.day, hour, minute, tzinfo=dt.UTC)
            day += dt.timedelta(days=1)
        raise ValueError("the schedule never fires")


def parse_cron(text: str) -> Cron:
    fields = text.split()
    if len(fields) != 5:
        raise ValueError(f"expected 5 fields, not {len(fields)}")
    values = [_field(f, *spec) for f, spec in zip(fields, _FIELDS, strict=True)]
    weekdays = frozenset(d % 7 for d in values[4])
    minutes, hours, days, months = (frozenset(v) for v in values[:4])
    cron = Cron(minutes, hours, days, months, weekdays, fields[2] == "*", fields[4] == "*")
    cron.next_after(dt.datetime(2000, 1, 1, tzinfo=dt.UTC))  # one that never fires is refused
    return cron


def _field(text: str, name: str, low: int, high: int, names: tuple[str, ...]) -> set[int]:
    out: set[int] = set()
    for part in text.split(","):
        base, _, step_text = part.partition("/")
        step = 1
        if step_text:
            if not step_text.isdigit() or int(step_text) == 0:
                raise ValueError(f"{name}: '{part}': the step must be a positive number")
            step = int(step_text)
        if base == "*":
            first, last = low, high
        elif "-" in base:
            a, _, b = base.partition("-")
            first, last = _value(a, name, low, high, names), _value(b, name, low, high, names)
            if first > last:
                raise ValueError(f"{name}: '{part}': the range runs backwards")
        else:
            first = last = _value(base, name, low, high, names)
            if step_text:
                last = high  # 'a/n': from a to the end
        out.update(range(first, last + 1, step))
    return out


def _value(text: str, name: str, low: int, high: int, names: tuple[str, ...]) -> int:
    lowered = text.lower()
    if lowered in names:
        return names.index(lowered) + (1 if name == "month" else 0)
    if not text.isdigit():
        raise ValueError(f"{name}: '{text}' is not a number" + (f" nor a name ({', '.join(names)})" if names else ""))
    n = int(text)
    if not low <= n <= high:
        raise ValueError(f"{name}: {n} is out of range {low}..{high}")
    return n
