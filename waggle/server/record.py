"""Recording what a client connection did: one record per answered call (the metrics, and a log line when one is
due), and the lines a connection's end is logged with. The driver records through these alone."""

from __future__ import annotations

import time
from typing import Any

from waggle.call.values import ERROR_KINDS, Answer, Outcome
from waggle.common import metrics
from waggle.common.logging import Throttle, get_logger
from waggle.hms.methods import database_of
from waggle.hms.service import METHOD_IO

log = get_logger("waggle.call")
#: the metrics label of every method waggle's IDL does not have (client-chosen names must not become labels)
UNKNOWN_METHOD = "(unknown)"
_shed_log = Throttle(1.0)


def label(method: str) -> str:
    """The method's metrics label."""
    return method if method in METHOD_IO else UNKNOWN_METHOD


def call(method: str, args: Any, started: float, answer: Answer, debug: bool) -> None:
    """Count one answered call (metrics) and log it.

    At ``debug``, every call is logged. Otherwise a call that failed upstream is logged at info, shed calls at most
    once a second per limit (the metrics count each one), and refusals that are MetaExceptions.
    """
    seconds = time.perf_counter() - started
    outcome, metastore = answer.outcome, answer.metastore
    kind = ERROR_KINDS.get(outcome, "exception")
    metrics.observe_call(method if method in METHOD_IO else UNKNOWN_METHOD, metastore, seconds, kind)
    if kind is None and not debug:
        return  # answered and not an error: no line at info (the common case, decided first)
    if outcome is Outcome.REFUSED:
        if answer.reason is not None and (debug or answer.loud):
            # an unknown method (no arguments decoded) names no database and is refused for no metastore
            where = {"db": database_of(args), "metastore": metastore} if args is not None else {}
            log.info("call.refused", method=method, **where, reason=answer.reason, **answer.fields)
        return
    if outcome is Outcome.UNKNOWN_OUTCOME:
        level = log.warning  # a write that may have been applied: always said
    elif debug:
        level = log.debug
    elif outcome is Outcome.UPSTREAM_ERROR or (kind == "shed" and _shed_log.allow(metastore)):
        level = log.info
    else:
        return
    level("call", method=method[:200], db=database_of(args) if args is not None else None, metastore=metastore,
          outcome=str(outcome), duration_ms=round(1000 * seconds, 3), **answer.fields)


def relayed(method: str, metastore: str, started: float) -> None:
    """Count a plain relay's successful call (the relay lane's methods are all in the IDL)."""
    metrics.observe_call(method, metastore, time.perf_counter() - started, None)


def cut_short(method: str, metastore: str, started: float, kind: str) -> None:
    """Count a call whose answer never reached the client: it hung up (``client``), or half a reply was sent when
    the metastore failed (``upstream``)."""
    metrics.observe_call(label(method), metastore, time.perf_counter() - started, kind)


def failed_mid_reply(method: str, metastore: str, error: str) -> None:
    log.warning("call.failed_mid_reply", method=method, metastore=metastore, error=error)


def planned_again(metastore: str, lost: str) -> None:
    metrics.CALLS_PLANNED_AGAIN.labels(metastore, lost).inc()


def ended(event: str, calls: int, error: str | None = None, warning: bool = False) -> None:
    """A connection's end: ``client.disconnected``, ``client.protocol_error`` (a warning) or ``client.timeout``."""
    fields: dict[str, Any] = {"error": error} if error is not None else {}
    (log.warning if warning else log.info)(event, **fields, calls=calls)
