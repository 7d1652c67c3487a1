"""One client connection: the only code that reads from and writes to a client.

For each message: read it (:class:`~waggle.hms.wire.Wire`), admit it or shed it, make it a
:class:`~waggle.call.values.Call`, let the call core plan it (:func:`waggle.call.plan.plan`), do the plan's
I/O with the upstream side (a pooled call, a bridge, a fan-out, a catalog probe), let the core finish it into
an :class:`~waggle.call.values.Answer`, write that answer, and record it once (log line and metrics).

Errors are typed by side. A client that sends garbage (:class:`~waggle.hms.headers.WireError`), times out or hangs
up is disconnected and logged, and nobody else notices; a client that hangs up while a reply streams to it
raises :class:`ClientGone` from the driver's own sink, so it never counts against the metastore. An upstream
failure is answered with a ``MetaException`` naming the metastore, and the client's connection stays usable.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import structlog
from thrift.Thrift import TMessageType

from waggle.call import finish, lost
from waggle.call.lane import Lane, Pick, lane_for
from waggle.call.plan import cascading, plan
from waggle.call.values import (
    ENTRIES,
    NO_ENTRY,
    Answer,
    Call,
    Entry,
    FanOut,
    Kind,
    Learned,
    NeedCatalogs,
    NeedLinks,
    Outcome,
    Refusal,
    Send,
    Session,
    Settled,
)
from waggle.hms.headers import WireError, body_start
from waggle.hms.headers import header as message
from waggle.hms.wire import Channel, Header, PeerClosed, Wire
from waggle.server import admission, plan_io, record
from waggle.server.own import HANDLERS
from waggle.upstream.client import Reply, UpstreamError

if TYPE_CHECKING:
    from waggle.server.context import MethodSpec, Routes, ServerContext, UpstreamPool

_ids = itertools.count(1)


class ClientGone(Exception):
    """The client hung up while its answer was being written: the connection ends, no metastore is blamed."""


class _Abandon(Exception):
    """The client connection can no longer be answered (half a reply was sent); close it."""


class ClientDriver:
    """Serves one client connection; it is the :class:`~waggle.server.desk.Desk` of the calls waggle answers
    itself (:data:`waggle.server.own.HANDLERS`)."""

    __slots__ = ("calls", "conn_id", "context", "filtering", "idle", "last", "peer", "routes", "session", "started",
                 "stream", "wire")

    #: what ends the connection: a handler lets these through
    fatal: tuple[type[BaseException], ...] = (WireError, OSError, _Abandon, ClientGone)

    def __init__(self, stream: Channel, peer: Any, context: ServerContext, session: Session | None = None
                 ) -> None:
        """``stream``: the client's connection (whoever accepted it made it a stream, and closes it through
        the stream); ``session``: the connection's, made by :meth:`Session.of` from who the front door proved it
        is."""
        self.stream = stream
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.context = context
        self.conn_id = next(_ids)
        self.session = Session() if session is None else session
        self.idle = True
        server = context.config.server
        self.wire = Wire(stream, server.wire, server.limits)
        self.calls = 0
        #: when the call being answered arrived (perf_counter), and the routes it was planned with (set for the
        #: handlers of self-answered calls)
        self.started = 0.0
        self.routes: Routes | None = None
        #: the answer waggle wrote to the call being answered, while the next one is read (None for a reply
        #: relayed as the member sent it): how an in-process client (the Iceberg REST door) tells a refusal or
        #: a member that is down from the member's own error
        self.last: Answer | None = None
        #: how the answer to the call being answered is filtered for its caller, a listing (waggle.grants); None: not
        self.filtering: admission.Filtering | None = None

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
            record.ended("client.disconnected", self.calls, str(exc))
        except WireError as exc:
            record.ended("client.protocol_error", self.calls, str(exc), warning=True)
        except TimeoutError:
            record.ended("client.timeout", self.calls)
        except OSError as exc:
            record.ended("client.disconnected", self.calls, str(exc))
        finally:
            self.idle = True

    def refuse(self, message: str, timeout: float) -> None:
        """Answer the connection's first call with ``message`` and close (a connection over the limit)."""
        self.stream.settimeout(timeout)
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
        self.last = None
        self.filtering = None
        entry = ENTRIES.get(header.name, NO_ENTRY)
        spec = entry[0]
        if spec is not None and spec.never_shed:
            self._read(header, entry)
            return
        context = self.context
        identity = self.session.identity
        refused = admission.rate_limited(context.call_limits, spec=spec, method=header.name,
                                         user=identity[0] if identity is not None else "", peer=self.peer)
        if refused is None:
            slots = context.call_slots
            if slots.acquire(context.routes.config.server.load.queue_wait_seconds):
                try:  # counted in waggle_calls_in_flight while it holds its slot (read from call_slots when scraped)
                    self._read(header, entry)
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
        return finish.failure(header, ENTRIES.get(header.name, NO_ENTRY)[1], message, self.wire, outcome=Outcome.SHED,
                              metastore="-", layout=self.session.release.unread)

    def _read(self, header: Header, entry: Entry) -> None:
        """Read the call's arguments, then relay it plainly (:mod:`waggle.call.lane`) or answer it through the
        full core."""
        wire = self.wire
        name = header.name
        spec, io = entry
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
        self.session.learn(spec, args)  # where the client reads waggle's errors
        grants = self.context.grants
        if grants is not None:  # refused by the grants before it is planned: nothing reaches a metastore
            refused, self.filtering = admission.admit(grants, self.session, header, entry, args, raw, wire)
            if refused is not None:
                self._finish(header, args, time.perf_counter(), refused)
                return
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
            self.session.cascading = cascading(call, routes)
        step = plan(call, routes, context.health, context.created)
        if isinstance(step, Send) and step.kind is Kind.SEND:  # the common case, first: a call relayed to one member
            return self._sent(step, started, routes)
        learned = Learned()
        while isinstance(step, (NeedCatalogs, NeedLinks)):
            routes = plan_io.learn(context, routes, step, self.session.identity)
            learned = learned.after(step)
            step = plan(call, routes, context.health, context.created, learned)
        if isinstance(step, Refusal):
            answer = finish.down(step, self.wire) if step.kind is Kind.DOWN else finish.refusal(step, self.wire)
        elif isinstance(step, FanOut):
            answer = plan_io.fan_out(self, step, routes)
        else:
            handler = HANDLERS.get(step.kind)
            if handler is not None:
                outer, self.started, self.routes = self.routes, started, routes
                try:
                    answer = handler(self, step)
                finally:
                    self.routes = outer  # no snapshot outlives its call (a call planned again inside a handler's)
            elif not isinstance(step, Send):
                raise AssertionError(f"no handler for {step.kind}")
            elif step.kind is Kind.BRIDGE:
                answer = plan_io.bridge(self, step, routes.pools[step.metastore])
            else:
                answer = self._sent(step, started, routes)
        return answer

    # -- what the handlers of self-answered calls use (the driver is their Desk) -------------------------------
    def pool(self, name: str) -> UpstreamPool:
        """The pool of metastore ``name`` in the routes the call being answered was planned with."""
        assert self.routes is not None, "only while a self-answered call is handled"
        return self.routes.pools[name]

    def send(self, step: Send, replied: Callable[[], None] | None = None) -> Answer:
        """Send the call; a member that turns out not to have the method is answered through its bridge."""
        health = self.context.health
        if not health.is_up(step.metastore):
            return self.fail(step.call, health.down_message(step.metastore), Outcome.MEMBER_DOWN, step.metastore)
        if step.bridge:
            return plan_io.bridge(self, step, self.pool(step.metastore))
        assert self.routes is not None
        return self._sent(step, self.started, self.routes, replied)

    # -- the plan's I/O ------------------------------------------------------------------------------------
    def fail(self, call: Call, message: str, outcome: Outcome, metastore: str, **fields: Any) -> Answer:
        """A ``MetaException`` saying ``message``, where this client's release reads it."""
        return finish.failure(call.header, call.io, message, self.wire, outcome=outcome, metastore=metastore,
                              layout=self.session.release.layout, **fields)

    def _sent(self, step: Send, started: float, routes: Routes, replied: Callable[[], None] | None = None) -> Answer:
        """A planned call sent to its metastore, and its answer."""
        pool = routes.pools[step.metastore]

        def send() -> Answer:
            answer = self._send(pool, step.call.header, step.args, step.raw, started, routes, step=step,
                                replied=replied)
            assert answer is not None
            return answer

        spec, session = step.call.spec, self.session
        if replied is None and step.rewrite_reply and spec is not None and spec.cached is not None and \
                pool.name in self.context.replies.members and session.may_remember:
            return self._answer_remembered(step, spec, routes, send)
        return send()

    def _answer_remembered(self, step: Send, spec: MethodSpec, routes: Routes, send: Callable[[], Answer]
                           ) -> Answer:
        """A renamed read of a member with ``cache`` on: its answer as this client reads it (renamed for the names
        it asked by, in its protocol) is what is remembered, so a repeat is answered with no decoding at all. Only
        successes are kept, whose layout no Hive release reads differently (releases differ in where they read
        exceptions), so the client's release is not part of the key. The routes' generation is: a reload renames
        afresh."""
        call, compact = step.call, self.wire.format.compact
        identity = self.session.identity
        name, seqid, metastore = call.name, call.header.seqid, step.metastore

        def kept(answer: Answer) -> bytes | None:
            if answer.outcome != Outcome.OK or answer.raw is None or answer.settled is not None:
                return None
            return answer.raw[body_start(answer.raw, compact):]

        return self.context.replies.remember(
            metastore, spec, step.args, call.raw, compact,
            f"answer {'c' if compact else 'b'} {routes.generation}",
            identity[0] if identity is not None else "", routes.pools[metastore].config.read_timeout_ms / 1000.0,
            send, kept, lambda body: Answer(message(name, TMessageType.REPLY, seqid, compact) + body, Outcome.OK,
                                            metastore))

    def _send(self, pool: UpstreamPool, header: Header, args: Any, raw: bytes | None, started: float,
              routes: Routes, *, step: Send | None = None, relay: tuple[Lane, Pick] | None = None,
              replied: Callable[[], None] | None = None) -> Answer | None:
        """The one way a call goes to a metastore: ``step``, a planned call, or, with ``relay``, a call of a plain
        relay lane, sent as it came. A plain relay's successful reply is written here, its bytes as they came, and
        recorded (None is returned); any other reply, and any failure, is answered from the call's plan.
        ``replied`` is called once the metastore replied."""
        wire = self.wire
        spec = step.call.spec if step is not None else relay[0].spec if relay is not None else None
        try:
            if spec is None or pool.name not in self.context.replies.members:
                reply = pool.forward(self.session.identity, header, args=args, raw=raw, protocol=wire.format.protocol,
                                     sink=self._sink if (wire.format.buffered if step is None else step.stream)
                                     and self.filtering is None else None,
                                     stream_after=routes.config.server.stream_after_bytes,
                                     known=step is None or step.call.io is not None)
            else:  # a member with cache on: its reads may be remembered, its writes forget
                reply = self._through_cache(pool, spec, header, args, raw, routes, step)
        except ClientGone:
            # the client hung up while its reply streamed to it: counted as the client's, never the metastore's
            record.cut_short(header.name, pool.name, started, "client")
            raise
        except UpstreamError as exc:
            if step is None:
                assert relay is not None and raw is not None  # a relay sends the call's own bytes
                lane = relay[0]
                return self.lost(Call(header, lane.spec, lane.io, args, raw, self.session, wire.format), pool,
                                 exc, started)
            return self.lost(step.call, pool, exc, started)
        if reply is not None and reply.header.mtype == TMessageType.REPLY and reply.first_field <= 0:
            self.session.hold(spec)
        if step is None:
            assert relay is not None and reply is not None and raw is not None  # not oneway; the call's bytes
            if reply.header.mtype == TMessageType.REPLY and reply.first_field <= 0:
                if reply.raw is not None:  # relayed byte for byte (or the rest of a streamed reply) ...
                    grants, filtering = self.context.grants, self.filtering
                    if filtering is not None and grants is not None:  # ... or the listing its caller may see
                        wire.send_raw(admission.for_caller(grants, filtering, header, relay[0].io, args, reply.raw,
                                                           wire))
                    else:
                        wire.send_raw(reply.raw)
                if self.context.log_calls:
                    record.call(header.name, args, started, Answer(reply.raw, Outcome.OK, pool.name), True)
                else:
                    record.relayed(header.name, pool.name, started)
                return None
            lane, choice = relay
            step = lane.send(Call(header, lane.spec, lane.io, args, raw, self.session, wire.format), choice,
                             self.context.health)
        elif replied is not None:
            replied()
        return self._replied(step, reply, pool)

    def _through_cache(self, pool: UpstreamPool, spec: MethodSpec, header: Header, args: Any, raw: bytes | None,
                       routes: Routes, step: Send | None) -> Reply | None:
        """A call to a member with ``cache`` on: a read it repeats is answered from memory when it is held and
        true (the whole reply is read, never streamed: it is kept); a write forgets what it names before it is
        answered, whatever the metastore said."""
        wire, session = self.wire, self.session
        # a renamed read is remembered as its answer, not as the member's reply (see _answer_remembered)
        remember = spec.cached is not None and session.may_remember and (step is None or not step.rewrite_reply)
        stream = not remember and not spec.changes and self.filtering is None and \
            (wire.format.buffered if step is None else step.stream)

        def send() -> Reply | None:
            return pool.forward(session.identity, header, args=args, raw=raw, protocol=wire.format.protocol,
                                sink=self._sink if stream else None,
                                stream_after=routes.config.server.stream_after_bytes,
                                known=step is None or step.call.io is not None)

        try:
            if not remember:
                return send()
            request = raw if raw is not None else wire.encode(header.name, header.mtype, header.seqid, args)
            identity = session.identity
            return self.context.replies.fetch(pool.name, spec, args, request, header.seqid,
                                              client_compact=wire.format.compact,
                                              upstream_compact=pool.config.wire.compact,
                                              user=identity[0] if identity is not None else "",
                                              wait=pool.config.read_timeout_ms / 1000.0, send=send)
        finally:
            if spec.changes:
                self.context.forget_written(pool.name, spec, args)

    def lost(self, call: Call, pool: UpstreamPool, exc: UpstreamError, started: float, **fields: Any) -> Answer:
        """The answer to a call whose metastore failed it: planned again when the failure says the metastore is
        gone (a read: see :mod:`waggle.call.lost`), else a ``MetaException`` saying what is known; or the end of
        the connection, half a reply sent."""
        health = self.context.health
        if lost.gone(call, exc):
            health.found_down(pool.name, exc.detail)
        else:
            health.call_failed(pool.name, exc)
        if exc.partial_reply_sent:
            record.failed_mid_reply(call.name, pool.name, exc.detail)
            record.cut_short(call.name, pool.name, started, "upstream")
            raise _Abandon() from exc
        if lost.again(call, exc):
            assert exc.lost is not None
            record.planned_again(pool.name, exc.lost.value)
            return self._respond(replace(call, attempt=call.attempt + 1), started)
        message, outcome = lost.answer(call, exc)
        return self.fail(call, message, outcome, pool.name, error=exc.detail, **fields)

    def _replied(self, step: Send, reply: Reply | None, pool: UpstreamPool) -> Answer:
        """The answer to a metastore's reply, with what it leaves behind applied; a member that turns out not to
        have the method is answered through its bridge."""
        answer = finish.reply(step, reply, self.wire, plan_io.declared_layout(step, reply, pool, self.session.identity))
        if answer.settled is not None:
            self._settle(answer.settled)
        if answer.bridge_instead:
            pool.caps.learn_missing(step.call.name)
            answer = plan_io.bridge(self, step, pool)
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
        grants, filtering = self.context.grants, self.filtering
        if filtering is not None and grants is not None:  # a listing keeps what the caller may see
            answer = admission.answer_for_caller(grants, filtering, header, ENTRIES.get(header.name, NO_ENTRY)[1],
                                                 args, answer, self.wire)
        self.last = answer
        self._write(answer)
        if answer.record:
            self._record(header.name, args, started, answer)

    def _record(self, method: str, args: Any, started: float, answer: Answer) -> None:
        record.call(method, args, started, answer, self.context.log_calls)

