"""One client connection: read a call, route it, relay it, answer, repeat.

A message that needs no change travels byte for byte in both directions; anything else is decoded and
re-encoded. An upstream failure is answered with a ``MetaException`` naming the metastore (or a
``TApplicationException`` for a method that declares none) and the client's connection stays usable. A
client that sends something that is not Thrift is disconnected; nobody else notices.
"""

from __future__ import annotations

import gc
import itertools
import socket
import time
from collections.abc import Callable
from typing import Any

import structlog
from thrift.Thrift import TApplicationException, TMessageType, TType

from waggle.common import metrics
from waggle.common.logging import Throttle, get_logger
from waggle.config.model import MetastoreConfig, ProtocolKind, TransportKind
from waggle.hms.bridges import BRIDGES, DEFAULT_CATALOG, MethodMissing, Wrap, applies_to, strip_catalog
from waggle.hms.methods import METHODS, Access, MethodSpec, Route, database_of
from waggle.hms.names import parse
from waggle.hms.rewrite import call_rewriter
from waggle.hms.service import METHOD_IO, MethodIO
from waggle.hms.splice import Splicer
from waggle.routing.access import table_visible
from waggle.routing.federation import Decision, Naming, Refused
from waggle.runtime import Routes, Runtime
from waggle.server.fanout import FanOut
from waggle.upstream import compat
from waggle.upstream.client import Identity, Reply, UpstreamError
from waggle.upstream.pool import Overloaded, UpstreamPool
from waggle.wire import Header, PeerClosed, Wire, WireError, decode_message, strings_in

log = get_logger("waggle.call")
_ids = itertools.count(1)
_REWRITER = call_rewriter()
_SPLICER = Splicer(_REWRITER)
#: set_ugi identities are remembered by the upstream pools: bound what one may cost.
_MAX_IDENTITY_CHARS = 65536


