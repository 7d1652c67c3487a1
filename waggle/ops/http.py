"""The HTTP side, on the server file's ``endpoint.port``: ``/healthz`` and ``/metrics``.

``/healthz`` answers 200 while the process serves, with each metastore's state (and its SSH tunnel's) as JSON.
``/metrics`` is Prometheus text from :mod:`waggle.ops.metrics`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from gevent.pywsgi import WSGIServer
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from waggle.ops import metrics

if TYPE_CHECKING:
    from waggle.server.runtime import Runtime

StartResponse = Callable[[str, list[tuple[str, str]]], Any]


def member_states(runtime: Runtime) -> dict[str, Any]:
    """Each metastore's health (and tunnel) as plain data."""
    out: dict[str, Any] = {}
    for name, st in runtime.health.status.items():
        entry: dict[str, Any] = {"up": st.up, "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(st.since)),
                                 "reason": st.reason or None}
        tunnel = runtime.tunnels.get(name)
        if tunnel is not None:
            entry["tunnel"] = tunnel.describe()
        out[name] = entry
    return out


class HttpEndpoint:
    def __init__(self, runtime: Runtime, bind: str, port: int) -> None:
        self.runtime = runtime
        self._server = WSGIServer((bind, port), self.app, log=None, error_log=None)

    @property
    def port(self) -> int:
        return int(self._server.server_port)

    def app(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == "/metrics":
            start_response("200 OK", [("Content-Type", CONTENT_TYPE_LATEST)])
            return [generate_latest(metrics.REGISTRY)]
        if path == "/healthz":
            body = json.dumps({"status": "ok", "metastores": member_states(self.runtime)}).encode()
            start_response("200 OK", [("Content-Type", "application/json")])
            return [body]
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"not found: try /healthz or /metrics\n"]

    def start(self) -> None:
        self._server.start()

    def stop(self) -> None:
        self._server.stop(timeout=1)
