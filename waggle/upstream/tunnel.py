"""The proxy's side of an SSH tunnel: one supervised helper process per tunnelled metastore.

paramiko's maintainers do not support it under gevent's monkey-patching, and SSH's crypto would compete with
every client for the event loop. So waggle runs each tunnel in ``python -m waggle.tunnel`` (plain threads,
its own interpreter and core), started here when the proxy starts, restarted (with a backoff) if it exits,
and stopped when its stdin closes. Its events arrive as JSON lines on a pipe, read by a greenlet.

The helper forwards a local port. Pooled connections to the metastore connect to that port and read one status
line first (``OK``, or ``ERR`` naming the hop that failed), so a connection opened while the tunnel is broken
fails with that hop's error, and opening it is what makes the helper rebuild the tunnel: the next call, or
the next health check, repairs it. A connection that the tunnel loses mid-call is explained by the helper's
``closed`` event for it, which names the hop.
"""

from __future__ import annotations

import json
import socket
import sys
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any

import gevent
import gevent.event
from gevent import subprocess

from waggle.common import metrics
from waggle.common.logging import get_logger
from waggle.config.model import HostPort, MetastoreConfig
from waggle.config.timing import TUNNEL_HELPER_STEADY_SECONDS, TUNNEL_RESTART_DELAYS, TUNNEL_STARTUP_WAIT
from waggle.tunnel.spec import TunnelSpec, spec_for

log = get_logger("waggle.tunnel")

#: How many closed-connection reports are kept for :meth:`Tunnel.explain`.
CLOSED_KEPT = 4096


class TunnelUnavailable(Exception):
    """No connection through the tunnel right now; ``str()`` says why, naming the hop when one failed."""


@dataclass(slots=True)
class TunnelStatus:
    state: str = "starting"  # starting, up, down
    since: float = 0.0
    hop: str = ""  # the hop that failed, while down
    reason: str = ""
    builds: int = 0  # times the whole route was connected
    helper_starts: int = 0
    helper_pid: int | None = None

    @property
    def up(self) -> bool:
        return self.state == "up"

    @property
    def reconnects(self) -> int:
        """Builds after the first one."""
        return max(0, self.builds - 1)


