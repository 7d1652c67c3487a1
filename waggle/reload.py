"""Configuration reload: on an edit of either file (watchfiles), on SIGHUP, or on ``POST /api/admin/reload``.

A reload reads both files into a new immutable configuration and validates it as ``waggle check`` would
(tunnel key files in a ``waggle check`` process, since the proxy never imports paramiko). Only a
configuration that passes is swapped in (:meth:`~waggle.runtime.Runtime.reload`); otherwise every
problem is logged as ``config.reload_failed`` naming the file, key and value, the failure is counted, and the
running configuration keeps serving. The files are only ever read.

The watcher watches the files' directories, not the files: editors replace files by renaming, and Kubernetes
updates a mounted ConfigMap by swapping a symlink. Any event there makes waggle compare the files' contents
with what it last read (and the files the configuration names: the admin token, tunnel keys), so unrelated
events cost a few small reads. The same comparison also runs every
:data:`~waggle.config.timing.RELOAD_POLL_SECONDS`, for file systems that send no events; a rejected edit is
retried every :data:`~waggle.config.timing.RELOAD_RETRY_SECONDS`, since its cause may be a file it names that
was not there yet.
"""

from __future__ import annotations

import functools
import hashlib
import os
import time
from collections.abc import Callable
from typing import Any

import gevent
import gevent.event
import gevent.lock

from waggle.checks import check_in_subprocess
from waggle.common import metrics
from waggle.common.logging import get_logger
from waggle.config.check import admin_token, rest_secrets
from waggle.config.loader import ConfigError, load
from waggle.config.model import WaggleConfig
from waggle.config.timing import RELOAD_POLL_SECONDS, RELOAD_RETRY_SECONDS
from waggle.metastores import plan_reload
from waggle.runtime import Runtime

log = get_logger("waggle.config")


class _Flag:
    """A stop flag watchfiles can poll from its own thread (gevent's Event is for greenlets only)."""

    def __init__(self) -> None:
        self.stopped = False

    def is_set(self) -> bool:
        return self.stopped


def digest_of(paths: list[str]) -> str:
    """One digest of these files' contents (an unreadable file counts with its error)."""
    h = hashlib.sha256()
    for path in paths:
        try:
            with open(path, "rb") as f:
                h.update(f.read())
        except OSError as exc:
            h.update(f"unreadable: {exc}".encode())
        h.update(b"\0")
    return h.hexdigest()


def named_files(config: WaggleConfig) -> list[str]:
    """The files a configuration names: the admin token, the REST clients' secrets, the grants' policy file and
    LDAP bind password, tunnel keys and known_hosts."""
    files = [config.server.admin_token_file] if config.server.admin_token_file else []
    files += [c.secret_file for c in config.server.iceberg_rest.clients]
    grants = config.server.authorization
    if grants is not None:
        files += [f for f in (grants.policy_file, grants.groups.ldap and grants.groups.ldap.bind_password_file)
                  if f]
    for m in config.federation.members:
        if m.tunnel is not None:
            files += [os.path.expanduser(k) for k in m.tunnel.private_keys]
            files.append(os.path.expanduser(m.tunnel.known_hosts or "~/.ssh/known_hosts"))
    return files