class ClientConnection:
    __slots__ = ("calls", "conn_id", "identity", "idle", "lock_owners", "peer", "runtime", "sock", "wire")

    def __init__(self, sock: socket.socket, peer: Any, runtime: Runtime) -> None:
        self.sock = sock
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.runtime = runtime
        self.conn_id = next(_ids)
        self.identity: Identity | None = None
        self.idle = True
        server = runtime.config.server
        self.wire = Wire(sock, server.wire, server.limits)
        self.calls = 0
        #: lock id -> the federated member that granted it (locks granted by the primary are not recorded)
        self.lock_owners: dict[int, MetastoreConfig] = {}

    def serve(self) -> None:
        structlog.contextvars.bind_contextvars(conn=self.conn_id, peer=self.peer)
        wire = self.wire
        try:
            while not self.runtime.draining:
                self.idle = True
                try:
                    header = wire.read_begin()
                except PeerClosed:
                    return
                self.idle = False
                self._admit(header)
                self.calls += 1
        except _Abandon:
            pass
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
                self._answer_failure(header, METHOD_IO.get(header.name), message)
        except (WireError, PeerClosed, OSError):
            pass

    # -- one call ----------------------------------------------------------------------------------------
    def _admit(self, header: Header) -> None:
        """Answer one call, or shed it when ``limits.max-in-flight-calls`` stay taken for the queue wait."""
        if header.name == "set_ugi":
            # never shed: a client that carries on without its identity would run as waggle's user upstream
            self._handle(header)
            return
        runtime = self.runtime
        slots = runtime.call_slots
        load = runtime.config.server.load
        if not slots.acquire(load.queue_wait_seconds):
            started = time.perf_counter()
            self.wire.skip_struct()
            self.wire.read_end()
            metrics.SHED.labels("calls").inc()
            self._answer_failure(header, METHOD_IO.get(header.name), f"waggle is overloaded: {slots.limit} calls "
                                 f"are in flight (limits.max-in-flight-calls); try again shortly")
            self._record(header.name, "-", started, "shed")
            return
        metrics.CALLS_IN_FLIGHT.inc()
        try:
            self._handle(header)
        finally:
            metrics.CALLS_IN_FLIGHT.dec()
            slots.release()

    def _handle(self, header: Header) -> None:
        wire = self.wire
        name = header.name
        if header.mtype not in (TMessageType.CALL, TMessageType.ONEWAY):
            raise WireError(f"expected a call, got message type {header.mtype} for '{name}'")
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
        raw: bytes | None = wire.read_end()
        started = time.perf_counter()
        if name == "set_ugi" and args is not None:
            self._set_ugi(header, io, args, started)
            return
        runtime = self.runtime
        routes = runtime.routes  # one configuration and map for the whole call, even if a reload swaps them
        planner = routes.planner
        spec = METHODS.get(name)
        if spec is None or io is None or args is None:
            # not in our IDL: the primary answers, byte for byte, unless it names a database that is not the
            # primary's to answer for
            foreign = _foreign_database(*strings_in(raw or b"", self.wire.format.protocol), planner)
            if foreign is not None:
                if header.mtype != TMessageType.ONEWAY:
                    self.wire.send_application_error(
                        name, header.seqid, TApplicationException.UNKNOWN_METHOD,
                        f"Invalid method name: '{name}' (waggle does not know this method, and it names {foreign}; "
                        f"waggle cannot route it)")
                log.info("call.refused", method=name, reason="unknown method naming a routed database",
                         names=foreign)
                metrics.observe_call(UNKNOWN_METHOD, planner.primary.name, time.perf_counter() - started, "refused")
                return
            self._send_to(routes.primary, planner.naming(planner.primary), header, io, args, raw, None,
                          started)
            return
        if spec.route is Route.FANOUT:
            self._fan_out(routes, header, io, args, started)
            return
        if spec.route is Route.LOCK_ID:
            held = _lock_id(args) or -1
            owner = self.lock_owners.get(held)
            if owner is None:
                decision = Decision(planner.primary)
            elif owner.name in routes.pools:
                decision = Decision(routes.config.federation.member(owner.name))
            else:  # a reload removed the metastore that granted it
                decision = Decision(owner, f"lock {held} was granted by metastore '{owner.name}', which is no "
                                           f"longer in the federation")
            names: list[str] = []
        else:
            names = _REWRITER.names_in(args)
            locks = [(c.dbname or "", c.type) for c in args.rqst.component or ()] \
                if spec.access is Access.LOCK and args.rqst is not None else ()
            tables = _table_refs(args) if routes.mapped_tables else ()
            decision = planner.decide(spec, names, locks, runtime.created, tables)
        if decision.refusal is not None:
            self._refuse(header, io, decision)
            metrics.observe_call(name, decision.member.name, time.perf_counter() - started, "refused")
            if self.runtime.log_calls or decision.refused_as is Refused.META:
                log.info("call.refused", method=name, db=database_of(args), metastore=decision.member.name,
                         reason=decision.refusal)
            return
        naming = planner.naming(decision.member)
        pool = routes.pools[decision.member.name]
        # Catalogs: a metastore without them (Hive 2) gets plain names, and its replies are given the catalog
        # the client named.
        fill = None
        strip = False
        catalog = _catalog_named(names, args) if pool.caps.catalogs is not True else None
        if catalog is not None:
            catalogs = compat.probe_catalogs(pool, self.identity) if runtime.health.is_up(pool.name) \
                else pool.caps.catalogs
            if catalogs is False and catalog.lower() != DEFAULT_CATALOG:
                self._refuse(header, io, Decision(decision.member, f"catalog '{catalog}' does not exist in "
                                                  f"metastore '{pool.name}' (a Hive 2 metastore has only "
                                                  f"'{DEFAULT_CATALOG}')", Refused.NO_SUCH_OBJECT))
                metrics.observe_call(name, pool.name, time.perf_counter() - started, "refused")
                return
            strip = catalogs is not True and any(n.startswith("@") for n in names)
            fill = catalog if catalogs is False else None
        if decision.rewrite_request or strip:
            to_member = naming.to_member
            _REWRITER.rewrite(args, (lambda n: strip_catalog(to_member(n))) if strip else to_member)
            raw = None
        if name in BRIDGES and pool.caps.bridges(name, args):
            self._bridge(pool, naming, header, io, args, decision, started, fill)
            return
        reply = self._send_to(pool, naming, header, io, args, raw, decision, started, fill)
        if reply is None or reply.header.mtype != TMessageType.REPLY or reply.first_field > 0:
            return
        if decision.creates is not None:
            runtime.created.setdefault(decision.member.name, set()).add(decision.creates)
        if spec.access is Access.LOCK and not decision.member.primary:
            lock_id = _reply_lock_id(reply, io, pool)
            if lock_id is not None:
                self.lock_owners[lock_id] = decision.member
        elif name == "unlock" and decision.member is not planner.primary:
            self.lock_owners.pop(_lock_id(args) or -1, None)

    def _send_to(self, pool: UpstreamPool, naming: Naming, header: Header, io: MethodIO | None, args: Any,
                 raw: bytes | None, decision: Decision | None, started: float, fill: str | None = None
                 ) -> Reply | None:
        """Send one call to one member and answer the client: relayed, or with names rewritten.

        ``fill``: the catalog to put into the reply's empty catalog fields (the member has no catalogs).
        A bridged method the member turns out not to have goes to its bridge, and the member's pool learns it.
        """
        name = header.name
        runtime = self.runtime
        if not runtime.health.is_up(pool.name):
            self._answer_failure(header, io, runtime.health.down_message(pool.name))
            self._record(name, pool.name, started, "member_down", args=args)
            return None
        result_class = io.result if io is not None else None
        if result_class is not None:
            fill, rewrite_reply = _reply_changes(result_class, naming, decision, fill)
        else:
            fill, rewrite_reply = None, False
        try:
            reply = self._forward(pool, header, io, args, raw, stream=not rewrite_reply)
        except UpstreamError as exc:
            runtime.health.call_failed(pool.name, exc)
            if exc.partial_reply_sent:
                log.warning("call.failed_mid_reply", method=name, metastore=pool.name, error=exc.detail)
                metrics.observe_call(_label(name), pool.name, time.perf_counter() - started, "upstream")
                raise _Abandon() from exc
            self._answer_failure(header, io, str(exc))
            self._record(name, pool.name, started, "shed" if isinstance(exc, Overloaded) else "upstream_error",
                         args=args, error=exc.detail)
            return None
        if reply is not None:
            if reply.streamed:
                self.wire.send_raw(reply.raw)  # the rest of a reply whose head is already on its way
            elif reply.header.mtype == TMessageType.EXCEPTION and io is not None and decision is not None and \
                    applies_to(name, args) and _unknown_method(reply, io, pool):
                pool.caps.learn_missing(name)
                self._bridge(pool, naming, header, io, args, decision, started, fill)
                return None
            elif rewrite_reply and reply.header.mtype == TMessageType.REPLY and reply.first_field == 0:
                assert result_class is not None and decision is not None
                self._rewrite_reply(reply, result_class, pool, naming, decision, fill)
            else:
                self._relay(reply, io, pool)
        self._record(name, pool.name, started, _outcome(reply, io), args=args)
        return reply

    def _bridge(self, pool: UpstreamPool, naming: Naming, header: Header, io: MethodIO, args: Any,
                decision: Decision, started: float, fill: str | None) -> None:
        """Answer a method the member lacks (or cannot take as it is) through its bridge."""
        name = header.name
        runtime = self.runtime
        if not runtime.health.is_up(pool.name):
            self._answer_failure(header, io, runtime.health.down_message(pool.name))
            self._record(name, pool.name, started, "member_down", args=args)
            return
        outcome = "ok"
        bridge = BRIDGES[name]
        try:
            bridged = compat.Bridged(pool, self.identity, header.seqid)
            if isinstance(bridge.run, Wrap) and self.wire.format.protocol is ProtocolKind.BINARY and \
                    pool.config.wire.protocol is ProtocolKind.BINARY:
                result = self._wrap(bridge.run, bridged, pool, naming, header, io, args, decision, fill)
            else:
                result = bridged.run(name, args)
        except MethodMissing as exc:
            self._answer_failure(header, io, f"metastore '{pool.name}' has neither {name} nor {exc.method}")
            outcome = "no_equivalent"
        except UpstreamError as exc:
            if not isinstance(exc, compat.ApplicationError):  # that one answered: it is up
                runtime.health.call_failed(pool.name, exc)
            self._answer_failure(header, io, str(exc))
            outcome = "shed" if isinstance(exc, Overloaded) else "upstream_error"
        except (WireError, OSError, _Abandon):
            raise
        except Exception as exc:  # a defect in a bridge must not cost the client its connection
            log.error("bridge.failed", method=name, metastore=pool.name, error=repr(exc))
            self._answer_failure(header, io, f"waggle could not answer {name} for metastore '{pool.name}' "
                                             f"through {bridge.via}: {exc!r}")
            outcome = "bridge_error"
        else:
            if result is not None:
                self.wire.send_raw(self._encode_result(header, result, pool, naming, decision, fill))
        self._record(name, pool.name, started, outcome, args=args, bridge=bridge.via)

    def _wrap(self, wrap: Wrap, bridged: compat.Bridged, pool: UpstreamPool, naming: Naming, header: Header,
              io: MethodIO, args: Any, decision: Decision, fill: str | None) -> Any:
        """A bridge whose answer is the older call's list: its reply is re-framed in its encoded form, then relayed,
        spliced or rewritten like any reply. Returns the result struct to send instead when it cannot be."""
        name = header.name
        older, older_args = wrap.request(args, bridged)
        older_io = METHOD_IO[older]
        assert older_io.result is not None and io.result is not None
        reply = self._forward(pool, Header(older, TMessageType.CALL, header.seqid), older_io, older_args, None,
                              stream=False)
        assert reply is not None
        raw = compat.wrap_reply(reply.raw, older, name, wrap.field) \
            if reply.header.mtype == TMessageType.REPLY and reply.first_field == 0 else None
        if raw is None:  # an exception: decoded, as by any bridge
            _, result = decode_message(reply.raw, pool.config.wire.protocol, older_io.result, pool.limits)
            if isinstance(result, TApplicationException):
                if compat.is_unknown_method(result):
                    raise MethodMissing(older)
                raise compat.ApplicationError(pool.name, f"answered {older} with an application error: "
                                                         f"{result.message}")
            return wrap.result(name, result)
        wrapped = Reply(Header(name, TMessageType.REPLY, header.seqid), raw, 0, 0)
        fill, rewrite = _reply_changes(io.result, naming, decision, fill)
        if rewrite:
            self._rewrite_reply(wrapped, io.result, pool, naming, decision, fill)
        else:
            self.wire.send_raw(raw)
        return None

    def _rewrite_reply(self, reply: Reply, result_class: type, pool: UpstreamPool, naming: Naming,
                       decision: Decision, fill: str | None = None) -> None:
        to_client = _to_client(naming, decision)
        if fill is None and naming.member.mapped_tables is None and pool.config.wire == self.wire.format and \
                self.wire.format.protocol is ProtocolKind.BINARY:
            spliced = _SPLICER.splice_names(reply.raw, result_class, to_client, pool.limits)
            if spliced is not None:
                self.wire.send_raw(spliced)
                return
        # Decoding a large reply allocates tens of thousands of objects that live until it is re-encoded; with
        # the collector on, that sets off full collections over the whole heap (about half the time of this
        # path for 3,000 partitions). Thrift structs hold no cycles, and nothing here yields to another
        # greenlet, so the collector is paused for this stretch only.
        collecting = gc.isenabled()
        gc.disable()
        try:
            header, result = decode_message(reply.raw, pool.config.wire.protocol, result_class, pool.limits)
            raw = self._encode_result(header, result, pool, naming, decision, fill, to_client)
            del result
        finally:
            if collecting:
                gc.enable()
        self.wire.send_raw(raw)

    def _encode_result(self, header: Header, result: Any, pool: UpstreamPool, naming: Naming, decision: Decision,
                       fill: str | None, to_client: Callable[[str], str] | None = None) -> bytes:
        """A decoded result in the member's names, encoded for the client: tables filtered, names rewritten."""
        if naming.member.mapped_tables is not None:  # on the member's names, before they are rewritten
            _filter_tables(result, naming.member, decision, METHODS[header.name])
        if not naming.identity:
            _REWRITER.rewrite(result, to_client or _to_client(naming, decision))
        if fill is not None:
            compat.fill_catalog(result, fill)
        return self.wire.encode(header.name, TMessageType.REPLY, header.seqid, result)

    def _refuse(self, header: Header, io: MethodIO, decision: Decision) -> None:
        if header.mtype == TMessageType.ONEWAY:
            return
        assert decision.refusal is not None
        result = io.exception_result(decision.refused_as.value, decision.refusal)
        if result is not None:
            self.wire.send(header.name, TMessageType.REPLY, header.seqid, result)
        else:
            self.wire.send_application_error(header.name, header.seqid, TApplicationException.INTERNAL_ERROR,
                                             decision.refusal)

    def _fan_out(self, routes: Routes, header: Header, io: MethodIO, args: Any, started: float) -> None:
        fan = FanOut(self.runtime, routes, self.identity)
        name = header.name
        if name == "get_table_meta":
            result, outcomes = fan.table_meta(name, header.seqid, io, args)
        elif name == "get_all_functions":
            result, outcomes = fan.functions(name, header.seqid, io)
        else:
            result, outcomes = fan.databases(name, header.seqid, io, getattr(args, "pattern", None))
        answered = [o for o in outcomes if o.error is None]
        if outcomes and not answered:
            self._answer_failure(header, io, "; ".join(str(o.error) for o in outcomes))
            outcome = "upstream_error"
        else:
            self.wire.send(name, TMessageType.REPLY, header.seqid, result)
            outcome = "ok"
        self._record(name, "*", started, outcome, metastores=[o.pool.name for o in answered],
                     omitted=[o.pool.name for o in outcomes if o.error is not None])

    def _record(self, method: str, metastore: str, started: float, outcome: str, args: Any = None,
                **fields: Any) -> None:
        """Count one answered call (metrics) and log it.

        At debug, every call is logged. Otherwise a call that failed upstream is logged at info, and shed calls
        at most once a second per limit (the metrics count each one).
        """
        seconds = time.perf_counter() - started
        kind = _ERROR_KINDS.get(outcome, "exception")
        metrics.observe_call(_label(method), metastore, seconds, kind)
        if self.runtime.log_calls:
            level = log.debug
        elif outcome == "upstream_error" or (kind == "shed" and _shed_log.allow(metastore)):
            level = log.info
        else:
            return
        level("call", method=method[:200], db=database_of(args) if args is not None else None, metastore=metastore,
              outcome=outcome, duration_ms=round(1000 * seconds, 3), **fields)

    def _forward(self, pool: UpstreamPool, header: Header, io: MethodIO | None, args: Any, raw: bytes | None,
                 stream: bool = True) -> Reply | None:
        oneway = header.mtype == TMessageType.ONEWAY
        upstream = pool.acquire(self.identity)
        try:
            if raw is None or upstream.wire.format.protocol is not self.wire.format.protocol:
                if args is None:
                    raise UpstreamError(pool.name, f"cannot translate unknown method '{header.name}'")
                raw = upstream.wire.encode(header.name, header.mtype, header.seqid, args)
            if stream and upstream.wire.format == self.wire.format and \
                    self.wire.format.transport is TransportKind.BUFFERED:
                # Relayed unchanged: a large reply streams through instead of waiting to be complete.
                return upstream.call(raw, oneway, self.wire.send_raw, self.runtime.config.server.stream_after_bytes)
            reply = upstream.call(raw, oneway)
            if oneway and io is None:
                upstream.broken = True  # an unknown oneway call may be answered anyway: never reuse it
            return reply
        except BaseException:
            upstream.broken = True
            raise
        finally:
            pool.release(upstream)

    def _relay(self, reply: Reply, io: MethodIO | None, pool: UpstreamPool) -> None:
        upstream_protocol = pool.config.wire.protocol
        if upstream_protocol is self.wire.format.protocol:
            self.wire.send_raw(reply.raw)
            return
        if io is None or io.result is None:
            return
        header, body = decode_message(reply.raw, upstream_protocol, io.result, pool.limits)
        self.wire.send(header.name, header.mtype, header.seqid, body)

    def _answer_failure(self, header: Header, io: MethodIO | None, message: str) -> None:
        if header.mtype == TMessageType.ONEWAY:
            return
        result = io.meta_exception_result(message) if io is not None else None
        if result is not None:
            self.wire.send(header.name, TMessageType.REPLY, header.seqid, result)
        else:
            self.wire.send_application_error(header.name, header.seqid, TApplicationException.INTERNAL_ERROR,
                                             message)

    def _set_ugi(self, header: Header, io: MethodIO | None, args: Any, started: float) -> None:
        """Remember the client's identity; every later call travels on a connection opened as this user."""
        assert io is not None and io.result is not None
        identity = (str(args.user_name or ""), tuple(str(g) for g in args.group_names or ()))
        size = len(identity[0]) + sum(len(g) for g in identity[1])
        if size > _MAX_IDENTITY_CHARS:
            self._answer_failure(header, io, f"set_ugi refused: the user and groups are {size} characters long; "
                                             f"the limit is {_MAX_IDENTITY_CHARS}")
            return
        self.identity = identity
        structlog.contextvars.bind_contextvars(user=self.identity[0])
        pool = self.runtime.routes.primary
        try:
            groups = pool.set_ugi_reply(self.identity)
        except UpstreamError as exc:
            self._answer_failure(header, io, str(exc))
            self._record(header.name, pool.name, started, "upstream_error", error=exc.detail)
            return
        self.wire.send(header.name, TMessageType.REPLY, header.seqid, io.result(success=groups))
        self._record(header.name, pool.name, started, "ok")


