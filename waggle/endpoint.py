"""The HTTP side, on the server file's ``endpoint.port``.

- ``GET /healthz``: liveness. 200 while the process serves, with each metastore's state (and its tunnel's);
  with several workers, each worker's too, and 503 while none is alive.
- ``GET /readyz``: readiness. 200 when a configuration is loaded, the primary answers, waggle is not stopping
  and (several workers) one of them serves; 503 with the reason otherwise.
- ``GET /metrics``: Prometheus text from :mod:`waggle.common.metrics` (several workers: added up, see
  :mod:`waggle.workers.podmetrics`).
- ``GET /api/admin/federations``: the live federation, read-only, with each member's status.
- ``POST /api/admin/reload``: reload the configuration files.
- ``POST /api/admin/cache/drop?metastore=NAME``: forget every reply remembered of one metastore (``cache``), in
  every worker.

Like anything that changes state over HTTP, the ``POST`` calls need ``Authorization: Bearer <token>`` with the
token from ``admin.token-file``; without that key they are off.
"""

from __future__ import annotations

import hmac
import json
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import parse_qs

from gevent.pywsgi import WSGIServer
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from waggle.common import metrics
from waggle.config.timing import ENDPOINT_STOP_SECONDS

if TYPE_CHECKING:
    from waggle.reload import Reloader
    from waggle.runtime import Runtime

StartResponse = Callable[[str, list[tuple[str, str]]], Any]


class Pod(Protocol):
    """Several workers behind one endpoint (:class:`waggle.workers.supervisor.Supervisor`)."""

    def statuses(self) -> list[dict[str, Any]]: ...

    def metrics_text(self) -> bytes: ...

    def ready(self) -> tuple[bool, str]: ...

    def forget_cache(self, member: str) -> None: ...
_JSON = [("Content-Type", "application/json")]


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def member_states(runtime: Runtime) -> dict[str, Any]:
    """Each metastore's health (and tunnel) as plain data."""
    out: dict[str, Any] = {}
    for name, st in list(runtime.health.status.items()):
        entry: dict[str, Any] = {"up": st.up, "since": _iso(st.since), "reason": st.reason or None}
        tunnel = runtime.metastores.tunnels.get(name)
        if tunnel is not None:
            entry["tunnel"] = tunnel.describe()
        out[name] = entry
    return out


