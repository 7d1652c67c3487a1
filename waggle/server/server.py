"""The gevent Thrift server: one greenlet per client connection, a bounded number of them, graceful stop.

A connection over ``max-connections`` is not queued: its first call is answered with a ``MetaException``
saying so, and it is closed (at most :data:`REFUSERS` such answers at once; beyond that, the listen backlog).
A worker of ``waggle serve --workers`` counts against the pod's bound (:mod:`waggle.server.budget`).

Stopping (SIGTERM): readiness fails at once; for ``shutdown-delay`` seconds everything is still served, so load
balancers move clients away; then the listener closes, idle connections are closed, and calls in flight get
``thrift-server-stop-timeout-val-in-seconds`` to finish before waggle exits.
"""

from __future__ import annotations

import socket
import time
from typing import Any

import gevent
import gevent.event
import gevent.monkey
from gevent.pool import Pool
from gevent.server import StreamServer

from waggle.call.values import Session
from waggle.common import metrics
from waggle.common.logging import Throttle, get_logger
from waggle.common.streams import SocketStream
from waggle.config.timing import DRAIN_KILL_SECONDS, DRAIN_POLL_SECONDS, REFUSE_TIMEOUT
from waggle.security.frontdoor import Refused
from waggle.server.budget import ConnectionBudget
from waggle.server.context import HttpSide, ServerContext
from waggle.server.driver import ClientDriver

log = get_logger("waggle.server")

#: connections over the limit being answered at once
REFUSERS = 64


class WaggleServer:
    def __init__(self, context: ServerContext, listener: socket.socket | None = None,
                 budget: ConnectionBudget | None = None, http: HttpSide | None = None,
                 doors: tuple[HttpSide, ...] = ()) -> None:
        """``context``: what is running (the runtime); ``listener``: a listening socket to serve (a worker's, on
        the pod's port) instead of binding one; ``budget``: the bound on client connections (this process's own,
        by default); ``http``: the HTTP endpoint to serve with it (none for a worker: its supervisor serves it);
        ``doors``: other ports of this process's that serve clients (the Iceberg REST port), started and stopped
        with the Thrift port."""
        self.context = context
        server = context.config.server
        self._budget = budget or ConnectionBudget(server.max_connections)
        self._refused_log = Throttle(1.0)
        self._pool = Pool(server.max_connections + REFUSERS)
        self._server = StreamServer(listener or (server.bind_address, server.port), self._handle,
                                    spawn=self._pool, backlog=None if listener else 1024)
        self._connections: dict[gevent.Greenlet, ClientDriver] = {}
        self._stopped = gevent.event.Event()
        self.http = http
        self.doors = doors

    @property
    def address(self) -> tuple[str, int]:
        return self._server.address  # type: ignore[no-any-return]

    @property
    def connections(self) -> int:
        """Client connections this process serves now."""
        return len(self._connections)

    def start(self) -> None:
        self._server.start()
        try:
            if self.http is not None:
                self.http.start()
            for door in self.doors:
                door.start()
        except OSError:
            self._server.close()
            if self.http is not None:
                self.http.stop()
            raise
        log.info("server.listening", address=f"{self.address[0]}:{self.address[1]}",
                 wire=self.context.config.server.wire.describe(),
                 max_connections=self.context.config.server.max_connections,
                 gevent_patched=gevent.monkey.is_module_patched("socket"),
                 http_port=self.http.port if self.http is not None else None)

    def _handle(self, sock: socket.socket, peer: Any) -> None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        door = self.context.guard.front_door
        if door is None:
            conn = ClientDriver(SocketStream(sock), peer, self.context)
        else:
            try:
                secured, who = door.open(sock)
            except Refused as exc:
                metrics.AUTH_FAILURES.labels(door.kind).inc()
                log.warning("client.unauthenticated", peer=f"{peer[0]}:{peer[1]}", reason=str(exc))
                sock.close()
                return
            conn = ClientDriver(SocketStream(secured), peer, self.context, Session.of(who))
            if who is not None:
                log.info("client.authenticated", peer=conn.peer, user=who.user, principal=who.principal,
                         mechanism=who.mechanism, qop=who.qop)
        budget = self._budget
        if not budget.admit():
            metrics.SHED.labels("connections").inc()
            if self._refused_log.allow("connections"):  # at most once a second: the metric counts each one
                log.warning("client.refused", peer=conn.peer, connections=budget.open(), limit=budget.limit)
            try:
                conn.refuse(f"waggle is serving {budget.limit} client connections, its limit "
                            f"(max-connections); try again shortly", REFUSE_TIMEOUT)
            finally:
                _close(conn, sock)
            return
        me = gevent.getcurrent()
        self._connections[me] = conn
        metrics.CLIENT_CONNECTIONS.inc()
        try:
            conn.serve()
        finally:
            self._connections.pop(me, None)
            budget.release()
            metrics.CLIENT_CONNECTIONS.dec()
            _close(conn, sock)

    def stop(self, grace_seconds: float, delay_seconds: float = 0.0) -> None:
        """Fail readiness, keep serving for ``delay_seconds``, stop accepting, let calls in flight finish within
        ``grace_seconds``, then close everything."""
        lifecycle = self.context.lifecycle
        if not lifecycle.stop():
            return  # a second SIGTERM: the first one's schedule stands
        log.info("server.stopping", delay_seconds=delay_seconds, grace_seconds=grace_seconds,
                 connections=len(self._connections))
        if delay_seconds > 0:
            gevent.sleep(delay_seconds)
        lifecycle.drain()
        self._server.close()
        log.info("server.draining", connections=len(self._connections),
                 busy=sum(1 for c in self._connections.values() if not c.idle))
        deadline = time.monotonic() + grace_seconds
        while True:
            idle = [g for g, c in self._connections.items() if c.idle]
            if idle:
                gevent.killall(idle, block=False)
            busy = [c for c in self._connections.values() if not c.idle]
            if not busy or time.monotonic() >= deadline:
                break
            gevent.sleep(DRAIN_POLL_SECONDS)
        if self._connections:
            log.warning("server.grace_expired", abandoned=len(self._connections))
            gevent.killall(list(self._connections), timeout=DRAIN_KILL_SECONDS)
        for door in self.doors:
            door.stop()
        if self.http is not None:
            self.http.stop()
        self.context.close()
        log.info("server.stopped")
        self._stopped.set()

    def terminate(self) -> None:
        """SIGTERM or SIGINT: drain with the running configuration's timings."""
        current = self.context.config.server
        gevent.spawn(self.stop, current.graceful_stop_seconds, current.shutdown_delay_seconds)

    def wait(self) -> None:
        self._stopped.wait()


def _close(conn: ClientDriver, sock: socket.socket) -> None:
    """Close a client's connection: its stream (the socket the driver used, a waiter on it woken), then the
    accepted socket. With TLS, the TLS socket took ``sock``'s descriptor over (``sock`` is left detached, and
    closing it does nothing); without, it is the stream's own socket, closed already."""
    conn.stream.close()
    try:
        sock.close()
    except OSError:
        pass
