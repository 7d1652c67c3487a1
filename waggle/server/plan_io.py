"""The plan's I/O beyond sending one call, for a client connection (a :class:`~waggle.server.desk.Desk`): the
facts a plan needs first (catalogs, links), a call answered through its bridge, a fan-out, and the layout a
metastore declares its exceptions in. The one send is the driver's (:mod:`waggle.server.driver`)."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING

from waggle.call import finish, merge
from waggle.call.values import Answer, FanOut, NeedCatalogs, NeedLinks, Outcome, Send
from waggle.common.logging import get_logger
from waggle.config.model import ProtocolKind
from waggle.hms.bridges import MethodMissing, Wrap
from waggle.hms.layouts import Layout
from waggle.upstream import compat, fanout
from waggle.upstream.client import Identity, Reply, UpstreamError

if TYPE_CHECKING:
    from waggle.routes.snapshot import Routes
    from waggle.server.context import ServerContext
    from waggle.server.desk import Desk
    from waggle.upstream.pool import UpstreamPool

log = get_logger("waggle.call")


def learn(context: ServerContext, routes: Routes, need: NeedCatalogs | NeedLinks, identity: Identity | None
          ) -> Routes:
    """Learn what a plan needs, and the routes to plan again with: the links, data connectors and remote tables
    from the primary (without links when it did not answer), or whether members understand catalogs."""
    if isinstance(need, NeedLinks):
        remotes = context.remotes
        if need.connectors:
            remotes.learn_connectors()
        remotes.learn_links(list(need.names))
        if need.tables:
            remotes.learn_tables(list(need.tables))
        fresh = context.routes
        if fresh.registry is None or fresh.registry.unknown(need.names):
            return replace(fresh, registry=None)  # the primary did not answer: plan without links
        return fresh
    health, pools = context.health, [routes.pools[name] for name in need.members]
    if need.bounded:
        fanout.learn_catalogs(health, pools, identity, routes.config.server.fan_out_timeout_ms / 1000.0)
    else:
        for pool in pools:
            if health.is_up(pool.name):
                compat.probe_catalogs(pool, identity)
    return routes


def declared_layout(step: Send, reply: Reply | None, pool: UpstreamPool, identity: Identity | None
                    ) -> Layout | None:
    """The layout the metastore declares exceptions in, when the reply is one it may have put elsewhere than where
    the client reads it (:func:`waggle.call.finish.redeclarable`); else None."""
    return compat.layout_of(pool, identity) if finish.redeclarable(step, reply) else None


def bridge(desk: Desk, step: Send, pool: UpstreamPool) -> Answer:
    """Answer a method the member lacks (or cannot take as it is) through its bridge."""
    call = step.call
    assert call.spec is not None
    try:
        return _bridged(desk, step, pool)
    finally:  # a write forgets what it names before it is answered, however it reached the member
        desk.context.forget_written(pool.name, call.spec, step.args)


def _bridged(desk: Desk, step: Send, pool: UpstreamPool) -> Answer:
    call = step.call
    assert call.spec is not None and call.spec.bridge is not None and call.io is not None
    via = call.spec.bridge
    identity = desk.session.identity
    try:
        bridged = compat.Bridged(pool, identity, call.header.seqid)
        if isinstance(via.run, Wrap) and call.wire.protocol is ProtocolKind.BINARY and \
                pool.config.wire.protocol is ProtocolKind.BINARY:
            got = compat.wrapped(pool, identity, call.header, via.run, step.args, bridged)
            if isinstance(got, Reply):
                assert call.io.result is not None
                raw = finish.rewritten(step, got, call.io.result, desk.wire) if step.rewrite_reply else got.raw
                return Answer(raw, Outcome.OK, pool.name, {"bridge": via.via})
            return finish.bridged(step, got, desk.wire, via.via)
        return finish.bridged(step, bridged.run(call.name, step.args), desk.wire, via.via)
    except MethodMissing as exc:
        return desk.fail(call, f"metastore '{pool.name}' has neither {call.name} nor {exc.method}",
                         Outcome.NO_EQUIVALENT, pool.name, bridge=via.via)
    except compat.ApplicationError as exc:  # that one answered: it is up
        return desk.fail(call, str(exc), Outcome.UPSTREAM_ERROR, pool.name, bridge=via.via)
    except UpstreamError as exc:
        return desk.lost(call, pool, exc, time.perf_counter(), bridge=via.via)
    except desk.fatal:
        raise
    except Exception as exc:  # a defect in a bridge must not cost the client its connection
        log.error("bridge.failed", method=call.name, metastore=pool.name, error=repr(exc))
        return desk.fail(call, f"waggle could not answer {call.name} for metastore '{pool.name}' through "
                         f"{via.via}: {exc!r}", Outcome.BRIDGE_ERROR, pool.name, bridge=via.via)


def fan_out(desk: Desk, step: FanOut, routes: Routes) -> Answer:
    """Ask every member of a fan-out in parallel, each within its timeout, and merge their answers."""
    call = step.call
    assert call.io is not None and call.io.result is not None
    sent = (call.args, call.raw, call.wire.protocol)
    pools = routes.pools
    jobs = [(pools[naming.member.name], naming, args) for naming, args in step.jobs]
    outcomes = fanout.gather(desk.context.health, routes.config.server, desk.session.identity, name=call.name,
                             seqid=call.header.seqid, result_class=call.io.result, jobs=jobs, sent=sent)
    return merge.merge(step, outcomes, desk.wire, lambda message: desk.fail(
        call, message, Outcome.UPSTREAM_ERROR, "*"))