class _Abandon(Exception):
    """The client connection can no longer be answered (half a reply was sent); close it."""


#: the metrics label of every method waggle's IDL does not have (client-chosen names must not become labels)
UNKNOWN_METHOD = "(unknown)"
_shed_log = Throttle(1.0)


def _label(method: str) -> str:
    return method if method in METHOD_IO else UNKNOWN_METHOD


#: a call's outcome -> the kind of error counted in waggle_call_errors_total (None: not an error; any outcome
#: not listed is an exception the metastore answered with)
_ERROR_KINDS: dict[str, str | None] = {
    "ok": None, "sent": None, "member_down": "upstream", "upstream_error": "upstream", "no_equivalent": "upstream",
    "bridge_error": "upstream", "shed": "shed", "refused": "refused",
}


def _outcome(reply: Reply | None, io: MethodIO | None) -> str:
    if reply is None:
        return "sent"
    if reply.header.mtype == TMessageType.EXCEPTION:
        return "application_error"
    if reply.first_field <= 0:
        return "ok"
    if io is not None and io.result is not None:
        spec = io.result.thrift_spec  # type: ignore[attr-defined]
        if reply.first_field < len(spec) and spec[reply.first_field]:
            return str(spec[reply.first_field][3][0].__name__)
    return "exception"



