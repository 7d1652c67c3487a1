"""Event-loop blocking, measured from inside: a timer that should fire every ``interval`` and how late it was.

While the loop is late nobody is served (a CPU-heavy rewrite, a blocking call that escaped monkey-patching),
so the lag is what every client waited on top of its own call.
"""

from __future__ import annotations

import time

import gevent

from waggle.common import metrics
from waggle.common.logging import get_logger
from waggle.config.timing import LOOP_BLOCKED_SECONDS, LOOP_REPORT_SECONDS, LOOP_WATCH_INTERVAL

log = get_logger("waggle.loop")


def watch_loop(interval: float = LOOP_WATCH_INTERVAL) -> None:
    while True:
        due = time.perf_counter() + interval
        gevent.sleep(interval)
        lag = max(0.0, time.perf_counter() - due)
        metrics.LOOP_LAG.observe(lag)
        if lag > LOOP_BLOCKED_SECONDS:
            metrics.LOOP_BLOCKED.inc()
            if lag > LOOP_REPORT_SECONDS:
                log.warning("loop.blocked", seconds=round(lag, 3))
