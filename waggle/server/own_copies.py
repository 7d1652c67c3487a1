"""Reads answered from copies (``read-from-copies``), as handlers of :data:`waggle.server.own.HANDLERS`.

The call core planned them with :func:`waggle.copies.planning.choose`: a read sent to the primary about the copy
(:attr:`~waggle.call.values.Kind.COPY`, its reply made the source's by the plan's
:class:`~waggle.copies.serve.Served`), or a ``prefer`` read that asks the member and the primary at once
(:attr:`~waggle.call.values.Kind.PAIRED`). Each read a copy answered is counted here, in
``waggle_copy_reads_total``.
"""

from __future__ import annotations

import gevent

from waggle.call import finish
from waggle.call.values import Answer, Outcome, Paired, Send
from waggle.common import metrics
from waggle.copies.registry import held_partitions
from waggle.server.desk import Desk
from waggle.upstream.client import UpstreamError


def from_copy(desk: Desk, step: Send) -> Answer:
    """A read the primary answers from a copy: counted once the primary replied."""
    served = step.copy
    assert served is not None
    return desk.send(step, replied=lambda: metrics.COPY_READS.labels(served.member, served.reason).inc())


def paired(desk: Desk, step: Paired) -> Answer:
    """A prefer read: the member asked, and the primary asked at once which partitions the copy holds; the
    member's partitions get the copy's storage where it holds them. A member that fails is answered for by the
    copy alone."""
    call = step.call
    served = step.copy.copy
    assert served is not None
    source, primary = desk.pool(step.source.metastore), desk.pool(step.copy.metastore)
    identity = desk.session.identity
    held = gevent.spawn(held_partitions, primary, identity, served)
    try:
        got = source.forward(identity, call.header, args=step.source.args, raw=step.source.raw,
                             protocol=call.wire.protocol, stream_after=desk.context.config.server.stream_after_bytes)
    except UpstreamError as exc:
        held.kill(block=False)
        desk.context.health.call_failed(source.name, exc)
        return from_copy(desk, step.copy)  # the member failed: the copy answers alone
    assert got is not None  # not oneway
    names = held.get()
    answer = finish.paired(step, got, names, desk.wire)
    if answer.outcome == Outcome.OK and names is not None:
        metrics.COPY_READS.labels(served.member, "source" if answer.fields.get("from_source") else "prefer").inc()
    return answer
