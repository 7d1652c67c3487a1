"""One client connection: the only code that reads from and writes to a client.

For each message: read it (:class:`~waggle.hms.wire.Wire`), admit it or shed it, make it a
:class:`~waggle.call.values.Call`, let the call core plan it (:func:`waggle.call.plan.plan`), do the plan's
I/O with the upstream side (a pooled call, a bridge, a fan-out, a catalog probe), let the core finish it into
an :class:`~waggle.call.values.Answer`, write that answer, and record it once (log line and metrics).

Errors are typed by side. A client that sends garbage (:class:`~waggle.hms.wire.WireError`), times out or hangs
up is disconnected and logged, and nobody else notices; a client that hangs up while a reply streams to it
raises :class:`ClientGone` from the driver's own sink, so it never counts against the metastore. An upstream
failure is answered with a ``MetaException`` naming the metastore, and the client's connection stays usable.
"""

from __future__ import annotations

import itertools
import socket
import time
from dataclasses import replace
from typing import Any

import gevent
import structlog
from thrift.Thrift import TMessageType

from waggle.call import finish, lost, merge
from waggle.call.lane import Choice, Lane, lane_for
from waggle.call.plan import REWRITER, plan
from waggle.call.values import (
    ERROR_KINDS,
    Answer,
    Call,
    FanOut,
    Kind,
    Learned,
    NeedCatalogs,
    NeedLinks,
    Outcome,
    Paired,
    Refusal,
    Send,
    Session,
    Settled,
)
from waggle.common import metrics
from waggle.common.logging import Throttle, get_logger
from waggle.config.model import ProtocolKind
from waggle.copies.registry import held_partitions
from waggle.hms.bridges import MethodMissing, Wrap
from waggle.hms.client_release import learn
from waggle.hms.methods import METHODS, MethodSpec, database_of
from waggle.hms.service import METHOD_IO
from waggle.hms.wire import Header, PeerClosed, Wire, WireError
from waggle.remotes import planning as remotes_planning
from waggle.routes.snapshot import Routes
from waggle.security.frontdoor import Authenticated
from waggle.server import admission
from waggle.server.context import ServerContext
from waggle.server.own import HANDLERS
from waggle.upstream import compat, fanout
from waggle.upstream.client import Reply, UpstreamError
from waggle.upstream.pool import UpstreamPool

log = get_logger("waggle.call")
_ids = itertools.count(1)
#: the metrics label of every method waggle's IDL does not have (client-chosen names must not become labels)
UNKNOWN_METHOD = "(unknown)"
_shed_log = Throttle(1.0)


class ClientGone(Exception):
    """The client hung up while its answer was being written: the connection ends, no metastore is blamed."""


class _Abandon(Exception):
    """The client connection can no longer be answered (half a reply was sent); close it."""


