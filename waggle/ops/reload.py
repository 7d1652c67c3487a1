"""Configuration reload: on an edit of either file (watchfiles), on SIGHUP, or on ``POST /api/admin/reload``.

A reload reads both files into a new immutable configuration and validates it as ``waggle check`` would
(tunnel key files in a ``waggle check`` process, since the proxy never imports paramiko). Only a
configuration that passes is swapped in (:meth:`~waggle.server.runtime.Runtime.reload`); otherwise every
problem is logged as ``config.reload_failed`` naming the file, key and value, the failure is counted, and the
running configuration keeps serving. The files are only ever read.

The watcher watches the files' directories, not the files: editors replace files by renaming, and Kubernetes
updates a mounted ConfigMap by swapping a symlink. Any event there makes waggle compare the files' contents
with what it last read, so unrelated events cost two small reads. The same comparison also runs every
:data:`POLL_SECONDS`, for file systems that send no events.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

import gevent
import gevent.event
import gevent.lock

from waggle.config.check import admin_token, check_in_subprocess
from waggle.config.loader import ConfigError, load
from waggle.config.model import WaggleConfig
from waggle.ops import metrics
from waggle.ops.logging import get_logger
from waggle.server.runtime import Runtime, plan_reload

log = get_logger("waggle.config")

#: the files are compared with what was last read at least this often, events or not
POLL_SECONDS = 5.0


class _Flag:
    """A stop flag watchfiles can poll from its own thread (gevent's Event is for greenlets only)."""

    def __init__(self) -> None:
        self.stopped = False

    def is_set(self) -> bool:
        return self.stopped


class Reloader:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        config = runtime.config
        self.server_file = config.server_file
        self.federation_file = config.federation_file
        #: the bearer token for state-changing admin calls, read with each configuration
        self.admin_token = admin_token(config)
        self._seen = self._digest()
        self._lock = gevent.lock.Semaphore()
        self._stop = _Flag()
        self._changed = gevent.event.Event()
        self._greenlets: list[gevent.Greenlet] = []
        self.last_error: list[str] = []
        metrics.CONFIG_GENERATION.set(runtime.routes.generation)
        metrics.CONFIG_LOADED.set(runtime.routes.loaded_at)

    def _files(self) -> list[str]:
        return [f for f in (self.server_file, self.federation_file) if f]

    def _digest(self) -> str:
        h = hashlib.sha256()
        for path in self._files():
            try:
                with open(path, "rb") as f:
                    h.update(f.read())
            except OSError as exc:
                h.update(f"unreadable: {exc}".encode())
            h.update(b"\0")
        return h.hexdigest()

    # -- one reload -------------------------------------------------------------------------------------------
    def reload(self, trigger: str) -> bool:
        """Read, validate and apply both files. True when the new configuration is serving."""
        with self._lock:
            self._seen = self._digest()
            try:
                config, token = self._validated()
            except ConfigError as exc:
                metrics.CONFIG_RELOADS.labels("failed").inc()
                self.last_error = list(exc.problems)
                for problem in exc.problems:
                    log.error("config.reload_failed", trigger=trigger, problem=problem,
                              keeping_generation=self.runtime.routes.generation)
                return False
            plan = self.runtime.reload(config)
            self.admin_token = token
            self.last_error = []
            routes = self.runtime.routes
            metrics.CONFIG_RELOADS.labels("succeeded").inc()
            metrics.CONFIG_GENERATION.set(routes.generation)
            metrics.CONFIG_LOADED.set(routes.loaded_at)
            for warning in config.warnings:
                log.warning("config.warning", warning=warning)
            for key in plan.restart_required:
                log.warning("config.restart_required", key=key,
                            detail=f"'{key}' changed; the running value is kept until waggle restarts")
            log.info("config.reloaded", trigger=trigger, generation=routes.generation,
                     members=[m.name for m in config.federation.members], **plan.describe())
            return True

    def _validated(self) -> tuple[WaggleConfig, str | None]:
        config = load(self.server_file, self.federation_file)
        token = admin_token(config)
        if plan_reload(self.runtime.config, config).open_tunnels:
            problems = check_in_subprocess(self.server_file, self.federation_file)
            if problems:
                raise ConfigError(problems)
        return config, token

    # -- triggers ---------------------------------------------------------------------------------------------
    def on_signal(self) -> None:
        gevent.spawn(self.reload, "SIGHUP")

    def start(self, watch: bool) -> None:
        if not watch:
            return
        hub = gevent.get_hub()
        dirs = sorted({os.path.dirname(os.path.abspath(f)) for f in self._files()})
        self._greenlets.append(gevent.spawn(self._apply_changes))
        hub.threadpool.spawn(self._watch, dirs, hub)
        log.info("config.watching", directories=dirs)

    def _watch(self, dirs: list[str], hub: Any) -> None:
        """In a thread of its own: wake the hub whenever something changes in the files' directories."""
        import watchfiles

        try:
            for _ in watchfiles.watch(*dirs, watch_filter=None, debounce=200, step=50, recursive=False,
                                      stop_event=self._stop, raise_interrupt=False):
                hub.loop.run_callback_threadsafe(self._changed.set)
        except Exception as exc:  # the server goes on; edits then need SIGHUP
            hub.loop.run_callback_threadsafe(log.error, "config.watch_failed", error=repr(exc))

    def _apply_changes(self) -> None:
        while True:
            # also every POLL_SECONDS without an event: an edit made before the watch began, or one that a
            # file system without inotify events (NFS, some overlays) never reports, still arrives
            self._changed.wait(POLL_SECONDS)
            self._changed.clear()
            if self._digest() != self._seen:
                try:
                    self.reload("file changed")
                except Exception as exc:  # a defect must not end the watching
                    log.error("config.reload_crashed", error=repr(exc))

    def stop(self) -> None:
        self._stop.stopped = True
        for g in self._greenlets:
            g.kill(block=False)
