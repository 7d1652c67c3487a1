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
from typing import TYPE_CHECKING, Any

import gevent
import gevent.event
import gevent.monkey
from gevent.pool import Pool
from gevent.server import StreamServer

from waggle.common import metrics
from waggle.common.logging import Throttle, get_logger
from waggle.config.timing import DRAIN_KILL_SECONDS, DRAIN_POLL_SECONDS, REFUSE_TIMEOUT
from waggle.endpoint import HttpEndpoint
from waggle.runtime import Runtime
from waggle.security.frontdoor import Refused
from waggle.server.budget import ConnectionBudget
from waggle.server.driver import ClientDriver

if TYPE_CHECKING:
    from waggle.reload import Reloader

log = get_logger("waggle.server")

#: connections over the limit being answered at once
REFUSERS = 64


class WaggleServer:
    def __init__(self, runtime: Runtime, reloader: Reloader | None = None, listener: socket.socket | None = None,
                 budget: ConnectionBudget | None = None, http: bool = True) -> None:
        """``listener``: a listening socket to serve (a worker's, on the pod's port) instead of binding one;
        ``budget``: the bound on client connections (this process's own, by default); ``http``: serve the HTTP
        endpoint too (a worker's supervisor serves it)."""
        self.runtime = runtime
        self.reloader = reloader
        server = runtime.config.server
        self._budget = budget or ConnectionBudget(server.max_connections)
        self._refused_log = Throttle(1.0)
        self._pool = Pool(server.max_connections + REFUSERS)
        self._server = StreamServer(listener or (server.bind_address, server.port), self._handle,
                                    spawn=self._pool, backlog=None if listener else 1024)
        self._connections: dict[gevent.Greenlet, ClientDriver] = {}
        self._stopped = gevent.event.Event()
        self.http = HttpEndpoint(runtime, server.bind_address, server.endpoint_port, reloader) if http else None

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
        except OSError:
            self._server.close()
            raise
        log.info("server.listening", address=f"{self.address[0]}:{self.address[1]}",
                 wire=self.runtime.config.server.wire.describe(),
                 max_connections=self.runtime.config.server.max_connections,
                 gevent_patched=gevent.monkey.is_module_patched("socket"),
                 http_port=self.http.port if self.http is not None else None)

    def _handle(self, sock: socket.socket, peer: Any) -> None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        door = self.runtime.guard.front_door
        if door is None:
            conn = ClientDriver(sock, peer, self.runtime)
        else:
            try:
                secured, who = door.open(sock)
            except Refused as exc:
                metrics.AUTH_FAILURES.labels(door.kind).inc()
                log.warning("client.unauthenticated", peer=f"{peer[0]}:{peer[1]}", reason=str(exc))
                sock.close()
                return
            conn = ClientDriver(secured, peer, self.runtime, who)
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
        lifecycle = self.runtime.lifecycle
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
        if self.http is not None:
            self.http.stop()
        self.runtime.close()
        log.info("server.stopped")
        self._stopped.set()

    def terminate(self) -> None:
        """SIGTERM or SIGINT: drain with the running configuration's timings."""
        current = self.runtime.config.server
        gevent.spawn(self.stop, current.graceful_stop_seconds, current.shutdown_delay_seconds)

    def wait(self) -> None:
        self._stopped.wait()


def _close(conn: ClientDriver, sock: socket.socket) -> None:
    """Close a client's connection. With TLS, the TLS socket took ``sock``'s descriptor over (``sock`` is left
    detached, and closing it does nothing), so the socket the driver used is closed too."""
    for s in (conn.sock, sock):
        try:
            s.close()
        except OSError:
            pass