def _reply_changes(result_class: type, naming: Naming, decision: Decision | None, fill: str | None
                   ) -> tuple[str | None, bool]:
    """(the catalog to fill in, if this result can hold one; whether the reply must be changed at all)."""
    fill = fill if fill is not None and compat.carries_catalog(result_class) else None
    filters = decision is not None and naming.member.mapped_tables is not None
    return fill, (not naming.identity and _REWRITER.touches(result_class)) or filters or fill is not None


def _to_client(naming: Naming, decision: Decision) -> Callable[[str], str]:
    requested = decision.requested
    shown: dict[str, str] = {}  # one name, thousands of fields: resolve it once per reply

    def to_client(name: str) -> str:
        out = shown.get(name)
        if out is None:
            out = shown[name] = naming.to_client(name, requested)
        return out

    return to_client


def _unknown_method(reply: Reply, io: MethodIO, pool: UpstreamPool) -> bool:
    assert io.result is not None
    _, error = decode_message(reply.raw, pool.config.wire.protocol, io.result, pool.limits)
    return compat.is_unknown_method(error)


def _catalog_named(names: list[str], args: Any) -> str | None:
    """The catalog a call names: in an ``@cat#db`` string, or in a request struct's ``catName``."""
    for name in names:
        if name.startswith("@"):
            catalog = parse(name).catalog
            if catalog:
                return catalog
    for entry in args.thrift_spec or ():
        if entry and entry[1] == TType.STRUCT:
            inner = getattr(args, entry[2], None)
            for attr in compat.CATALOG_ATTRS:
                value = getattr(inner, attr, None)
                if isinstance(value, str) and value:
                    return value
    return None


