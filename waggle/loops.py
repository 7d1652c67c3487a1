"""The background loops of a serving process, started and stopped in one place.

Each loop does one round of its work, then waits; the wait is read after every round, so a reload that changes
it applies from the next wait on. A round that fails is logged and the loop goes on: a loop never dies of its
work. What a round does stays with its owner; this module only runs them:

- the database listing (``database-resolution: MANUAL``): every member's databases listed again and a new map
  served (:meth:`waggle.runtime.Runtime.refresh_databases`; the first listing is made before serving, so this
  loop waits first);
- remote databases: the links and data connectors reread from the primary
  (:meth:`waggle.routes.links.LinksService.refresh`).

The health checks (one loop per metastore, :class:`waggle.upstream.health.Health`) and the watch on ticket
renewal and certificate expiry (:class:`waggle.security.status.SecurityWatch`) keep loops of their own (a
health check also wakes when a call fails, and a supervisor runs both without serving);
:meth:`waggle.runtime.Runtime.start` and ``close`` start and stop them beside these.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import gevent

from waggle.common.logging import get_logger

log = get_logger("waggle.federation")


@dataclass(frozen=True, slots=True)
class Loop:
    #: the event logged when a round fails
    failed: str
    #: one round
    work: Callable[[], None]
    #: how long to wait between rounds (read after each round)
    seconds: Callable[[], float]
    #: wait before the first round (its first round was made before the loop began)
    wait_first: bool = False


class Loops:
    def __init__(self, loops: Sequence[Loop]) -> None:
        self.loops = tuple(loops)
        self._tasks: list[gevent.Greenlet] = []

    def start(self) -> None:
        self._tasks = [gevent.spawn(self._run, loop) for loop in self.loops]

    def close(self) -> None:
        for task in self._tasks:
            task.kill(block=False)
        self._tasks = []

    @staticmethod
    def _run(loop: Loop) -> None:
        if loop.wait_first:
            gevent.sleep(loop.seconds())
        while True:
            try:
                loop.work()
            except Exception as exc:  # never let the loop die
                log.error(loop.failed, error=repr(exc))
            gevent.sleep(loop.seconds())
