"""Read timeouts for upstream calls without a timer per call.

A socket timeout under gevent arms and disarms an event-loop timer on every blocking read, which measured as
the largest single cost of relaying a small call. Instead, each call records its deadline and one watchdog
greenlet checks the calls in flight a few times a second; a call past its deadline has its socket shut
down, which wakes the blocked read at once. Timeouts are therefore honoured to within ``resolution``.
"""

from __future__ import annotations

import socket
import time
from typing import Protocol

import gevent

from waggle.config.timing import DEADLINE_RESOLUTION_SECONDS

_monotonic = time.monotonic


class Watched(Protocol):
    deadline: float
    timed_out: bool

    def abort(self) -> None: ...


class Deadlines:
    def __init__(self, resolution: float = DEADLINE_RESOLUTION_SECONDS) -> None:
        self.resolution = resolution
        self._in_flight: set[Watched] = set()
        self._watchdog: gevent.Greenlet | None = None

    def watch(self, call: Watched, timeout: float) -> None:
        call.deadline = _monotonic() + timeout
        self._in_flight.add(call)
        if self._watchdog is None:
            self._watchdog = gevent.spawn(self._run)

    def done(self, call: Watched) -> None:
        self._in_flight.discard(call)

    def expire(self, now: float) -> int:
        """Abort every call whose deadline has passed; return how many."""
        late = [c for c in self._in_flight if c.deadline <= now]
        for call in late:
            self._in_flight.discard(call)
            call.timed_out = True
            call.abort()
        return len(late)

    def _run(self) -> None:
        while True:
            gevent.sleep(self.resolution)
            if self._in_flight:
                self.expire(time.monotonic())

    def close(self) -> None:
        if self._watchdog is not None:
            self._watchdog.kill(block=False)
            self._watchdog = None


def shutdown_socket(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