class ClientDriver:
    """Serves one client connection; it is the :class:`~waggle.server.desk.Desk` of the calls waggle answers
    itself (:data:`waggle.server.own.HANDLERS`)."""

    __slots__ = ("calls", "conn_id", "context", "idle", "peer", "routes", "session", "sock", "started", "wire")

    def __init__(self, sock: socket.socket, peer: Any, context: ServerContext,
                 who: Authenticated | None = None) -> None:
        self.sock = sock
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.context = context
        self.conn_id = next(_ids)
        self.session = Session()
        if who is not None:
            # a proven identity: every call travels as this user, and set_ugi cannot change it
            self.session.authenticated = who
            self.session.identity = (who.user, ())
        self.idle = True
        server = context.config.server
        self.wire = Wire(sock, server.wire, server.limits)
        self.calls = 0
        #: when the call being answered arrived (perf_counter), and the routes it was planned with (set for the
        #: handlers of self-answered calls)
        self.started = 0.0
        self.routes: Routes | None = None

    def serve(self) -> None:
        structlog.contextvars.bind_contextvars(conn=self.conn_id, peer=self.peer)
        wire = self.wire
        lifecycle = self.context.lifecycle
        try:
            while not lifecycle.draining:
                self.idle = True
                try:
                    header = wire.read_begin()
                except PeerClosed:
                    return
                self.idle = False
                self._one(header)
                self.calls += 1
        except _Abandon:
            pass
        except ClientGone as exc:
            log.info("client.disconnected", error=str(exc), calls=self.calls)
        except WireError as exc:
            log.warning("client.protocol_error", error=str(exc), calls=self.calls)
        except TimeoutError:
            log.info("client.timeout", calls=self.calls)
        except OSError as exc:
            log.info("client.disconnected", error=str(exc), calls=self.calls)
        finally:
            self.idle = True

    def refuse(self, message: str, timeout: float) -> None:
        """Answer the connection's first call with ``message`` and close (a connection over the limit)."""
        self.sock.settimeout(timeout)
        try:
            header = self.wire.read_begin()
            if header.mtype in (TMessageType.CALL, TMessageType.ONEWAY):
                self.wire.skip_struct()
                self.wire.read_end()
                self._write(self._shed(header, message))
        except (WireError, PeerClosed, OSError):
            pass

    # -- one call ----------------------------------------------------------------------------------------
    def _one(self, header: Header) -> None:
        """Read, admit, answer and record one call. ``limits.max-in-flight-calls`` sheds what waits too long."""
        mtype = header.mtype
        if mtype != TMessageType.CALL and mtype != TMessageType.ONEWAY:
            raise WireError(f"expected a call, got message type {mtype} for '{header.name}'")
        spec = METHODS.get(header.name)
        if spec is not None and spec.never_shed:
            self._read(header, spec)
            return
        context = self.context
        identity = self.session.identity
        refused = admission.rate_limited(context.call_limits, spec, header.name,
                                         identity[0] if identity is not None else "", self.peer)
        if refused is None:
            slots = context.call_slots
            if slots.acquire(context.routes.config.server.load.queue_wait_seconds):
                try:  # counted in waggle_calls_in_flight while it holds its slot (read from call_slots when scraped)
                    self._read(header, spec)
                finally:
                    slots.release()
                return
            refused = admission.overloaded(slots)
        started = time.perf_counter()
        self.wire.skip_struct()
        self.wire.read_end()
        self._finish(header, None, started, self._shed(header, refused))

    def _shed(self, header: Header, message: str) -> Answer:
        """The answer to a call waggle turns away before reading it (a limit, or a connection over the limit):
        its release is not known yet, so the failure is where a client that has not said reads it."""
        return finish.failure(header, METHOD_IO.get(header.name), message, self.wire, outcome=Outcome.SHED,
                              metastore="-", layout=self.session.release.unread)

    def _read(self, header: Header, spec: MethodSpec | None) -> None:
        """Read the call's arguments, then relay it plainly (:mod:`waggle.call.lane`) or answer it through the
        full core."""
        wire = self.wire
        name = header.name
        io = METHOD_IO.get(name)
        if io is None:
            wire.skip_struct()
            args = None
        else:
            if (header.mtype == TMessageType.ONEWAY) != (io.result is None):
                # a reply nobody reads (or a reply never sent) would put the metastore connection out of step
                raise WireError(f"'{name}' sent as {'oneway' if header.mtype == TMessageType.ONEWAY else 'call'}"
                                f", but the method is {'oneway' if io.result is None else 'not oneway'}")
            args = wire.read_struct(io.args)
        raw = wire.read_end()
        self.session.release = learn(self.session.release, spec, args)  # where the client reads waggle's errors
        if io is not None:
            started = time.perf_counter()
            context = self.context
            routes = context.routes
            lane = lane_for(routes, name, spec, io)
            if lane is not None:
                choice = lane.choose(args, context.health, wire.format)
                if choice is not None:
                    if choice.renamed:  # planned by the lane, sent and finished as planned
                        step = lane.send(Call(header, spec, io, args, raw, self.session, wire.format), choice,
                                         context.health)
                        self._finish(header, args, started, self._sent(step, started, routes))
                    else:  # the call's bytes to its member; a successful reply's bytes back, recorded here
                        answer = self._send(routes.pools[choice.member.name], header, args, raw, started, routes,
                                            relay=(lane, choice))
                        if answer is not None:
                            self._finish(header, args, started, answer)
                    return
        self._answer(Call(header, spec, io, args, raw, self.session, wire.format))

    def _answer(self, call: Call) -> None:
        started = time.perf_counter()
        self._finish(call.header, call.args, started, self._respond(call, started))

    def _respond(self, call: Call, started: float) -> Answer:
        """Plan ``call`` and do what the plan says: its answer."""
        context = self.context
        routes = context.routes  # one configuration and map for the whole call, even if a reload swaps them
        if routes.links and call.args is not None:  # a stock DROP DATABASE ... CASCADE of a link, call by call
            self.session.cascading = remotes_planning.cascading(
                call.spec, call.io.args if call.io is not None else None, REWRITER.names_in(call.args),
                routes.links, self.session.cascading)
        step = plan(call, routes, context.health, context.created)
        if isinstance(step, Send) and step.kind is Kind.SEND:  # the common case, first: a call relayed to one member
            return self._sent(step, started, routes)
        learned = Learned()
        while isinstance(step, (NeedCatalogs, NeedLinks)):
            if isinstance(step, NeedLinks):
                remotes = context.remotes
                if step.connectors:
                    remotes.learn_connectors()
                remotes.learn_links(list(step.names))
                if step.tables:
                    remotes.learn_tables(list(step.tables))
                fresh = context.routes
                if fresh.registry is None or fresh.registry.unknown(step.names):
                    routes = replace(fresh, registry=None)  # the primary did not answer: plan without links
                else:
                    routes = fresh
            else:
                self._learn_catalogs(routes, step)
            learned = learned.after(step)
            step = plan(call, routes, context.health, context.created, learned)
        if isinstance(step, Refusal):
            answer = finish.down(step, self.wire) if step.kind is Kind.DOWN else finish.refusal(step, self.wire)
        elif isinstance(step, FanOut):
            answer = self._fan_out(step, routes)
        elif isinstance(step, Paired):
            answer = self._paired(step, routes, started)
        else:
            handler = HANDLERS.get(step.kind)
            if handler is not None:
                outer, self.started, self.routes = self.routes, started, routes
                try:
                    answer = handler(self, step)
                finally:
                    self.routes = outer  # no snapshot outlives its call (a call planned again inside a handler's)
            elif step.kind is Kind.BRIDGE:
                answer = self._bridge(step, routes.pools[step.metastore])
            else:
                answer = self._sent(step, started, routes)
        return answer

    # -- what the handlers of self-answered calls use (the driver is their Desk) -------------------------------
    def pool(self, name: str) -> UpstreamPool:
        """The pool of metastore ``name`` in the routes the call being answered was planned with."""
        assert self.routes is not None, "only while a self-answered call is handled"
        return self.routes.pools[name]

    def send(self, step: Send) -> Answer:
        """Send the call; a member that turns out not to have the method is answered through its bridge."""
        health = self.context.health
        if not health.is_up(step.metastore):
            return self._failure(step.call, health.down_message(step.metastore), Outcome.MEMBER_DOWN, step.metastore)
        if step.bridge:
            return self._bridge(step, self.pool(step.metastore))
        assert self.routes is not None
        return self._sent(step, self.started, self.routes)

    # -- the plan's I/O ------------------------------------------------------------------------------------
    def _failure(self, call: Call, message: str, outcome: Outcome, metastore: str, **fields: Any) -> Answer:
        """A ``MetaException`` saying ``message``, where this client's release reads it."""
        return finish.failure(call.header, call.io, message, self.wire, outcome=outcome, metastore=metastore,
                              layout=self.session.release.layout, **fields)

    def _learn_catalogs(self, routes: Routes, need: NeedCatalogs) -> None:
        health, pools = self.context.health, [routes.pools[name] for name in need.members]
        if need.bounded:
            fanout.learn_catalogs(health, pools, self.session.identity,
                                  routes.config.server.fan_out_timeout_ms / 1000.0)
        else:
            for pool in pools:
                if health.is_up(pool.name):
                    compat.probe_catalogs(pool, self.session.identity)

    def _sent(self, step: Send, started: float, routes: Routes) -> Answer:
        """A planned call sent to its metastore, and its answer."""
        answer = self._send(routes.pools[step.metastore], step.call.header, step.args, step.raw, started, routes,
                            step=step)
        assert answer is not None
        return answer

    def _send(self, pool: UpstreamPool, header: Header, args: Any, raw: bytes | None, started: float,
              routes: Routes, *, step: Send | None = None, relay: tuple[Lane, Choice] | None = None
              ) -> Answer | None:
        """The one way a call goes to a metastore: ``step``, a planned call, or, with ``relay``, a call of a plain
        relay lane, sent as it came. A plain relay's successful reply is written here, its bytes as they came, and
        recorded (None is returned); any other reply, and any failure, is answered from the call's plan."""
        wire = self.wire
        try:
            reply = pool.forward(self.session.identity, header, args=args, raw=raw, protocol=wire.format.protocol,
                                 sink=self._sink if (wire.format.buffered if step is None else step.stream) else None,
                                 stream_after=routes.config.server.stream_after_bytes,
                                 known=step is None or step.call.io is not None)
        except ClientGone:
            # the client hung up while its reply streamed to it: counted as the client's, never the metastore's
            metrics.observe_call(_label(header.name), pool.name, time.perf_counter() - started, "client")
            raise
        except UpstreamError as exc:
            if step is None:
                assert relay is not None and raw is not None  # a relay sends the call's own bytes
                lane = relay[0]
                return self._lost(Call(header, lane.spec, lane.io, args, raw, self.session, wire.format), pool,
                                  exc, started)
            return self._lost(step.call, pool, exc, started)
        if step is None:
            assert relay is not None and reply is not None and raw is not None  # not oneway; the call's bytes
            if reply.header.mtype == TMessageType.REPLY and reply.first_field <= 0:
                if reply.raw is not None:
                    wire.send_raw(reply.raw)  # relayed byte for byte (or the rest of a streamed reply)
                if self.context.log_calls:
                    self._record(header.name, args, started, Answer(reply.raw, Outcome.OK, pool.name))
                else:
                    metrics.observe_call(header.name, pool.name, time.perf_counter() - started, None)
                return None
            lane, choice = relay
            step = lane.send(Call(header, lane.spec, lane.io, args, raw, self.session, wire.format), choice,
                             self.context.health)
        elif step.copy is not None:
            metrics.COPY_READS.labels(step.copy.member, step.copy.reason).inc()
        return self._replied(step, reply, pool)

    def _paired(self, step: Paired, routes: Routes, started: float) -> Answer:
        """A prefer read: the member asked, and the primary asked at once which partitions the copy holds; the
        member's partitions get the copy's storage where it holds them. A member that fails is answered for by
        the copy alone."""
        call = step.call
        served = step.copy.copy
        assert served is not None
        source, primary = routes.pools[step.source.metastore], routes.pools[step.copy.metastore]
        identity = self.session.identity
        held = gevent.spawn(held_partitions, primary, identity, served)
        try:
            got = source.forward(identity, call.header, args=step.source.args, raw=step.source.raw,
                                 protocol=call.wire.protocol, stream_after=routes.config.server.stream_after_bytes)
        except UpstreamError as exc:
            held.kill(block=False)
            self.context.health.call_failed(source.name, exc)
            return self._sent(step.copy, started, routes)  # the member failed: the copy answers alone
        assert got is not None  # not oneway
        names = held.get()
        answer = finish.paired(step, got, names, self.wire)
        if answer.outcome == Outcome.OK and names is not None:
            metrics.COPY_READS.labels(served.member, "source" if answer.fields.get("from_source") else "prefer").inc()
        return answer

    def _lost(self, call: Call, pool: UpstreamPool, exc: UpstreamError, started: float, **fields: Any) -> Answer:
        """The answer to a call whose metastore failed it: planned again when the failure says the metastore is
        gone (a read: see :mod:`waggle.call.lost`), else a ``MetaException`` saying what is known; or the end of
        the connection, half a reply sent."""
        health = self.context.health
        if lost.gone(call, exc):
            health.found_down(pool.name, exc.detail)
        else:
            health.call_failed(pool.name, exc)
        if exc.partial_reply_sent:
            log.warning("call.failed_mid_reply", method=call.name, metastore=pool.name, error=exc.detail)
            metrics.observe_call(_label(call.name), pool.name, time.perf_counter() - started, "upstream")
            raise _Abandon() from exc
        if lost.again(call, exc):
            assert exc.lost is not None
            metrics.CALLS_PLANNED_AGAIN.labels(pool.name, exc.lost.value).inc()
            return self._respond(replace(call, attempt=call.attempt + 1), started)
        message, outcome = lost.answer(call, exc)
        return self._failure(call, message, outcome, pool.name, error=exc.detail, **fields)

    def _replied(self, step: Send, reply: Reply | None, pool: UpstreamPool) -> Answer:
        """The answer to a metastore's reply, with what it leaves behind applied; a member that turns out not to
        have the method is answered through its bridge."""
        upstream = compat.layout_of(pool, self.session.identity) if finish.redeclarable(step, reply) else None
        answer = finish.reply(step, reply, self.wire, upstream)
        if answer.settled is not None:
            self._settle(answer.settled)
        if answer.bridge_instead:
            pool.caps.learn_missing(step.call.name)
            answer = self._bridge(step, pool)
        return answer

    def _settle(self, settled: Settled) -> None:
        """Apply what a call left behind: a database created under a whitelist, a lock granted or released."""
        if settled.created is not None:
            member, database = settled.created
            self.context.created.setdefault(member, set()).add(database)
        if settled.granted is not None:
            lock_id, owner = settled.granted
            self.session.lock_owners[lock_id] = owner
        if settled.released is not None:
            self.session.lock_owners.pop(settled.released, None)

    def _bridge(self, step: Send, pool: UpstreamPool) -> Answer:
        """Answer a method the member lacks (or cannot take as it is) through its bridge."""
        call = step.call
        assert call.spec is not None and call.spec.bridge is not None and call.io is not None
        bridge = call.spec.bridge
        identity = self.session.identity
        try:
            bridged = compat.Bridged(pool, identity, call.header.seqid)
            if isinstance(bridge.run, Wrap) and call.wire.protocol is ProtocolKind.BINARY and \
                    pool.config.wire.protocol is ProtocolKind.BINARY:
                got = compat.wrapped(pool, identity, call.header, bridge.run, step.args, bridged)
                if isinstance(got, Reply):
                    assert call.io.result is not None
                    raw = finish.rewritten(step, got, call.io.result, self.wire) if step.rewrite_reply else got.raw
                    return Answer(raw, Outcome.OK, pool.name, {"bridge": bridge.via})
                return finish.bridged(step, got, self.wire, bridge.via)
            return finish.bridged(step, bridged.run(call.name, step.args), self.wire, bridge.via)
        except MethodMissing as exc:
            return self._failure(call, f"metastore '{pool.name}' has neither {call.name} nor {exc.method}",
                                 Outcome.NO_EQUIVALENT, pool.name, bridge=bridge.via)
        except compat.ApplicationError as exc:  # that one answered: it is up
            return self._failure(call, str(exc), Outcome.UPSTREAM_ERROR, pool.name, bridge=bridge.via)
        except UpstreamError as exc:
            return self._lost(call, pool, exc, time.perf_counter(), bridge=bridge.via)
        except (WireError, OSError, _Abandon, ClientGone):
            raise
        except Exception as exc:  # a defect in a bridge must not cost the client its connection
            log.error("bridge.failed", method=call.name, metastore=pool.name, error=repr(exc))
            return self._failure(call, f"waggle could not answer {call.name} for metastore '{pool.name}' through "
                                 f"{bridge.via}: {exc!r}", Outcome.BRIDGE_ERROR, pool.name, bridge=bridge.via)

    def _fan_out(self, step: FanOut, routes: Routes) -> Answer:
        call = step.call
        assert call.io is not None and call.io.result is not None
        sent = (call.args, call.raw, call.wire.protocol)
        pools = routes.pools
        jobs = [(pools[naming.member.name], naming, args) for naming, args in step.jobs]
        outcomes = fanout.gather(self.context.health, routes.config.server, self.session.identity, name=call.name,
                                 seqid=call.header.seqid, result_class=call.io.result, jobs=jobs, sent=sent)
        return merge.merge(step, outcomes, self.wire, lambda message: self._failure(
            call, message, Outcome.UPSTREAM_ERROR, "*"))

    # -- writing and recording ---------------------------------------------------------------------------
    def _sink(self, chunk: bytes) -> None:
        """Where a streamed reply goes while it arrives (owned here: upstream code never holds the client)."""
        try:
            self.wire.send_raw(chunk)
        except OSError as exc:
            raise ClientGone(str(exc)) from exc

    def _write(self, answer: Answer) -> None:
        if answer.raw is not None:
            self.wire.send_raw(answer.raw)

    def _finish(self, header: Header, args: Any, started: float, answer: Answer) -> None:
        self._write(answer)
        if answer.record:
            self._record(header.name, args, started, answer)

    def _record(self, method: str, args: Any, started: float, answer: Answer) -> None:
        """Count one answered call (metrics) and log it.

        At debug, every call is logged. Otherwise a call that failed upstream is logged at info, shed calls at
        most once a second per limit (the metrics count each one), and refusals that are MetaExceptions.
        """
        seconds = time.perf_counter() - started
        outcome, metastore = answer.outcome, answer.metastore
        kind = ERROR_KINDS.get(outcome, "exception")
        metrics.observe_call(method if method in METHOD_IO else UNKNOWN_METHOD, metastore, seconds, kind)
        debug = self.context.log_calls
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


def _label(method: str) -> str:
    return method if method in METHOD_IO else UNKNOWN_METHOD