def federation_view(runtime: Runtime, reloader: Reloader | None,
                    workers: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The live federation for ``/api/admin/federations``: settings that matter to operators, and status.
    ``workers``: the workers' statuses, whose pools are added up (several workers)."""
    routes = runtime.routes
    config = routes.config
    states = member_states(runtime)
    members = []
    for m in config.federation.members:
        if workers is None:
            pool = routes.pools[m.name]
            figures = {"opened": pool.opened, "idle": pool.idle_count(), "busy": pool.busy}
        else:
            figures = {k: sum(w.get("pools", {}).get(m.name, {}).get(k, 0) for w in workers)
                       for k in ("opened", "idle", "busy")}
        members.append({
            "name": m.name,
            "primary": m.primary,
            "uris": [str(u) for u in m.uris],
            "database_prefix": m.database_prefix,
            "access_control_type": m.access_control_type.value,
            "writable_database_white_list": [p.pattern for p in m.writable_database_white_list],
            "mapped_databases": None if m.mapped_databases is None else [p.pattern for p in m.mapped_databases],
            "database_name_mapping": dict(m.database_name_mapping),
            "hive_version": m.hive_version,
            "tunnel_route": None if m.tunnel is None else " -> ".join(f"{u}@{h}" for u, h in m.tunnel.route),
            "status": states.get(m.name, {"up": True, "reason": None}),
            "pool": figures,
        })
    view = {
        "generation": routes.generation,
        "loaded_at": _iso(routes.loaded_at),
        "server_file": config.server_file,
        "federation_file": config.federation_file,
        "database_resolution": config.server.database_resolution.value,
        "last_reload_error": reloader.last_error if reloader is not None else [],
        "metastores": members,
        "links": [{"name": name, "metastore": link.member, "uri": link.uri, "database": link.database,
                   "status": states.get(link.member or "", {"up": True, "reason": None})}
                  for name, link in sorted(routes.links.items())],
    }
    if workers is not None:
        view["workers"] = workers
    return view


class HttpEndpoint:
    def __init__(self, runtime: Runtime, bind: str, port: int, reloader: Reloader | None = None,
                 pod: Pod | None = None) -> None:
        self.runtime = runtime
        self.reloader = reloader
        #: the workers whose figures this endpoint shows (several workers), else this process's own
        self.pod = pod
        self._server = WSGIServer((bind, port), self.app, log=None, error_log=None)

    @property
    def port(self) -> int:
        return int(self._server.server_port)

    def app(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        method = environ.get("REQUEST_METHOD", "GET")
        if path in _POSTS:
            if method != "POST":
                return _answer(start_response, "405 Method Not Allowed", {"error": f"use POST {path}"})
            refused = self._refused(environ, start_response)
            if refused is not None:
                return refused
            return _POSTS[path](self, environ, start_response)
        if method not in ("GET", "HEAD"):
            return _answer(start_response, "405 Method Not Allowed", {"error": f"{method} {path} is not served"})
        pod = self.pod
        if path == "/metrics":
            start_response("200 OK", [("Content-Type", CONTENT_TYPE_LATEST)])
            return [pod.metrics_text() if pod is not None else generate_latest(metrics.REGISTRY)]
        if path == "/healthz":
            body: dict[str, Any] = {"status": "ok", "metastores": member_states(self.runtime)}
            status = "200 OK"
            if pod is not None:
                body["workers"] = workers = pod.statuses()
                if not any(w["alive"] for w in workers):
                    body["status"], status = "no worker is alive", "503 Service Unavailable"
            security = self.runtime.guard.watch.view()
            if security:
                body["security"] = security
            return _answer(start_response, status, body)
        if path == "/readyz":
            ready, reason = pod.ready() if pod is not None else self.runtime.lifecycle.ready()
            return _answer(start_response, "200 OK" if ready else "503 Service Unavailable",
                           {"ready": ready, "reason": reason, "generation": self.runtime.routes.generation})
        if path == "/api/admin/federations":
            return _answer(start_response, "200 OK", federation_view(
                self.runtime, self.reloader, pod.statuses() if pod is not None else None))
        return _answer(start_response, "404 Not Found",
                       {"error": "not found: try /healthz, /readyz, /metrics or /api/admin/federations"})

    def _refused(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes] | None:
        """The answer to a state-changing call without the admin token, or None when it has it."""
        token = self.reloader.admin_token if self.reloader is not None else None
        if token is None:
            return _answer(start_response, "403 Forbidden",
                           {"error": "state-changing admin calls are off: set admin.token-file in the server file"})
        given = environ.get("HTTP_AUTHORIZATION", "")
        scheme, _, presented = given.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(presented.strip().encode(), token.encode()):
            start_response("401 Unauthorized", [*_JSON, ("WWW-Authenticate", "Bearer")])
            return [json.dumps({"error": "a valid 'Authorization: Bearer <token>' header is required"}).encode()]
        return None

    def _reload(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        assert self.reloader is not None
        ok = self.reloader.reload("POST /api/admin/reload")
        body = {"reloaded": ok, "generation": self.runtime.routes.generation, "problems": self.reloader.last_error}
        return _answer(start_response, "200 OK" if ok else "422 Unprocessable Entity", body)

    def _drop_cache(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        member = parse_qs(environ.get("QUERY_STRING", "")).get("metastore", [""])[0]
        replies = self.runtime.replies
        if member not in replies.members:
            cached = sorted(replies.members)
            return _answer(start_response, "404 Not Found",
                           {"error": f"no metastore {member!r} with cache on; those with it: {cached}"})
        dropped = replies.forget(member, "admin")
        if self.pod is not None:
            self.pod.forget_cache(member)
        return _answer(start_response, "200 OK", {"metastore": member, "dropped": dropped if self.pod is None else
                                                  "in every worker"})

    def start(self) -> None:
        self._server.start()

    def stop(self) -> None:
        self._server.stop(timeout=ENDPOINT_STOP_SECONDS)


#: the state-changing calls, each answered once the admin token is checked
_POSTS: dict[str, Callable[[HttpEndpoint, dict[str, Any], StartResponse], Iterable[bytes]]] = {
    "/api/admin/reload": HttpEndpoint._reload,
    "/api/admin/cache/drop": HttpEndpoint._drop_cache,
}


def _answer(start_response: StartResponse, status: str, body: dict[str, Any]) -> Iterable[bytes]:
    start_response(status, list(_JSON))
    return [json.dumps(body, indent=1).encode()]
