"""A fan-out's I/O: one call to many metastores in parallel, each bounded, failures turned into outcomes.

Each member gets the fan-out timeout plus its ``latency``. A member that is down, fails, answers with an
exception or is late becomes an outcome with an error: a structured log line names it and a counter counts it.
What to ask each member, and how the answers merge, is the call core's (:mod:`waggle.call.merge`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gevent

from waggle.common import metrics
from waggle.common.logging import get_logger
from waggle.config.model import ProtocolKind, ServerConfig
from waggle.config.timing import FANOUT_JOIN_GRACE_SECONDS
from waggle.routing.federation import Naming
from waggle.upstream import compat
from waggle.upstream.client import Identity, UpstreamError
from waggle.upstream.health import Health
from waggle.upstream.outcome import Outcome
from waggle.upstream.pool import UpstreamPool

log = get_logger("waggle.fanout")


def gather(health: Health, server: ServerConfig, identity: Identity | None, *, name: str, seqid: int,
           result_class: type, jobs: Sequence[tuple[UpstreamPool, Naming, Any]],
           sent: tuple[Any, bytes, ProtocolKind] | None = None) -> list[Outcome]:
    """Ask each member; ``sent``: the client's arguments, as decoded and as sent, and the client's protocol (a
    member asked alone with those very arguments gets the client's bytes, and its reply's bytes are kept)."""
    outcomes: list[Outcome] = []
    running: list[tuple[Outcome, Any, float]] = []  # (outcome, the member's arguments, its timeout)
    for pool, naming, args in jobs:
        outcome = Outcome(pool, naming)
        outcomes.append(outcome)
        if not health.is_up(pool.name):
            outcome.error = health.down_message(pool.name)
            continue
        running.append((outcome, args, (server.fan_out_timeout_ms + pool.config.latency_ms) / 1000.0))
    if len(running) == 1:
        # One member to ask (one in the federation, or the only one up): asked from this greenlet, within the
        # same bound. A greenlet of its own and the join cost a third of such a call's CPU (get_all_databases
        # with one member: 131 us against 70 us for get_database, measured), and bought no parallelism.
        outcome, args, timeout = running[0]
        pool = outcome.pool
        same = sent is not None and pool.config.wire.protocol is sent[2]
        request = sent[1] if same and sent is not None and args is sent[0] else None
        # With a free slot and an idle connection, nothing can wait but the call, which its read timeout
        # bounds: no timer is armed (4 us of such a call). Otherwise the slot wait, the connect and the call are
        # bounded together.
        value: tuple[Any, Exception | None] | None = None
        idle = _quietly(_ask_idle, pool, identity, name, args, request, result_class, seqid, timeout)
        if idle[0] is not None or idle[1] is not None:
            value = idle
        else:  # none idle, or no slot free
            with gevent.Timeout(timeout + FANOUT_JOIN_GRACE_SECONDS, False):
                value = _quietly(_ask, pool, identity, name, args, request, result_class, seqid, timeout)
        if value is None:  # the bound ran out
            outcome.error = f"metastore '{pool.name}' did not answer {name} in time"
        elif value[1] is None:
            outcome.result, raw = value[0]
            if same:
                outcome.raw = raw
        else:
            _settle(health, outcome, name, value)
    elif running:
        greenlets = [gevent.spawn(_quietly, outcome.pool.invoke, identity, name, args, result_class, seqid, timeout)
                     for outcome, args, timeout in running]
        gevent.joinall(greenlets, timeout=max(t for _, _, t in running) + FANOUT_JOIN_GRACE_SECONDS)
        for (outcome, _, _), job in zip(running, greenlets, strict=True):
            if not job.ready():
                job.kill(block=False)
                outcome.error = f"metastore '{outcome.pool.name}' did not answer {name} in time"
            else:
                _settle(health, outcome, name, job.value)
    for outcome in outcomes:
        if outcome.error is not None:
            metrics.FANOUT_OMISSIONS.labels(name, outcome.pool.name).inc()
            log.warning("fanout.member_omitted", method=name, metastore=outcome.pool.name, error=outcome.error)
    return outcomes


def _ask(pool: UpstreamPool, identity: Identity | None, name: str, args: Any, request: bytes | None,
         result_class: type, seqid: int, timeout: float) -> tuple[Any, bytes]:
    """``pool.invoke``, with the request's own bytes when given, keeping the reply's bytes too."""
    return pool.using(identity, lambda conn: conn.ask(name, args, request, result_class, seqid, timeout))


def _ask_idle(pool: UpstreamPool, identity: Identity | None, name: str, args: Any, request: bytes | None,
              result_class: type, seqid: int, timeout: float) -> tuple[Any, bytes] | None:
    """:func:`_ask` when it can start at once on an idle connection (see UpstreamPool.using_idle), else None."""
    got = pool.using_idle(identity, lambda conn: conn.ask(name, args, request, result_class, seqid, timeout))
    return None if got is None else got[0]


def _settle(health: Health, outcome: Outcome, name: str, value: tuple[Any, Exception | None]) -> None:
    """A member's answer, or its failure, into its outcome."""
    result, exc = value
    if exc is None:
        outcome.result = result
        return
    outcome.error = str(exc) if isinstance(exc, UpstreamError) else f"metastore " \
        f"'{outcome.pool.name}' failed {name}: {exc!r}"
    if isinstance(exc, UpstreamError):
        health.call_failed(outcome.pool.name, exc)


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
