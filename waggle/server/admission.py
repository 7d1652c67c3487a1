"""Whether a call may go on, decided before its arguments are read: a rate limit (``limits.rates``) may turn it
away at once, and then it waits up to ``limits.queue-wait-ms`` for one of ``limits.max-in-flight-calls``.

A call turned away is answered with a ``MetaException`` whose message names the limit and holds
:data:`~waggle.common.limiter.RETRYABLE`, so that every client retries it; nothing of it reaches a metastore.
Each turn-away is counted here; the rate limits also log at most once a second per rule.
"""

from __future__ import annotations

import time

from waggle.common import metrics
from waggle.common.limiter import RETRYABLE, Limiter
from waggle.common.logging import Throttle, get_logger
from waggle.hms.methods import MethodSpec
from waggle.server.limits import CallLimits

log = get_logger("waggle.call")
_limited_log = Throttle(1.0)  # per rate limit


def rate_limited(limits: CallLimits, *, spec: MethodSpec | None, method: str, user: str, peer: str) -> str | None:
    """The message a call over a rate limit is answered with, or None: no rule stops it (or none applies)."""
    if not limits.rules or spec is None or spec.never_limited or spec.family is None:
        return None
    hit = limits.check(user, peer.rpartition(":")[0], spec.family, time.monotonic())
    if hit is None:
        return None
    metrics.LIMITED.labels(hit.rule.name, hit.family.label).inc()
    if _limited_log.allow(hit.rule.name):
        log.info("call.limited", method=method[:200], limit=hit.rule.name, family=hit.family.label,
                 user=hit.user, address=hit.address, retry_in_s=round(hit.wait, 3))
    return hit.message


def overloaded(slots: Limiter) -> str:
    """The message of a call that found no in-flight slot within the queue wait."""
    metrics.SHED.labels("calls").inc()
    return (f"waggle is overloaded: {slots.limit} calls are in flight (limits.max-in-flight-calls); try again "
            f"shortly ({RETRYABLE}: overloaded; nothing reached a metastore)")
