"""A fan-out's I/O: one call to many metastores in parallel, each bounded, failures turned into outcomes.

Each member gets the fan-out timeout plus its ``latency``. A member that is down, fails, answers with an
exception or is late becomes an outcome with an error: a structured log line names it and a counter counts it.
What to ask each member, and how the answers merge, is the call core's (:mod:`waggle.call.merge`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gevent

from waggle.call.values import Outcome
from waggle.common import metrics
from waggle.common.logging import get_logger
from waggle.config.model import ServerConfig
from waggle.config.timing import FANOUT_JOIN_GRACE_SECONDS
from waggle.routing.federation import Naming
from waggle.upstream import compat
from waggle.upstream.client import Identity, UpstreamError
from waggle.upstream.health import Health
from waggle.upstream.pool import UpstreamPool

log = get_logger("waggle.fanout")


def gather(health: Health, server: ServerConfig, identity: Identity | None, name: str, seqid: int,
           result_class: type, jobs: Sequence[tuple[UpstreamPool, Naming, Any]]) -> list[Outcome]:
    outcomes: list[Outcome] = []
    running: list[tuple[Outcome, gevent.Greenlet]] = []
    longest = 0.0
    for pool, naming, args in jobs:
        outcome = Outcome(pool, naming)
        outcomes.append(outcome)
        if not health.is_up(pool.name):
            outcome.error = health.down_message(pool.name)
            continue
        timeout = (server.fan_out_timeout_ms + pool.config.latency_ms) / 1000.0
        longest = max(longest, timeout)
        running.append((outcome, gevent.spawn(_quietly, pool.invoke, identity, name, args, result_class, seqid,
                                              timeout)))
    if running:
        gevent.joinall([g for _, g in running], timeout=longest + FANOUT_JOIN_GRACE_SECONDS)
    for outcome, job in running:
        if not job.ready():
            job.kill(block=False)
            outcome.error = f"metastore '{outcome.pool.name}' did not answer {name} in time"
        elif job.value[1] is None:
            outcome.result = job.value[0]
        else:
            exc = job.value[1]
            outcome.error = str(exc) if isinstance(exc, UpstreamError) else f"metastore " \
                f"'{outcome.pool.name}' failed {name}: {exc!r}"
            if isinstance(exc, UpstreamError):
                health.call_failed(outcome.pool.name, exc)
    for outcome in outcomes:
        if outcome.error is not None:
            metrics.FANOUT_OMISSIONS.labels(name, outcome.pool.name).inc()
            log.warning("fanout.member_omitted", method=name, metastore=outcome.pool.name, error=outcome.error)
    return outcomes


def learn_catalogs(health: Health, pools: Sequence[UpstreamPool], identity: Identity | None, timeout: float) -> None:
    """Ask the metastores whether they understand catalogs, in parallel and once per pool (those that are up)."""
    jobs = [gevent.spawn(compat.probe_catalogs, pool, identity) for pool in pools if health.is_up(pool.name)]
    if jobs:
        gevent.joinall(jobs, timeout=timeout)


def _quietly(call: Callable[..., Any], *args: Any) -> tuple[Any, Exception | None]:
    """(result, None) or (None, the exception): a failed member is an outcome, not a greenlet's traceback."""
    try:
        return call(*args), None
    except Exception as exc:
        return None, exc
