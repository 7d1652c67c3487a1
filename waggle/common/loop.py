"""Event-loop blocking, measured from inside: a timer that should fire every ``interval`` and how late it was.

While the loop is late nobody is served (a CPU-heavy rewrite, a blocking call that escaped monkey-patching),
so the lag is what every client waited on top of its own call.
"""

from __future__ import annotations

import time

import gevent

from waggle.common import metrics
from waggle.common.logging import get_logger

log = get_logger("waggle.loop")

#: a lag above this counts as blocked; one above ``REPORT`` is also logged
BLOCKED = 0.1
REPORT = 1.0


def watch_loop(interval: float = 0.25) -> None:
    while True:
        due = time.perf_counter() + interval
        gevent.sleep(interval)
        lag = max(0.0, time.perf_counter() - due)
        metrics.LOOP_LAG.observe(lag)
        if lag > BLOCKED:
            metrics.LOOP_BLOCKED.inc()
            if lag > REPORT:
                log.warning("loop.blocked", seconds=round(lag, 3))
