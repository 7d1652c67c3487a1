"""A write-rate limit on one target metastore, shared by every job and writer thread of one sync run.

A token bucket that holds one token, refilled at ``per_second``: writes are spread evenly, one every
``1 / per_second`` seconds at most, with no burst after a quiet spell. Each write takes its turn under a lock
(first come, first served) and sleeps outside it, so writer threads never hold each other up beyond their turn.
``per_second`` 0 is no limit: writes are only counted.

The throttle also keeps what the report shows: how many writes started, when the first and the last started,
and the most that started within any one second.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

#: Rounding slack when counting writes within one second: writes exactly ``1 / per_second`` apart, ``per_second``
#: of them, fit in one second however the float arithmetic falls.
_SLACK = 1e-6


@dataclass(frozen=True, slots=True)
class WriteStats:
    """The writes made to one target metastore, as the report shows them."""

    metastore: str
    writes: int
    seconds: float  # from the start of the first write to the start of the last
    mean_per_second: float  # writes per second over those seconds (all of them, when they fit in one second)
    peak_per_second: int  # the most writes started within any one second
    limit_per_second: float  # 0: no limit


class WriteThrottle:
    def __init__(self, metastore: str, per_second: float, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if per_second < 0:
            raise ValueError(f"per_second must be >= 0, not {per_second}")
        self.metastore = metastore
        self.per_second = per_second
        self._interval = 1.0 / per_second if per_second else 0.0
        self._clock, self._sleep = clock, sleep
        self._lock = threading.Lock()
        self._next = float("-inf")  # the earliest start of the next write (the bucket's token is back)
        self._writes = 0
        self._first = self._last = 0.0
        self._window: deque[float] = deque()  # starts within the last second
        self._peak = 0

    def acquire(self) -> None:
        """Wait for this write's turn (none without a limit) and count it."""
        with self._lock:
            now = self._clock()
            start = max(now, self._next)
            self._next = start + self._interval
            self._count(start)
        if start > now:
            self._sleep(start - now)

    def _count(self, start: float) -> None:
        if not self._writes:
            self._first = start
        self._writes += 1
        self._last = start
        self._window.append(start)
        while start - self._window[0] >= 1.0 - _SLACK:
            self._window.popleft()
        self._peak = max(self._peak, len(self._window))

    def stats(self) -> WriteStats:
        with self._lock:
            span = self._last - self._first
            # n writes at an even pace over `span` seconds are n - 1 intervals; within one second, all n count
            mean = (self._writes - 1) / span if span >= 1.0 - _SLACK else float(self._writes)
            return WriteStats(self.metastore, self._writes, round(span, 3), round(mean, 2), self._peak,
                              self.per_second)
