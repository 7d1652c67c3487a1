"""One client connection: read a call, route it, relay it, answer, repeat.

A message that needs no change travels byte for byte in both directions; anything else is decoded and
re-encoded. An upstream failure is answered with a ``MetaException`` naming the metastore (or a
``TApplicationException`` for a method that declares none) and the client's connection stays usable. A
client that sends something that is not Thrift is disconnected; nobody else notices.
"""

from __future__ import annotations

import itertools
import socket
import time
from typing import Any

import structlog
from thrift.Thrift import TApplicationException, TMessageType

from waggle.config.model import TransportKind
from waggle.hms.methods import database_of
from waggle.hms.service import METHOD_IO, MethodIO
from waggle.ops.logging import get_logger
from waggle.server.runtime import Runtime
from waggle.upstream.client import Identity, Reply, UpstreamError
from waggle.upstream.pool import UpstreamPool
from waggle.wire import Header, PeerClosed, Wire, WireError, decode_message

log = get_logger("waggle.call")
_ids = itertools.count(1)


class ClientConnection:
    __slots__ = ("calls", "conn_id", "identity", "idle", "peer", "runtime", "sock", "wire")

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
                self._handle(header)
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

    # -- one call ----------------------------------------------------------------------------------------
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
            args = wire.read_struct(io.args)
        raw = wire.read_end()
        started = time.perf_counter()
        if name == "set_ugi" and args is not None:
            self._set_ugi(header, io, args)
            return
        pool = self.runtime.routes.primary
        try:
            reply = self._forward(pool, header, io, args, raw)
        except UpstreamError as exc:
            if exc.partial_reply_sent:
                log.warning("call.failed_mid_reply", method=name, member=pool.name, error=exc.detail)
                raise _Abandon() from exc
            self._answer_failure(header, io, str(exc))
            if self.runtime.log_calls:
                log.debug("call", method=name, db=database_of(args), member=pool.name, outcome="upstream_error",
                          error=exc.detail, ms=round(1000 * (time.perf_counter() - started), 3))
            return
        if reply is not None:
            if reply.streamed:
                self.wire.send_raw(reply.raw)  # the rest of a reply whose head is already on its way
            else:
                self._relay(reply, io, pool)
        if self.runtime.log_calls:
            log.debug("call", method=name, db=database_of(args), member=pool.name, outcome=_outcome(reply, io),
                      ms=round(1000 * (time.perf_counter() - started), 3))

    def _forward(self, pool: UpstreamPool, header: Header, io: MethodIO | None, args: Any, raw: bytes
                 ) -> Reply | None:
        oneway = header.mtype == TMessageType.ONEWAY
        upstream = pool.acquire(self.identity)
        try:
            if upstream.wire.format.protocol is not self.wire.format.protocol:
                if args is None:
                    raise UpstreamError(pool.name, f"cannot translate unknown method '{header.name}'")
                raw = upstream.wire.encode(header.name, header.mtype, header.seqid, args)
            if upstream.wire.format == self.wire.format and self.wire.format.transport is TransportKind.BUFFERED:
                # Relayed unchanged: a large reply streams through instead of waiting to be complete.
                return upstream.call(raw, oneway, self.wire.send_raw, self.runtime.config.server.stream_after_bytes)
            return upstream.call(raw, oneway)
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

    def _set_ugi(self, header: Header, io: MethodIO | None, args: Any) -> None:
        """Remember the client's identity; every later call travels on a connection opened as this user."""
        assert io is not None and io.result is not None
        self.identity = (str(args.user_name or ""), tuple(str(g) for g in args.group_names or ()))
        structlog.contextvars.bind_contextvars(user=self.identity[0])
        pool = self.runtime.routes.primary
        try:
            groups = pool.set_ugi_reply(self.identity)
        except UpstreamError as exc:
            self._answer_failure(header, io, str(exc))
            return
        self.wire.send(header.name, TMessageType.REPLY, header.seqid, io.result(success=groups))


class _Abandon(Exception):
    """The client connection can no longer be answered (half a reply was sent); close it."""


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