class Tunnel:
    def __init__(self, member: MetastoreConfig) -> None:
        self.member = member.name
        self.spec: TunnelSpec = spec_for(member)
        self.status = TunnelStatus(since=time.time())
        self.port: int | None = None
        self._listening = gevent.event.Event()
        self._news = gevent.event.Event()
        self._closed: OrderedDict[int, str | None] = OrderedDict()
        self._proc: subprocess.Popen[bytes] | None = None
        self._greenlet: gevent.Greenlet | None = None
        self._closing = False
        self._helper_running = False
        self._connecting = ""  # the hop the helper is connecting now
        #: replaced or removed by a reload: its metastore's gauges belong to someone else now
        self._retired = False
        #: called with each of the helper's events, and ``{"event": "exited", ...}`` when it exits (a supervisor
        #: passes them on to its workers, whose tunnels follow this one: see waggle.workers.shared)
        self.listeners: list[Callable[[dict[str, Any]], None]] = []
        #: where its events are logged (a follower's are the supervisor's to log)
        self.log: Any = log
        metrics.TUNNEL_RECONNECTS.labels(self.member)

    @property
    def route(self) -> str:
        return " -> ".join(str(h) for h in self.spec.hops)

    # -- the call path ----------------------------------------------------------------------------------------
    def open(self, connect_timeout: float) -> tuple[socket.socket, HostPort]:
        """A connected socket that reaches the metastore through the tunnel. Raises :class:`TunnelUnavailable`.

        It may wait for the member's connect timeout plus the time to rebuild every hop."""
        timeout = connect_timeout + len(self.spec.hops) * (self.spec.timeout or 60.0)
        deadline = time.monotonic() + timeout
        # a helper that is starting gets a moment; one that exited is not waited for
        if not self._listening.is_set() and (
                not self._helper_running or not self._listening.wait(min(timeout, TUNNEL_STARTUP_WAIT))):
            raise TunnelUnavailable(f"is unreachable: its SSH tunnel helper is not running "
                                    f"({self.status.reason or 'starting'})")
        port = self.port
        assert port is not None
        address = HostPort(self.spec.connect_host, port)
        try:
            sock = socket.create_connection((address.host, port), timeout=max(0.1, deadline - time.monotonic()))
        except OSError as exc:
            raise TunnelUnavailable(f"is unreachable: its SSH tunnel helper did not accept ({address.host}:{port}): "
                                    f"{exc.strerror or exc}") from None
        self._closed.pop(sock.getsockname()[1], None)  # a report about an earlier connection from this port
        try:
            line = b""
            while not line.endswith(b"\n"):
                sock.settimeout(max(0.01, deadline - time.monotonic()))
                data = sock.recv(512)
                if not data:
                    break
                line += data
        except OSError as exc:
            sock.close()
            what = f"timed out after {timeout:g}s" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
            at = f", still connecting {self._connecting}" if self._connecting else ""
            raise TunnelUnavailable(f"is unreachable: its SSH tunnel ({self.route}) did not connect: "
                                    f"{what}{at}") from None
        if line == b"OK\n":
            return sock, address
        sock.close()
        text = line.decode("utf-8", "replace").strip()
        if text.startswith("ERR "):
            raise TunnelUnavailable(f"is unreachable through its SSH tunnel: {text[4:]}")
        raise TunnelUnavailable(f"is unreachable: its SSH tunnel helper closed the connection: "
                                f"{self.status.reason or text!r}")

    def explain(self, conn_port: int, wait: float = 1.0) -> str | None:
        """Why the tunnel closed the forwarded connection from ``conn_port``, naming the hop; None when the
        metastore itself closed it (or the helper never said)."""
        deadline = time.monotonic() + wait
        while True:
            if conn_port in self._closed:
                return self._closed.pop(conn_port)
            if not self._listening.is_set():
                return self.status.reason or "the SSH tunnel helper exited"
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            self._news.wait(remaining)

    # -- the helper ---------------------------------------------------------------------------------------------
    def start(self) -> None:
        self._gauge()
        self._helper_running = True  # starting: calls wait up to TUNNEL_STARTUP_WAIT for it to listen
        self._greenlet = gevent.spawn(self._supervise)

    def _supervise(self) -> None:
        failures = 0
        while not self._closing:
            started = time.monotonic()
            try:
                self._run_helper()
            except Exception as exc:  # never let the supervisor die
                self.log.error("tunnel.helper_failed", member=self.member, error=repr(exc))
            if self._closing:
                return
            if time.monotonic() - started > TUNNEL_HELPER_STEADY_SECONDS:
                failures = 0
            gevent.sleep(TUNNEL_RESTART_DELAYS[min(failures, len(TUNNEL_RESTART_DELAYS) - 1)])
            failures += 1
            self._helper_running = True

    def _run_helper(self) -> None:
        proc = subprocess.Popen([sys.executable, "-m", "waggle.tunnel"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, close_fds=True)
        self._proc = proc
        self.status.helper_starts += 1
        self.status.helper_pid = proc.pid
        stdin: IO[bytes] = proc.stdin  # type: ignore[assignment]
        stdout: IO[bytes] = proc.stdout  # type: ignore[assignment]
        stdin.write(self.spec.to_json().encode() + b"\n")
        stdin.flush()  # stdin stays open: the helper exits when it closes
        for line in stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            self._on_event(event)
        code = proc.wait()
        fatal = self.status.reason if self.status.hop == "helper" else ""
        self._on_event({"event": "exited", "code": code, "reason": fatal or None})

    def _exited(self, code: object, fatal: str) -> None:
        self._helper_running = False
        self._listening.clear()
        self.port = None
        self._closed.clear()
        if not self._closing:
            self._down("helper", fatal or f"the SSH tunnel helper exited with code {code}")
            self.log.error("tunnel.helper_exited", member=self.member, code=code, reason=fatal or None)

    def snapshot(self) -> list[dict[str, Any]]:
        """Events that bring a tunnel following this one to its state now (a worker that starts later)."""
        st = self.status
        events: list[dict[str, Any]] = []
        if self.port is not None and self._listening.is_set():
            events.append({"event": "listening", "port": self.port})
        if st.up:
            events.append({"event": "up"})
        elif st.state == "down":
            events.append({"event": "down", "hop": st.hop, "error": st.reason})
        return events

    def _on_event(self, event: dict[str, Any]) -> None:
        for listener in self.listeners:
            listener(event)
        kind = event.get("event")
        if kind == "exited":
            self._exited(event.get("code"), str(event.get("reason") or ""))
        elif kind == "listening":
            self.port = int(event["port"])
            self._listening.set()
            self.log.info("tunnel.started", member=self.member, route=self.route, port=self.port,
                     pid=self.status.helper_pid)
        elif kind == "connecting":
            self._connecting = str(event.get("hop", ""))
        elif kind == "fatal":
            self._down("helper", f"the SSH tunnel helper cannot run: {event.get('error')}")
        elif kind == "up":
            self._connecting = ""
            st = self.status
            st.builds += 1
            if st.reconnects:
                metrics.TUNNEL_RECONNECTS.labels(self.member).inc()
            st.state, st.since, st.hop, st.reason = "up", time.time(), "", ""
            self._gauge()
            self.log.info("tunnel.up", member=self.member, route=self.route, reconnects=st.reconnects,
                     connect_ms=event.get("ms"))
        elif kind == "down":
            self._connecting = ""
            if self._down(str(event.get("hop", "")), str(event.get("error", ""))):
                self.log.error("tunnel.down", member=self.member, hop=event.get("hop"), error=event.get("error"))
        elif kind == "closed":
            self._closed[int(event["conn"])] = event.get("reason")
            while len(self._closed) > CLOSED_KEPT:
                self._closed.popitem(last=False)
        elif kind == "host_key_unchecked":
            self.log.warning("tunnel.host_key_unchecked", member=self.member, hop=event.get("hop"),
                        problem=event.get("problem"))
        self._notify()

    def _down(self, hop: str, reason: str) -> bool:
        """Record the tunnel as down; True when this is news (a change of state or of reason)."""
        st = self.status
        news = st.up or st.reason != reason
        if st.up or st.state == "starting":
            st.since = time.time()
        st.state, st.hop, st.reason = "down", hop, reason
        self._gauge()
        return news

    def _gauge(self) -> None:
        if not self._retired:
            metrics.TUNNEL_UP.labels(self.member).set(1 if self.status.up else 0)

    def publish(self) -> None:
        """Own the metastore's tunnel gauge (at start, or when a reload puts this tunnel in service)."""
        self._retired = False
        self._gauge()

    def retire(self) -> None:
        """Out of service after a reload: it closes later, and says nothing more in the metrics."""
        self._retired = True

    def _notify(self) -> None:
        news, self._news = self._news, gevent.event.Event()
        news.set()

    def describe(self) -> dict[str, Any]:
        st = self.status
        return {"state": st.state, "route": self.route, "since": st.since, "hop": st.hop or None,
                "reason": st.reason or None, "reconnects": st.reconnects, "helper_starts": st.helper_starts,
                "local_port": self.port, "helper_pid": st.helper_pid}

    def close(self) -> None:
        self._closing = True
        proc = self._proc
        if proc is not None and proc.poll() is None:
            try:
                assert proc.stdin is not None
                proc.stdin.close()  # the helper exits when its stdin closes
                proc.wait(timeout=2)
            except Exception:
                proc.kill()
        if self._greenlet is not None:
            self._greenlet.kill(block=False)
