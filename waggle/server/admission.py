"""Whether a call may go on, and what its caller may be shown.

Before its arguments are read, a rate limit (``limits.rates``) may turn a call away at once, and then it waits up to
``limits.queue-wait-ms`` for one of ``limits.max-in-flight-calls``. A call turned away is answered with a
``MetaException`` whose message names the limit and holds :data:`~waggle.common.limiter.RETRYABLE`, so that every
client retries it; nothing of it reaches a metastore. Each turn-away is counted here; the rate limits also log at
most once a second per rule.

Once its arguments are read, the grants (``authorization``, :mod:`waggle.grants`) may refuse it before it is
planned: a hidden object is answered as Hive's filter hook answers it (``NoSuchObjectException``), a write without
its privilege with a ``MetaException`` naming the rule. On its way out, a listing's answer keeps what the caller may
see. The driver asks these once each, so every path a call takes (a plain relay, the full core, copies, the cache,
a merged listing) is covered.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any, NamedTuple

from thrift.Thrift import TMessageType

from waggle.call import finish
from waggle.call.values import Answer, Call, Kind, Outcome, Refusal, Session
from waggle.common import metrics
from waggle.common.limiter import RETRYABLE, Limiter
from waggle.common.logging import Throttle, get_logger
from waggle.grants.listings import Shape, shape_of
from waggle.grants.verdict import Caller
from waggle.hms.decode import decode_message
from waggle.hms.headers import body_start
from waggle.hms.headers import header as message
from waggle.hms.methods import MethodSpec
from waggle.hms.names import parse
from waggle.hms.rewrite import CALL_NAMES
from waggle.hms.service import MethodIO
from waggle.hms.wire import Header, Wire
from waggle.routing.federation import Refused
from waggle.server.limits import CallLimits

if TYPE_CHECKING:
    from waggle.grants.service import Grants

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


# -- the grants ------------------------------------------------------------------------------------------------
#: how long a connection's caller (its user and groups) is kept before it is asked of the grants again
CALLER_SECONDS = 1.0


def caller(grants: Grants, session: Session) -> Caller:
    """Who the connection's calls are from, as the grants see it (kept for a second: a change of groups applies
    within their TTL and a second)."""
    proven = session.authenticated.user if session.authenticated is not None else None
    named = session.identity[0] if session.identity is not None else None
    now = time.monotonic()
    kept = session.grants_caller
    if kept is not None and now < kept[1] and kept[0] == (proven, named) and kept[2] is grants.config:
        return kept[3]  # type: ignore[no-any-return]
    who = grants.caller(proven, named)
    session.grants_caller = ((proven, named), now + CALLER_SECONDS, grants.config, who)
    return who


class Filtering(NamedTuple):
    """A call whose answer is a listing filtered for its caller: who, what kind of listing, and the database
    whose tables it lists (``""`` for other listings)."""

    who: Caller
    shape: Shape
    db: str


def admit(grants: Grants, session: Session, header: Header, entry: tuple[MethodSpec | None, MethodIO | None],
          args: Any, raw: bytes, wire: Wire) -> tuple[Answer | None, Filtering | None]:
    """The grants' answer to a call, before it is planned: a refusal to answer it with (nothing then reaches a
    metastore), or how its answer is filtered for its caller: a listing, unless it lists the tables of a database
    whose every table the caller sees (then it is never streamed, and never relayed without a look)."""
    spec, io = entry
    if spec is None or io is None or args is None:
        return None, None  # a method waggle does not know: only the primary answers it (waggle.call.plan)
    who = caller(grants, session)
    call = Call(header, spec, io, args, raw, session, wire.format) if io.arrives is not None else None
    refused = grants.admit(who, spec, call.args if call is not None else args)
    if refused is not None:
        step = Refusal(Kind.REFUSE, call or Call(header, spec, io, args, raw, session, wire.format), "-",
                       refused.message, Refused.NO_SUCH_OBJECT if refused.hidden else Refused.META)
        return finish.refusal(step, wire), None
    shape = shape_of(spec, io.result)
    if shape is None:
        return None, None
    db = ""
    if shape is Shape.TABLE_NAMES:
        names = CALL_NAMES.names_in(args)
        db = (parse(names[0]).db or "") if names else ""
        if db and grants.policy.whole_database(who, db) is True:
            return None, None
    return None, Filtering(who, shape, db)


def for_caller(grants: Grants, filtering: Filtering, header: Header, io: MethodIO | None, args: Any, raw: bytes,
               wire: Wire) -> bytes:
    """A listing's successful reply to the call ``header`` heads (in the client's names and protocol) with what the
    caller may not see left out; any other reply as it is. The same listing asked again by the same caller is
    answered from what the grants remember (:meth:`~waggle.grants.service.Grants.remembered`), with no decoding."""
    if io is None or io.result is None:
        return raw
    compact = wire.format.compact
    key = (filtering, header.name, raw[body_start(raw, compact):])
    kept = grants.remembered(key)
    if kept is None:
        reply, result = decode_message(raw, wire.format.protocol, io.result, wire.limits)
        if reply.mtype != TMessageType.REPLY or getattr(result, "success", None) is None:
            return raw
        left_out = grants.filter(filtering.who, result, filtering.shape, args)
        out = wire.encode(header.name, TMessageType.REPLY, header.seqid, result)
        body = grants.remember(key, out[body_start(out, compact):], left_out)
    else:
        body, left_out = kept
        grants.count(filtering.shape, left_out)
    return message(header.name, TMessageType.REPLY, header.seqid, compact) + body


def answer_for_caller(grants: Grants, filtering: Filtering, header: Header, io: MethodIO | None, args: Any,
                      answer: Answer, wire: Wire) -> Answer:
    """A successful listing's answer for its caller (see :func:`for_caller`); any other answer as it is."""
    if answer.outcome != Outcome.OK or answer.raw is None:
        return answer
    raw = for_caller(grants, filtering, header, io, args, answer.raw, wire)
    return answer if raw is answer.raw else replace(answer, raw=raw)