def _foreign_database(first: str | None, strings: list[str], planner: Any) -> str | None:
    """The database, if any, that an unknown call names and that the primary cannot answer for as it is.

    Without an IDL nothing says which strings are database names: the first argument (where every HMS method
    puts its database) and ``@cat#db`` strings anywhere are taken as such."""
    candidates = [first] if first else []
    candidates += [text for text in strings if text.startswith("@")]
    for text in candidates:
        for candidate in {text, text.partition(".")[0]}:
            found = planner.lookup(candidate) if candidate else None
            if found is not None and found.target is not None and (
                    not found.target.member.primary or found.target.db != (parse(candidate).db or "").lower()):
                return f"database '{found.shown}' of metastore '{found.target.member.name}'"
    return None


# -- helpers for lock ids and mapped-tables ----------------------------------------------------------------
def _lock_id(args: Any) -> int | None:
    """The lock id of check_lock / unlock / heartbeat arguments."""
    for attr in ("rqst", "ids"):
        inner = getattr(args, attr, None)
        if inner is not None:
            value = getattr(inner, "lockid", None)
            if value is not None:
                return int(value)
    return None


def _reply_lock_id(reply: Reply, io: MethodIO, pool: UpstreamPool) -> int | None:
    assert io.result is not None
    _, result = decode_message(reply.raw, pool.config.wire.protocol, io.result, pool.limits)
    response = getattr(result, "success", None)
    value = getattr(response, "lockid", None)
    return int(value) if value is not None else None


