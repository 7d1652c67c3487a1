"""The supervisor of ``waggle serve --workers N``: one configuration, N serving processes, one HTTP endpoint.

It loads and validates the configuration once (the caller did), and owns what the pod needs once: the HTTP
endpoint (health, readiness, the workers' metrics added up, the admin API), the reloader (an edit is validated
here and, only if it passes, sent to every worker: a rejected edit changes none), the SSH tunnels and the
health checks, whose news it passes on to the workers. It starts the workers, starts again any that exits
unasked (the others serve meanwhile; its clients reconnect to them), and on SIGTERM tells all of them to drain
and waits for them.
"""

from __future__ import annotations

import functools
import itertools
import os
import socket
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import gevent
import gevent.event
from gevent import subprocess

from waggle.cache.events import Drop
from waggle.common import metrics
from waggle.common.logging import get_logger
from waggle.config.model import WaggleConfig
from waggle.config.timing import (
    DRAIN_KILL_SECONDS,
    WORKER_POLL_SECONDS,
    WORKER_RESTART_DELAYS,
    WORKER_START_SECONDS,
    WORKER_STATUS_SECONDS,
    WORKER_STEADY_SECONDS,
)
from waggle.endpoint import HttpEndpoint
from waggle.reload import Reloader
from waggle.runtime import Runtime
from waggle.server.budget import clear_slot, shared_page
from waggle.upstream.health import MemberStatus
from waggle.upstream.tunnel import Tunnel
from waggle.workers.channel import Channel, ChannelClosed, Start
from waggle.workers.podmetrics import PodCollector
from waggle.workers.shared import status_of

log = get_logger("waggle.supervisor")


class WorkerFailed(Exception):
    """A worker could not start serving (the reason says why)."""


@dataclass(slots=True)
class WorkerHandle:
    index: int
    proc: subprocess.Popen[bytes]
    channel: Channel
    started: float = field(default_factory=time.monotonic)
    ready: gevent.event.Event = field(default_factory=gevent.event.Event)
    failed: str = ""
    exited: bool = False
    #: the worker's last status, and its metrics as last reported (text form)
    status: dict[str, Any] = field(default_factory=dict)
    metrics: str = ""
    asked: dict[int, gevent.event.AsyncResult] = field(default_factory=dict)

    @property
    def pid(self) -> int:
        return int(self.proc.pid)

    def alive(self) -> bool:
        return not self.exited


