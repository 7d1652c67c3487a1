"""One worker of ``waggle serve --workers N``: it serves the pod's Thrift port as the supervisor tells it.

It gets its configuration from the supervisor (never from the files), listens on the pod's port with
SO_REUSEPORT beside the other workers, keeps its own client connections and upstream pools, follows the
supervisor's SSH tunnels and health checks (:mod:`waggle.workers.shared`), and counts its connections in the
pod's bound (:mod:`waggle.server.budget`). It drains when the supervisor says ``stop``, and also when the
supervisor is gone (its channel closes), so no worker outlives its pod.
"""

from __future__ import annotations

import gc
import itertools
import math
import os
import signal
import socket
from dataclasses import replace
from typing import Any

import gevent
import gevent.event
from prometheus_client import generate_latest

from waggle.cache.events import Drop
from waggle.common import metrics
from waggle.common.listeners import listener
from waggle.common.logging import configure, get_logger
from waggle.config.model import WaggleConfig
from waggle.config.timing import WRITE_SPREAD_SECONDS
from waggle.runtime import Runtime
from waggle.server.budget import PodBudget
from waggle.server.context import HttpSide
from waggle.server.server import WaggleServer
from waggle.workers.channel import Channel, ChannelClosed, Start
from waggle.workers.shared import FollowedHealth, FollowedTunnel

log = get_logger("waggle.worker")


def for_worker(config: WaggleConfig, workers: int) -> WaggleConfig:
    """The configuration as one of ``workers`` workers applies it: the in-flight limits
    (``limits.max-in-flight-calls``, ``limits.max-calls-per-metastore``) and the rate limits (``limits.rates``)
    are the pod's, so each worker takes its share, rounded up; ``max-connections`` is shared through the pod's
    budget instead."""
    load = config.server.load
    share = replace(load, max_in_flight_calls=math.ceil(load.max_in_flight_calls / workers),
                    max_calls_per_metastore=math.ceil(load.max_calls_per_metastore / workers))
    rates = tuple(replace(rule, workers=workers) for rule in config.server.rates)
    return replace(config, server=replace(config.server, load=share, rates=rates))