_DB_ATTRS = ("dbname", "db_name", "dbName")
_TABLE_ATTRS = ("tbl_name", "tblName", "tableName", "table_name", "tablename", "tbl")
_ARGS_TABLE_ATTRS = (*_TABLE_ATTRS, "name")  # drop_table(dbname, name)


def _pair(obj: Any, table_attrs: tuple[str, ...]) -> tuple[str, str] | None:
    db = next((v for a in _DB_ATTRS if isinstance(v := getattr(obj, a, None), str)), None)
    if db is None:
        return None
    table = next((v for a in table_attrs if isinstance(v := getattr(obj, a, None), str)), None)
    return (db, table) if table else None


def _table_refs(args: Any) -> list[tuple[str, str]]:
    """(database, table) pairs named by a call's arguments or their request structs, for ``mapped-tables``."""
    pair = _pair(args, _ARGS_TABLE_ATTRS)
    out = [pair] if pair is not None else []
    for entry in args.thrift_spec or ():
        if entry and entry[1] == TType.STRUCT:
            inner = getattr(args, entry[2], None)
            pair = _pair(inner, _TABLE_ATTRS) if inner is not None else None
            if pair is not None:
                out.append(pair)
    return out


def _filter_tables(result: Any, member: MetastoreConfig, decision: Decision, spec: MethodSpec) -> None:
    """Leave out of a reply the tables that ``mapped-tables`` hides."""
    success = getattr(result, "success", None)
    if success is None:
        return
    if spec.lists_tables and isinstance(success, list):
        dbs = list(decision.requested)
        if dbs:
            result.success = [t for t in success if table_visible(member, dbs[0], t)]
        return
    tables = success if isinstance(success, list) else getattr(success, "tables", None)
    if isinstance(tables, list):
        kept = [t for t in tables if not hasattr(t, "tableName") or
                table_visible(member, t.dbName or "", t.tableName or "")]
        if tables is success:
            result.success = kept
        else:
            success.tables = kept
