"""The service's HTTP port (``http-port``): ``GET /healthz``, ``GET /livez``, ``GET /metrics`` and
``POST /policies/NAME/run``.

``/healthz`` answers 200 while every policy runs and none is failing (its last batch failed:
:mod:`waggle.sync.failing`), 503 otherwise and while stopping, with each policy's state as JSON: ``failing``,
``failing_since`` (UTC), ``failed_batches`` and ``error`` among them. ``/livez`` answers 200 while every policy's
thread runs, failing or not (a liveness probe there does not restart a follower because its source is down).
``/metrics`` is Prometheus text from the sync's own registry (:class:`SyncMetrics`, apart from the proxy's):
lag in events and seconds, checkpoints, events read by type and outcome, batches and executions by status,
bootstraps by reason, failed tables, how long each policy has been failing, and each policy's writes and waits
under the shared write budget.
``POST /policies/NAME/run`` runs a policy at once (202), as Hive's
``ALTER SCHEDULED QUERY ... EXECUTE``; 404 names a policy that is not running.

Standard library ``http.server`` in a thread of its own; requests are answered from the service's memory only.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from waggle.common.logging import get_logger
from waggle.sync.budget import FairBudget
from waggle.sync.execution import BOOTSTRAP, Execution, PolicyState
from waggle.sync.metrics_table import ExecutionRow
from waggle.sync.policies import Policy

log = get_logger("waggle.sync.http")
_RUN = re.compile(r"/policies/([^/]+)/run/?")


class SyncMetrics:
    """The Prometheus series of the service's policies (an observer of :class:`waggle.sync.service.Service`)."""

    def __init__(self, budget: FairBudget | None = None) -> None:
        self.budget = budget
        self.registry = r = CollectorRegistry()
        self.lag_events = Gauge("waggle_sync_lag_events", "Source events not yet applied", ["policy", "source"],
                                registry=r)
        self.lag_seconds = Gauge("waggle_sync_lag_seconds", "Seconds from the newest applied event's commit at "
                                 "the source to the end of the batch that applied it", ["policy", "source"],
                                 registry=r)
        self.checkpoint = Gauge("waggle_sync_checkpoint", "The policy's checkpoint: the last event id applied",
                                ["policy", "source"], registry=r)
        self.source_event = Gauge("waggle_sync_source_event_id", "The source's current notification event id",
                                  ["policy", "source"], registry=r)
        self.events = Counter("waggle_sync_events", "Notification events read, by type and outcome (applied, "
                              "skipped, failed)", ["policy", "type", "outcome"], registry=r)
        self.batches = Counter("waggle_sync_batches", "Batches, by phase and status", ["policy", "phase", "status"],
                               registry=r)
        self.executions = Counter("waggle_sync_executions", "Executions (rows of replication_metrics), by status",
                                  ["policy", "status"], registry=r)
        self.bootstraps = Counter("waggle_sync_bootstraps", "Bootstraps, by reason", ["policy", "reason"],
                                  registry=r)
        self.failed_tables = Gauge("waggle_sync_failed_tables", "Target tables whose last batch failed",
                                   ["policy"], registry=r)
        self.objects = Counter("waggle_sync_objects", "Tables and databases created, altered, renamed or dropped",
                               ["policy"], registry=r)
        self.partitions = Counter("waggle_sync_partitions", "Partitions added, altered or dropped", ["policy"],
                                  registry=r)
        # the write budget's shares, read at each scrape
        self.writes = Gauge("waggle_sync_writes", "Write calls to the target made under the policy's share",
                            ["policy"], registry=r)
        self.write_wait = Gauge("waggle_sync_write_wait_seconds", "Seconds the policy's writes waited for their "
                                "turn under the write budget, in all", ["policy"], registry=r)
        self.weight = Gauge("waggle_sync_share_weight", "The policy's weight in the write budget", ["policy"],
                            registry=r)
        self.failing = Gauge("waggle_sync_failing_seconds", "Seconds the policy has been failing, since its first "
                             "failed batch in a row; 0 while it is not failing", ["policy"], registry=r)
        #: each policy's seconds of failing, read at each scrape (set by the service's runner)
        self.failing_seconds: Callable[[], Iterable[tuple[str, float]]] | None = None

    def batch(self, policy: Policy, e: Execution) -> None:
        name = policy.name
        for (kind, outcome), n in e.events.items():
            self.events.labels(name, kind, outcome).inc(n)
        self.batches.labels(name, e.phase or "none", e.status).inc()
        if e.phase == BOOTSTRAP:
            self.bootstraps.labels(name, reason_label(e.bootstrap_reason)).inc()
        self.objects.labels(name).inc(e.objects)
        self.partitions.labels(name).inc(e.partitions)
        if e.lag_seconds is not None:
            self.lag_seconds.labels(name, policy.spec.source).set(e.lag_seconds)

    def state(self, policy: Policy, s: PolicyState) -> None:
        source = s.source or policy.spec.source
        if s.lag_events is not None:
            self.lag_events.labels(policy.name, source).set(s.lag_events)
        if s.lag_seconds is not None:
            self.lag_seconds.labels(policy.name, source).set(s.lag_seconds)
        if s.checkpoint is not None:
            self.checkpoint.labels(policy.name, source).set(s.checkpoint)
        if s.source_event is not None:
            self.source_event.labels(policy.name, source).set(s.source_event)
        self.failed_tables.labels(policy.name).set(len(s.failed_tables))

    def row(self, policy: Policy, row: ExecutionRow) -> None:
        self.executions.labels(policy.name, row.status).inc()

    def text(self) -> bytes:
        if self.failing_seconds is not None:
            for policy, seconds in self.failing_seconds():
                self.failing.labels(policy).set(round(seconds, 1))
        if self.budget is not None:
            for share in self.budget.shares():
                self.writes.labels(share.policy).set(share.writes)
                self.write_wait.labels(share.policy).set(share.waited_seconds)
                self.weight.labels(share.policy).set(share.weight)
        return generate_latest(self.registry)


