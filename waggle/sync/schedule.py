"""When a scheduled policy runs next: ``every`` (an interval) or ``cron`` (:mod:`waggle.config.cron`), as Hive's
scheduled queries fire (``ScheduledQueryExecutionService``, ``every 15 minutes`` or a Quartz cron).

An ``every`` policy fires at its interval counted from the service's start (a restart does not wait a whole
interval: the first run is at once, as a new policy's bootstrap should be); a ``cron`` policy at the schedule's
minutes, UTC. A run that overruns its next fire time is followed by one at once, not by a pile of missed ones.
Pure: times are passed in (epoch seconds).
"""

from __future__ import annotations

import datetime as dt
import math

from waggle.config.cron import Cron, parse_cron


class Schedule:
    def __init__(self, every: float | None = None, cron: str | None = None, start: float = 0.0) -> None:
        if (every is None) == (cron is None):
            raise ValueError("a schedule is 'every' or 'cron'")
        self.every = every
        self.cron: Cron | None = parse_cron(cron) if cron is not None else None
        self.start = start

    def first(self, now: float) -> float:
        """The first fire time of a policy started at ``now``: at once for ``every``, the next cron minute."""
        return now if self.every is not None else self.next_after(now)

    def next_after(self, last: float) -> float:
        """The first fire time strictly after ``last``."""
        if self.every is not None:
            ticks = math.floor((last - self.start) / self.every) + 1
            return self.start + ticks * self.every
        assert self.cron is not None
        return self.cron.next_after(dt.datetime.fromtimestamp(last, dt.UTC)).timestamp()

    def due(self, fired: float, now: float) -> float:
        """When the run after one that started at ``fired`` and ended at ``now`` fires: the next fire time after
        ``fired``, or at once when the run overran it (missed fire times fold into one)."""
        following = self.next_after(fired)
        return following if following > now else now