class Supervisor:
    def __init__(self, config: WaggleConfig, count: int, token: str | None, loaded: str | None) -> None:
        self.count = count
        server = config.server
        #: the pod's port, held (not listened on) for the supervisor's life: the workers bind beside it, and
        #: nothing else can take it while a worker restarts. Port 0 becomes a free port here.
        self.reservation = socket.socket(socket.AF_INET6 if ":" in server.bind_address else socket.AF_INET)
        self.reservation.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.reservation.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        self.reservation.bind((server.bind_address, server.port))
        self.port = int(self.reservation.getsockname()[1])
        self.runtime = Runtime(config)
        self.reloader = Reloader(self.runtime, token, loaded)
        self.reloader.applied.append(self._send_config)
        self.http = HttpEndpoint(self.runtime, server.bind_address, server.endpoint_port, self.reloader, pod=self)
        self.budget_fd = shared_page(count)
        self.token_key = os.urandom(32)
        self.collector = PodCollector()
        self.workers: list[WorkerHandle | None] = [None] * count
        self.restarts = [0] * count
        self._asks = itertools.count(1)
        #: (worker index, its ask) of a write through it -> the workers yet to forget what it names
        self._spreading: dict[tuple[int, int], set[int]] = {}
        self._stopped = gevent.event.Event()
        self.runtime.health.listeners.append(self._send_health)
        self.runtime.log_readers.sinks.append(_LogToWorkers(self._broadcast))
        self._hooked: set[int] = set()
        self._hook_tunnels()

    def _hook_tunnels(self) -> dict[str, list[dict[str, Any]]]:
        """Pass every tunnel's events on to the workers; returns the state of the tunnels hooked now."""
        new: dict[str, list[dict[str, Any]]] = {}
        for name, tunnel in self.runtime.metastores.tunnels.items():
            if id(tunnel) not in self._hooked:
                self._hooked.add(id(tunnel))
                tunnel.listeners.append(functools.partial(self._send_tunnel, name, tunnel))
                new[name] = tunnel.snapshot()
        return new

    def _send_tunnel(self, name: str, tunnel: Tunnel, event: dict[str, Any]) -> None:
        if self.runtime.metastores.tunnels.get(name) is tunnel:  # not one a reload replaced, now closing
            self._broadcast("tunnel", (name, event))

    # -- lifecycle ----------------------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the shared parts, the HTTP endpoint and every worker; raises :class:`WorkerFailed` if one
        cannot serve."""
        self.runtime.start(serving=False)
        self.http.start()
        for index in range(self.count):
            self._spawn(index)
        deadline = time.monotonic() + WORKER_START_SECONDS
        for handle in list(self.workers):
            assert handle is not None
            handle.ready.wait(max(0.0, deadline - time.monotonic()))
            if handle.failed or not handle.ready.is_set():
                self.stop(0.0)
                raise WorkerFailed(handle.failed or f"worker {handle.index} did not start within "
                                                    f"{WORKER_START_SECONDS:g}s")
        gevent.spawn(self._poll)
        log.info("server.listening", address=f"{self.runtime.config.server.bind_address}:{self.port}",
                 workers=self.count, pids=[h.pid for h in self.workers if h is not None],
                 max_connections=self.runtime.config.server.max_connections, http_port=self.http.port)

    def _spawn(self, index: int) -> WorkerHandle:
        ours, theirs = socket.socketpair()
        clear_slot(self.budget_fd, self.count, index)
        proc = subprocess.Popen(
            [sys.executable, "-m", "waggle", "_worker", "--control-fd", str(theirs.fileno()),
             "--budget-fd", str(self.budget_fd)],
            pass_fds=(theirs.fileno(), self.budget_fd), stdin=subprocess.DEVNULL)
        theirs.close()
        handle = WorkerHandle(index, proc, Channel(ours))
        self.workers[index] = handle
        runtime = self.runtime
        handle.channel.send("start", Start(
            index, self.count, self.port, runtime.config, runtime.routes.generation, self.token_key,
            {name: status_of(st) for name, st in runtime.health.status.items()},
            {name: tunnel.snapshot() for name, tunnel in runtime.metastores.tunnels.items()}))
        gevent.spawn(self._listen, handle)
        gevent.spawn(self._watch, handle)
        return handle

    def _listen(self, handle: WorkerHandle) -> None:
        while True:
            try:
                kind, body = handle.channel.receive()
            except ChannelClosed:
                return
            if kind == "ready":
                handle.ready.set()
                self._count_workers()
                log.info("worker.started", worker=handle.index, pid=handle.pid)
            elif kind == "failed":
                handle.failed = str(body)
                handle.ready.set()
                log.error("worker.cannot_serve", worker=handle.index, pid=handle.pid, reason=handle.failed)
            elif kind == "check":
                self.runtime.health.check_soon(str(body))
            elif kind == "down":
                name, reason = body
                self.runtime.health.found_down(str(name), str(reason))
            elif kind == "wrote":  # a write through one worker: the others forget what it names before it answers
                self._spread(handle, *body)
            elif kind == "forgot":
                self._spread_done(handle, body)
            elif kind == "status":
                ask, status = body
                handle.metrics = status.pop("metrics", None) or handle.metrics
                handle.status = status
                answer = handle.asked.pop(ask, None)
                if answer is not None:
                    answer.set(status)

    def _watch(self, handle: WorkerHandle) -> None:
        """Wait for the worker to exit; start it again unless the pod is stopping."""
        code = handle.proc.wait()
        handle.exited = True
        handle.channel.close()
        self.collector.retire(handle.metrics)
        clear_slot(self.budget_fd, self.count, handle.index)
        self._count_workers()
        for answer in handle.asked.values():
            answer.set(None)
        if self.runtime.lifecycle.stopping:
            return
        how = f"signal {-code}" if code < 0 else f"code {code}"
        served = time.monotonic() - handle.started
        if served >= WORKER_STEADY_SECONDS:
            self.restarts[handle.index] = 0
        delay = WORKER_RESTART_DELAYS[min(self.restarts[handle.index], len(WORKER_RESTART_DELAYS) - 1)]
        self.restarts[handle.index] += 1
        metrics.WORKER_RESTARTS.inc()
        log.error("worker.exited", worker=handle.index, pid=handle.pid, exit=how, served_seconds=round(served, 1),
                  restart_in_seconds=delay)
        gevent.sleep(delay)
        if not self.runtime.lifecycle.stopping:
            self._spawn(handle.index)

    def _poll(self) -> None:
        """Keep every worker's counters fresh, so that one that dies takes few counts with it."""
        while not self.runtime.lifecycle.stopping:
            gevent.sleep(WORKER_POLL_SECONDS)
            try:
                self.statuses(with_metrics=True)
            except Exception as exc:  # never let the loop die
                log.error("worker.poll_failed", error=repr(exc))

    def _count_workers(self) -> None:
        metrics.WORKERS.set(sum(1 for h in self.workers if h is not None and h.alive() and h.ready.is_set()))

    def stop(self, grace_seconds: float, delay_seconds: float = 0.0) -> None:
        """Fail readiness at once, tell every worker to drain (``delay_seconds``, then ``grace_seconds``), wait
        for them, then stop the shared parts."""
        if not self.runtime.lifecycle.stop():
            return
        log.info("server.stopping", delay_seconds=delay_seconds, grace_seconds=grace_seconds, workers=self.count)
        self._broadcast("stop", (delay_seconds, grace_seconds))
        deadline = time.monotonic() + delay_seconds + grace_seconds + DRAIN_KILL_SECONDS + 5.0
        for handle in self._live():
            try:
                handle.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("worker.killed", worker=handle.index, pid=handle.pid, detail="did not drain in time")
                handle.proc.kill()
                handle.proc.wait()
        self.http.stop()
        self.runtime.close()
        self.reservation.close()
        os.close(self.budget_fd)
        log.info("server.stopped")
        self._stopped.set()

    def wait(self) -> None:
        self._stopped.wait()

    def terminate(self) -> None:
        """SIGTERM or SIGINT: drain with the running configuration's timings."""
        server = self.runtime.config.server
        gevent.spawn(self.stop, server.graceful_stop_seconds, server.shutdown_delay_seconds)

    # -- news for the workers -------------------------------------------------------------------------------------
    def _live(self) -> list[WorkerHandle]:
        return [h for h in self.workers if h is not None and h.alive()]

    def _broadcast(self, kind: str, body: object, but: WorkerHandle | None = None) -> None:
        for handle in self._live():
            if handle is but:
                continue
            try:
                handle.channel.send(kind, body)
            except ChannelClosed:
                pass  # it is exiting: its replacement starts from the supervisor's state

    def _spread(self, origin: WorkerHandle, ask: int, member: str, drops: tuple[Drop, ...]) -> None:
        others = [h for h in self._live() if h is not origin]
        key = (origin.index, ask)
        self._spreading[key] = {h.index for h in others}
        for handle in others:
            try:
                handle.channel.send("wrote", (key, member, drops))
            except ChannelClosed:
                self._spreading[key].discard(handle.index)
        self._spread_done(None, key)

    def _spread_done(self, handle: WorkerHandle | None, key: tuple[int, int]) -> None:
        """A worker forgot what a write named (None: no one else had to): the write's worker hears once all did."""
        waiting = self._spreading.get(key)
        if waiting is None:
            return
        if handle is not None:
            waiting.discard(handle.index)
        if not waiting:
            del self._spreading[key]
            origin = self.workers[key[0]]
            if origin is not None:
                try:
                    origin.channel.send("forgot", key[1])
                except ChannelClosed:
                    pass

    def forget_cache(self, member: str) -> None:
        """Every worker forgets the replies it remembers of ``member`` (an admin call)."""
        self._broadcast("forget", member)

    def _send_health(self, st: MemberStatus) -> None:
        self._broadcast("health", (st.name, *status_of(st)))

    def _send_config(self, config: WaggleConfig, generation: int) -> None:
        """A reload passed validation and applies here: every worker applies it too (then learns the state of
        the tunnels it opened)."""
        opened = self._hook_tunnels()
        self._broadcast("config", (config, generation))
        for name, events in opened.items():
            for event in events:
                self._broadcast("tunnel", (name, event))

    # -- what the HTTP endpoint shows -------------------------------------------------------------------------------
    def statuses(self, with_metrics: bool = False) -> list[dict[str, Any]]:
        """Every worker's status now (asked of the live ones, at most WORKER_STATUS_SECONDS); with
        ``with_metrics``, their metrics are brought up to date too."""
        asked: list[tuple[WorkerHandle, gevent.event.AsyncResult | None]] = []
        for handle in self.workers:
            if handle is None:
                continue
            answer: gevent.event.AsyncResult | None = None
            if handle.alive() and handle.ready.is_set():
                answer = gevent.event.AsyncResult()
                ask = next(self._asks)
                handle.asked[ask] = answer
                try:
                    handle.channel.send("status", (ask, with_metrics))
                except ChannelClosed:
                    handle.asked.pop(ask, None)
                    answer = None
            asked.append((handle, answer))
        out = []
        deadline = time.monotonic() + WORKER_STATUS_SECONDS
        for handle, answer in asked:
            status = answer.wait(max(0.0, deadline - time.monotonic())) if answer is not None else None
            out.append({"index": handle.index, "pid": handle.pid, "alive": handle.alive(),
                        "serving": handle.ready.is_set() and not handle.failed and handle.alive(),
                        "answered": status is not None, "restarts": self.restarts[handle.index],
                        **(status or {})})
        return out

    def metrics_text(self) -> bytes:
        self.statuses(with_metrics=True)
        return self.collector.exposition([h.metrics for h in self._live() if h.metrics])

    def ready(self) -> tuple[bool, str]:
        ready, reason = self.runtime.lifecycle.ready()
        if not ready:
            return ready, reason
        if not any(h.ready.is_set() and not h.failed for h in self._live()):
            return False, "no worker is serving"
        return True, "ok"


class _LogToWorkers:
    """What the supervisor's reads of the members' notification logs say, passed to every worker (each keeps
    its own cache: one reader per replica, not one per worker)."""

    def __init__(self, broadcast: Callable[[str, object], None]) -> None:
        self._broadcast = broadcast

    def read_through(self, member: str, as_of: float, drops: Iterable[Drop], newest_event: float | None = None
                     ) -> None:
        self._broadcast("log", (member, as_of, tuple(drops), newest_event))

    def unreadable(self, member: str, cause: str) -> None:
        self._broadcast("log", (member, None, cause, None))