def reason_label(reason: str | None) -> str:
    """A bootstrap's reason as a label: its words before any detail ("gap: events 11-40 were purged" is "gap"),
    so the series stay few."""
    if not reason:
        return "unknown"
    return reason.split(":", 1)[0].strip().lower().replace(" ", "_")


class Api:
    """What the HTTP port answers from: the service's health and run-now, and the metrics."""

    def __init__(self, health: Callable[[], tuple[bool, dict[str, object]]], run_now: Callable[[str], str | None],
                 metrics: SyncMetrics, alive: Callable[[], tuple[bool, dict[str, object]]] | None = None) -> None:
        self.health, self.run_now, self.metrics = health, run_now, metrics
        self.alive = alive or health


class HttpServer:
    def __init__(self, api: Api, port: int, host: str = "") -> None:
        handler = _handler(api)
        self.server = ThreadingHTTPServer((host, port), handler)
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        self.thread = threading.Thread(target=self.server.serve_forever, name="sync-http", daemon=True)

    def start(self) -> HttpServer:
        self.thread.start()
        log.info("sync.http_listening", port=self.port)
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


def _handler(api: Api) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "waggle-sync"

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path in ("/healthz", "/livez"):
                ok, body = api.health() if path == "/healthz" else api.alive()
                self._json(200 if ok else 503, body)
            elif path == "/metrics":
                self._send(200, api.metrics.text(), CONTENT_TYPE_LATEST)
            else:
                self._json(404, {"error": f"no such path: {path} (try /healthz, /livez, /metrics, "
                                          "POST /policies/NAME/run)"})

        def do_POST(self) -> None:
            path = self.path.split("?", 1)[0]
            m = _RUN.fullmatch(path)
            if m is None:
                self._json(404, {"error": f"no such path: {path} (POST /policies/NAME/run)"})
                return
            name = m.group(1)
            problem = api.run_now(name)
            if problem is None:
                log.info("sync.run_now_requested", policy=name, peer=self.client_address[0])
                self._json(202, {"policy": name, "status": "started"})
            else:
                self._json(404, {"policy": name, "error": problem})

        def _json(self, status: int, body: Any) -> None:
            self._send(status, json.dumps(body, indent=1).encode(), "application/json")

        def _send(self, status: int, data: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # answers are not logged line by line; run-now is

    return Handler
