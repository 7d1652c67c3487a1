"""Read timeouts for upstream calls without a timer per call, and the calls that wait too long on a metastore.

A socket timeout under gevent arms and disarms an event-loop timer on every blocking read, which measured as
the largest single cost of relaying a small call. Instead, each call records its deadline and one watchdog
greenlet checks the calls in flight a few times a second; a call past its deadline has its socket shut
down, which wakes the blocked read at once. Timeouts are therefore honoured to within ``resolution``.

The same rounds find calls that have waited ``suspect_after`` seconds on their metastore (a call whose whole
timeout is shorter is never one): :attr:`Deadlines.on_slow` is told the metastore's name, once a round, and
again every ``suspect_after`` while such a call waits (the health checks decide whether it is hung). When a
metastore is found down, :meth:`Deadlines.release` lets every call waiting on it go at once.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Protocol

import gevent

from waggle.config.timing import DEADLINE_RESOLUTION_SECONDS

_monotonic = time.monotonic


class Watched(Protocol):
    member: str
    deadline: float
    suspect_at: float
    timed_out: bool
    released: str

    def abort(self) -> None: ...


class Deadlines:
    def __init__(self, resolution: float = DEADLINE_RESOLUTION_SECONDS) -> None:
        self.resolution = resolution
        #: seconds a call may wait before its metastore is suspected (set by the health checks)
        self.suspect_after = math.inf
        #: told the name of a metastore a call has waited on for ``suspect_after`` seconds
        self.on_slow: Callable[[str], None] | None = None
        self._in_flight: set[Watched] = set()
        self._watchdog: gevent.Greenlet | None = None

    def watch(self, call: Watched, timeout: float) -> None:
        now = _monotonic()
        call.deadline = now + timeout
        call.suspect_at = now + self.suspect_after if timeout > self.suspect_after else math.inf
        self._in_flight.add(call)
        if self._watchdog is None:
            self._watchdog = gevent.spawn(self._run)

    def done(self, call: Watched) -> None:
        self._in_flight.discard(call)

    def expire(self, now: float) -> int:
        """Abort every call whose deadline has passed (return how many), and tell :attr:`on_slow` of the
        metastores that calls have waited on too long."""
        late: list[Watched] = []
        slow: set[str] = set()
        for call in self._in_flight:
            if call.deadline <= now:
                late.append(call)
            elif call.suspect_at <= now:
                slow.add(call.member)
                call.suspect_at = now + self.suspect_after
        for call in late:
            self._in_flight.discard(call)
            call.timed_out = True
            call.abort()
        if slow and self.on_slow is not None:
            for member in slow:
                self.on_slow(member)
        return len(late)

    def release(self, member: str, reason: str) -> int:
        """Let every call waiting on ``member`` go now (it was found down: ``reason``); return how many."""
        waiting = [call for call in self._in_flight if call.member == member]
        for call in waiting:
            self._in_flight.discard(call)
            call.released = reason or "down"
            call.abort()
        return len(waiting)

    def _run(self) -> None:
        while True:
            gevent.sleep(self.resolution)
            if self._in_flight:
                self.expire(time.monotonic())

    def close(self) -> None:
        if self._watchdog is not None:
            self._watchdog.kill(block=False)
            self._watchdog = None