class Reloader:
    def __init__(self, runtime: Runtime, token: str | None, loaded: str | None = None) -> None:
        """``token``: the running configuration's admin token; ``loaded``: :func:`digest_of` both files, taken
        just before the running configuration was read."""
        self.runtime = runtime
        config = runtime.config
        self.server_file = config.server_file
        self.federation_file = config.federation_file
        #: the bearer token for state-changing admin calls, read with each configuration
        self.admin_token = token
        #: what the running configuration (or the last rejected edit) was read from: both files' digest, and
        #: that of the files the configuration names (rotating a token or a key is a change too)
        self._seen = (loaded or self.files_digest(), digest_of(named_files(config)))
        #: whose named files ``_seen`` covers: the running configuration, or an edit rejected for a file it names
        self._basis = config
        self._lock = gevent.lock.Semaphore()
        self._stop = _Flag()
        self._changed = gevent.event.Event()
        self._retry_at = float("inf")
        self.last_error: list[str] = []
        #: called with each configuration applied, and its generation (a supervisor sends it to its workers)
        self.applied: list[Callable[[WaggleConfig, int], None]] = []
        metrics.CONFIG_GENERATION.set(runtime.routes.generation)
        metrics.CONFIG_LOADED.set(runtime.routes.loaded_at)

    def _files(self) -> list[str]:
        return [f for f in (self.server_file, self.federation_file) if f]

    def files_digest(self) -> str:
        return digest_of(self._files())

    def _current(self) -> tuple[str, str]:
        return self.files_digest(), digest_of(named_files(self._basis))

    # -- one reload -------------------------------------------------------------------------------------------
    def reload(self, trigger: str, quiet_if_same: bool = False) -> bool:
        """Read, validate and apply both files. True when the new configuration is serving.

        ``quiet_if_same``: a retry of a rejected edit that fails again for the same reasons is neither logged
        nor counted again.
        """
        with self._lock:
            files = self.files_digest()  # before reading: an edit made meanwhile is seen next time
            config: WaggleConfig | None = None
            try:
                config = load(self.server_file, self.federation_file)
                token = self._check_named_files(config)
            except ConfigError as exc:
                # a file the edit names (a key not mounted yet) is watched from now on; and every
                # RELOAD_RETRY_SECONDS it is tried again anyway
                self._basis = config or self.runtime.config
                self._seen, self._retry_at = (files, digest_of(named_files(self._basis))), \
                    time.monotonic() + RELOAD_RETRY_SECONDS
                if quiet_if_same and exc.problems == self.last_error:
                    return False
                metrics.CONFIG_RELOADS.labels("failed").inc()
                self.last_error = list(exc.problems)
                for problem in exc.problems:
                    log.error("config.reload_failed", trigger=trigger, problem=problem,
                              keeping_generation=self.runtime.routes.generation)
                return False
            plan = self.runtime.reload(config)
            for applied in self.applied:
                applied(self.runtime.config, self.runtime.routes.generation)
            self._basis = config
            self._seen, self._retry_at = (files, digest_of(named_files(config))), float("inf")
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

    def _check_named_files(self, config: WaggleConfig) -> str | None:
        """What ``waggle check`` adds to loading, for this edit; returns the admin token."""
        token = admin_token(config)
        rest_secrets(config)
        if plan_reload(self.runtime.config, config).open_tunnels:
            problems = check_in_subprocess(self.server_file, self.federation_file)
            if problems:
                raise ConfigError(problems)
        return token

    # -- triggers ---------------------------------------------------------------------------------------------
    def on_signal(self) -> None:
        gevent.spawn(self._reload_safely, "SIGHUP")

    def _reload_safely(self, trigger: str, quiet_if_same: bool = False) -> None:
        try:
            self.reload(trigger, quiet_if_same)
        except Exception as exc:  # a defect must not end the watching, nor print a bare traceback
            log.error("config.reload_crashed", trigger=trigger, error=repr(exc))

    def start(self, watch: bool) -> None:
        """Watch the files (``hot-reload``); without it, only SIGHUP and the admin call reload."""
        if not watch:
            return
        hub = gevent.get_hub()
        dirs = sorted({os.path.dirname(os.path.abspath(f)) for f in self._files()})
        gevent.spawn(self._apply_changes)
        hub.threadpool.spawn(self._watch, dirs, hub)
        log.info("config.watching", directories=dirs)

    def _watch(self, dirs: list[str], hub: Any) -> None:
        """In a thread of its own: wake the hub whenever something changes in the files' directories."""
        try:
            import watchfiles

            for _ in watchfiles.watch(*dirs, watch_filter=None, debounce=200, step=50, recursive=False,
                                      stop_event=self._stop, raise_interrupt=False):
                hub.loop.run_callback_threadsafe(self._changed.set)
        except Exception as exc:  # the server goes on: the files are still compared every RELOAD_POLL_SECONDS
            hub.loop.run_callback_threadsafe(functools.partial(
                log.error, "config.watch_failed", error=repr(exc), fallback=f"polling every {RELOAD_POLL_SECONDS}s"))

    def _apply_changes(self) -> None:
        while not self._stop.stopped:
            # also every RELOAD_POLL_SECONDS without an event: an edit made before the watch began, or one that a
            # file system without inotify events (NFS, some overlays) never reports, still arrives
            self._changed.wait(RELOAD_POLL_SECONDS)
            self._changed.clear()
            if self._stop.stopped:
                return
            retry = time.monotonic() >= self._retry_at
            changed = self._current() != self._seen
            if changed or retry:
                self._reload_safely("file changed" if changed else "retry", quiet_if_same=not changed)

    def stop(self) -> None:
        """No more reloads from the files (one under way finishes: a half-applied reload must not be)."""
        self._stop.stopped = True
        self._changed.set()
