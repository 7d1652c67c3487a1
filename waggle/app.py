"""Assemble and run the proxy process (after :mod:`waggle.cli` has monkey-patched)."""

from __future__ import annotations

import gc
import signal
import sys
from collections.abc import Callable

import gevent

from waggle.common.logging import configure, get_logger
from waggle.common.loop import watch_loop
from waggle.config.check import admin_token, rest_secrets
from waggle.config.loader import ConfigError, load
from waggle.config.model import WaggleConfig
from waggle.endpoint import HttpEndpoint
from waggle.reload import Reloader, digest_of
from waggle.runtime import CacheLogError, Runtime
from waggle.security.sasl import SaslError
from waggle.server.context import HttpSide
from waggle.server.server import WaggleServer
from waggle.workers.count import resolve as worker_count
from waggle.workers.supervisor import Supervisor, WorkerFailed


def start(config: WaggleConfig, reloading: Callable[[Runtime], Reloader] | None = None) -> WaggleServer:
    """Start serving in the background; the caller owns the hub. ``reloading`` builds the reloader that the
    HTTP side's reload call and the signals use."""
    return _serve_one(config, reloading)[0]


def _serve_one(config: WaggleConfig, reloading: Callable[[Runtime], Reloader] | None
               ) -> tuple[WaggleServer, Reloader | None]:
    """One serving process, started (the runtime, then the Thrift port and the HTTP side), and its reloader."""
    runtime = Runtime(config)
    reloader = reloading(runtime) if reloading is not None else None
    runtime.start()
    at = config.server
    doors = _rest_door(runtime) if at.iceberg_rest.port is not None else ()
    server = WaggleServer(runtime, http=HttpEndpoint(runtime, at.bind_address, at.endpoint_port, reloader),
                          doors=doors)
    server.start()
    return server, reloader


def _rest_door(runtime: Runtime) -> tuple[HttpSide, ...]:
    """The Iceberg REST port's door. Its code (pyiceberg, pydantic) is loaded only where the port is on: about
    75 MB more in each serving process."""
    from waggle.rest.door import RestDoor

    return (RestDoor(runtime),)


def serve(server_file: str | None, federation_file: str, workers: int | None = None, strict: bool = False) -> int:
    """``waggle serve``; ``workers``: ``--workers`` (0: auto), else the server file's, the environment's or 1;
    ``strict``: a key waggle does not know is an error. A configuration that cannot be served is said once per
    problem, as ``waggle check`` says it (``error: ...`` on stderr), and the exit code is 2."""
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # until the reloader can take it: never fatal
    loaded = digest_of([f for f in (server_file, federation_file) if f])
    try:
        config = load(server_file, federation_file, strict=strict)
        token = admin_token(config)  # tunnel files are checked by each tunnel's helper (the proxy never loads paramiko)
        rest_secrets(config)
        count = worker_count(workers, config.server.workers)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ConfigError as exc:
        for problem in exc.problems:
            print(f"error: {problem}", file=sys.stderr)
        for warning in exc.warnings:
            print(f"warning: {warning}", file=sys.stderr)
        return 2
    configure(config.server.log_level, config.server.log_format)
    log = get_logger("waggle")
    for warning in config.warnings:
        log.warning("config.warning", warning=warning)
    try:
        serving, reloader = _start(config, count, token, loaded)
    except OSError as exc:
        log.error("server.cannot_listen", port=config.server.port, http_port=config.server.endpoint_port,
                  error=str(exc))
        return 1
    except WorkerFailed as exc:
        log.error("server.cannot_start", error=str(exc))
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except CacheLogError as exc:
        log.error("cache.cannot_start", error=str(exc))
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except SaslError as exc:
        log.error("kerberos.cannot_start", error=str(exc))
        print(f"error: {exc}", file=sys.stderr)
        return 2
    log.info("federation.loaded", primary=config.federation.primary.name,
             members=[m.name for m in config.federation.members],
             resolution=config.server.database_resolution.value, workers=count)
    reloader.start(watch=config.server.hot_reload)
    gevent.spawn(watch_loop)
    # Everything loaded so far (the generated Thrift classes, the method table, the configuration) lives as
    # long as the process: the collector need not walk it again on every full collection of the call path's
    # garbage.
    gc.freeze()

    def on_term() -> None:
        reloader.stop()
        serving.terminate()

    gevent.signal_handler(signal.SIGTERM, on_term)
    gevent.signal_handler(signal.SIGINT, on_term)
    gevent.signal_handler(signal.SIGHUP, reloader.on_signal)
    serving.wait()
    return 0


def _start(config: WaggleConfig, count: int, token: str | None, loaded: str
           ) -> tuple[WaggleServer | Supervisor, Reloader]:
    """One serving process, or a supervisor of ``count`` workers (see :mod:`waggle.workers`); and the reloader
    that the signals use."""
    if count == 1:
        server, reloader = _serve_one(config, lambda runtime: Reloader(runtime, token, loaded))
        assert reloader is not None
        return server, reloader
    supervisor = Supervisor(config, count, token, loaded)
    supervisor.start()
    return supervisor, supervisor.reloader