class Worker:
    def __init__(self, channel: Channel, start: Start, budget_fd: int) -> None:
        self.channel = channel
        self.index, self.workers = start.index, start.workers
        self.generation = start.generation
        config = for_worker(start.config, start.workers)
        self.runtime = Runtime(config, tunnel=FollowedTunnel, health=FollowedHealth, token_key=start.token_key,
                               read_logs=False)
        self.runtime.written.append(self._tell_written)
        self._asks = itertools.count(1)
        #: this worker's writes whose drops the other workers are forgetting
        self._spreading: dict[int, gevent.event.Event] = {}
        health = self.runtime.health
        assert isinstance(health, FollowedHealth)
        health.ask = self._ask_check
        health.tell_down = self._tell_down
        for name, (up, since, reason) in start.health.items():
            health.follow(name, up, since, reason)
        self.runtime.start()
        for name, events in start.tunnels.items():
            for event in events:
                self._tunnel_event(name, event)
        server = config.server
        budget = PodBudget(budget_fd, start.workers, start.index, server.max_connections)
        doors: tuple[HttpSide, ...] = ()
        if server.iceberg_rest.port is not None:  # its code (pyiceberg, pydantic: about 75 MB) only when it is on
            from waggle.rest.door import RestDoor

            doors = (RestDoor(self.runtime, start.token_key, shared=True),)
        self.server = WaggleServer(self.runtime, listener=listener(server.bind_address, start.port),
                                   budget=budget, doors=doors)

    def _ask_check(self, name: str) -> None:
        try:
            self.channel.send("check", name)
        except ChannelClosed:
            pass

    def _tell_down(self, name: str, reason: str) -> None:
        try:
            self.channel.send("down", (name, reason))
        except ChannelClosed:
            pass

    def _tell_written(self, member: str, drops: tuple[Drop, ...]) -> None:
        """A write through this worker forgot what it names here: the other workers forget it too, before it is
        answered (at most WRITE_SPREAD_SECONDS: a worker that does not say so in time forgets through the log)."""
        ask = next(self._asks)
        done = self._spreading[ask] = gevent.event.Event()
        try:
            self.channel.send("wrote", (ask, member, drops))
            if not done.wait(WRITE_SPREAD_SECONDS):
                log.warning("cache.write_not_spread", member=member, waited=WRITE_SPREAD_SECONDS)
        except ChannelClosed:
            pass
        finally:
            self._spreading.pop(ask, None)

    def _tunnel_event(self, name: str, event: dict[str, Any]) -> None:
        tunnel = self.runtime.metastores.tunnels.get(name)
        if isinstance(tunnel, FollowedTunnel):
            tunnel.follow(event)

    def serve(self) -> None:
        self.server.start()
        self.channel.send("ready", {"pid": os.getpid()})
        gevent.spawn(self._listen)
        self.server.wait()

    def drain(self, delay: float | None = None) -> None:
        server = self.runtime.config.server
        gevent.spawn(self.server.stop, server.graceful_stop_seconds,
                     server.shutdown_delay_seconds if delay is None else delay)

    def _listen(self) -> None:
        while True:
            try:
                kind, body = self.channel.receive()
            except ChannelClosed:
                if not self.runtime.lifecycle.stopping:
                    log.warning("worker.orphaned", detail="the supervisor is gone: draining")
                    self.drain(0.0)
                return
            try:
                self._on(kind, body)
            except ChannelClosed:
                pass
            except Exception as exc:  # one bad message must not end the worker's listening
                log.error("worker.message_failed", kind=kind, error=repr(exc))

    def _on(self, kind: str, body: Any) -> None:
        if kind == "config":
            config, generation = body
            self.runtime.reload(for_worker(config, self.workers))
            self.generation = generation
        elif kind == "health":
            name, up, since, reason = body
            health = self.runtime.health
            assert isinstance(health, FollowedHealth)
            health.follow(name, up, since, reason)
        elif kind == "tunnel":
            self._tunnel_event(*body)
        elif kind == "log":  # what the supervisor's read of a member's notification log says
            member, as_of, drops, newest = body
            if as_of is None:
                self.runtime.replies.unreadable(member, drops)
            else:
                self.runtime.replies.read_through(member, as_of, drops, newest)
        elif kind == "forget":
            self.runtime.replies.forget(body, "admin")
        elif kind == "wrote":  # a write through another worker
            key, member, drops = body
            self.runtime.replies.apply(member, drops, "write")
            self.channel.send("forgot", key)
        elif kind == "forgot":  # every other worker forgot what a write through this one named
            done = self._spreading.get(body)
            if done is not None:
                done.set()
        elif kind == "status":
            ask, with_metrics = body
            self.channel.send("status", (ask, self.status(with_metrics)))
        elif kind == "stop":
            delay, grace = body
            gevent.spawn(self.server.stop, grace, delay)

    def status(self, with_metrics: bool) -> dict[str, Any]:
        routes = self.runtime.routes
        ready, reason = self.runtime.lifecycle.ready()
        status = {
            "pid": os.getpid(), "index": self.index, "generation": self.generation, "ready": ready,
            "reason": reason, "connections": self.server.connections,
            "pools": {name: {"opened": p.opened, "idle": p.idle_count(), "busy": p.busy}
                      for name, p in routes.pools.items()},
        }
        if with_metrics:
            status["metrics"] = generate_latest(metrics.REGISTRY).decode()
        return status


def run(control_fd: int, budget_fd: int) -> int:
    """A worker's life, after :mod:`waggle.cli` has monkey-patched (``waggle _worker``)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C is the supervisor's to handle
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # reloads come from the supervisor
    channel = Channel(socket.socket(fileno=control_fd))
    try:
        kind, start = channel.receive()
    except ChannelClosed:
        return 1
    assert kind == "start" and isinstance(start, Start), kind
    server = start.config.server
    configure(server.log_level, server.log_format, worker=start.index)
    try:
        worker = Worker(channel, start, budget_fd)
    except OSError as exc:
        channel.send("failed", f"cannot listen on {server.bind_address}:{start.port}: {exc}")
        return 1
    except Exception as exc:
        channel.send("failed", f"cannot start: {exc!r}")
        return 1
    gevent.signal_handler(signal.SIGTERM, worker.drain)
    gc.freeze()  # what is loaded now lives as long as the process (see waggle.app)
    worker.serve()
    return 0
