"""``waggle sync --follow``: one process serves every policy of a sync file, each in a thread of its own
(:mod:`waggle.sync.policy_thread` runs one policy's batches and says how it goes).

``POST /policies/NAME/run`` (:mod:`waggle.sync.http`) runs a policy at once, as Hive's ``ALTER SCHEDULED QUERY ...
EXECUTE`` does.

Hot edits: the file is polled every :data:`WATCH_SECONDS` (its mtime and size); on a change it is read whole. A
bad edit is logged, naming the file, key and value, and changes nothing. Otherwise (:func:`plan_changes`): new
policies start, removed and disabled ones stop after their batch in hand, changed ones stop and start again with
the new definition, and re-enabled ones start again from their checkpoint (the follower keeps it in the primary).
SIGTERM: every policy finishes its batch in hand (its checkpoint written), then the process exits 0.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from waggle.common.logging import Throttle, get_logger
from waggle.sync.budget import FairBudget
from waggle.sync.policies import Policy, PolicyFile, load_policies
from waggle.sync.policy_thread import (
    FollowerFactory,
    Health,
    Observer,
    PolicyThread,
    describe,
)
from waggle.sync.runner import SyncConfigError

log = get_logger("waggle.sync.service")

#: How often the sync file is looked at for edits.
WATCH_SECONDS = 2.0


# -- reconciling an edited file (pure) --------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Changes:
    start: tuple[Policy, ...] = ()
    stop: tuple[str, ...] = ()
    restart: tuple[Policy, ...] = ()  # changed definitions: stop the old, start the new

    def __bool__(self) -> bool:
        return bool(self.start or self.stop or self.restart)


def plan_changes(running: Mapping[str, Policy], wanted: Sequence[Policy]) -> Changes:
    """What to do to go from the policies ``running`` (by name) to the file's ``wanted`` ones: disabled policies
    are not wanted running; a policy whose definition changed restarts (an enabled one only)."""
    enabled = {p.name: p for p in wanted if p.enabled}
    start = tuple(p for n, p in enabled.items() if n not in running)
    stop = tuple(n for n in running if n not in enabled)
    restart = tuple(p for n, p in enabled.items() if n in running and running[n] != p)
    return Changes(start, stop, restart)


# -- the service ------------------------------------------------------------------------------------------------
class Service:
    """Every enabled policy of one sync file, each in its thread; hot edits; run-now; a graceful stop."""

    def __init__(self, config: PolicyFile, factory: FollowerFactory, observer: Observer, budget: FairBudget,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.config, self.factory, self.observer, self.budget = config, factory, observer, budget
        self.settings = config  # the service's own settings: as the file said at the start
        self.clock = clock
        self.threads: dict[str, PolicyThread] = {}
        self.stopping = threading.Event()
        self._lock = threading.Lock()  # the threads and the config
        self._apply = threading.Lock()  # one edit at a time
        self._start_failures = Throttle(60.0)
        self._seen = _file_mark(config.path)

    # -- policies ------------------------------------------------------------------------------------------
    def start(self) -> Service:
        self.apply(self.config)
        return self

    def apply(self, config: PolicyFile) -> Changes:
        """Go from the running policies to ``config``'s."""
        with self._apply:
            with self._lock:
                running = {n: t.policy for n, t in self.threads.items()}
                changes = plan_changes(running, config.policies)
                stopped = [self.threads.pop(n) for n in (*changes.stop, *(p.name for p in changes.restart))]
                self.config = config
            for t in stopped:
                t.stop()
            for t in stopped:
                t.join()  # the batch in hand finishes: its checkpoint is written before a new follower reads it
            with self._lock:
                if not self.stopping.is_set():
                    for policy in (*changes.restart, *changes.start):
                        self._start(policy)
        if changes:
            log.info("sync.policies_changed", started=[p.name for p in changes.start], stopped=list(changes.stop),
                     restarted=[p.name for p in changes.restart])
        return changes

    def _start(self, policy: Policy) -> None:
        share = self.budget.share(policy.name)
        try:
            follower = self.factory(policy, share)
        except Exception as exc:  # tried again by revive(), at the next look at the file
            if self._start_failures.allow(policy.name):
                log.error("sync.policy_start_failed", policy=policy.name, error=describe(exc),
                          retry=f"every {WATCH_SECONDS:g}s")
            return
        self.threads[policy.name] = PolicyThread(policy, follower, self.observer, self.settings.poll_interval_max,
                                                 self.settings.execution_window, share, self.clock).start()
        log.info("sync.policy_started", policy=policy.name, schedule=policy.schedule_text,
                 tables=list(policy.spec.patterns), source=policy.spec.source)

    def run_now(self, name: str) -> str | None:
        """Make a policy run at once; None when it is running, else why not."""
        with self._lock:
            thread = self.threads.get(name)
            if thread is None:
                known = self.config.policy(name)
                if known is None:
                    return f"no policy '{name}' in {self.config.path}"
                return f"policy '{name}' is disabled"
            thread.run_now()
        return None

    # -- hot edits -----------------------------------------------------------------------------------------
    def check_file(self) -> Changes | None:
        """Read the file again if it changed since last looked at; the changes applied (None: no edit, or a bad
        one, which is logged)."""
        mark = _file_mark(self.config.path)
        if mark == self._seen:
            return None
        self._seen = mark
        try:
            config = load_policies(self.config.path)
        except SyncConfigError as exc:
            for problem in exc.problems:
                log.error("sync.config_rejected", problem=problem, keeping="the running policies, unchanged")
            return None
        for name in _needs_restart(self.settings, config):
            log.warning("sync.config_needs_restart", key=name, file=self.config.path,
                        detail="takes effect when the service starts again")
        return self.apply(config)

    def revive(self) -> list[str]:
        """Start again the enabled policies that are not running: those whose follower could not be made, and
        those whose thread ended on an unexpected error. Their names."""
        with self._apply:
            with self._lock:
                dead = [n for n, t in self.threads.items() if not t.thread.is_alive() and not t.stop_event.is_set()]
                for name in dead:
                    log.error("sync.policy_died", policy=name, detail="started again")
                    self.threads.pop(name)
                missing = [p for p in self.config.policies if p.enabled and p.name not in self.threads]
                if not self.stopping.is_set():
                    for policy in missing:
                        self._start(policy)
            return [p.name for p in missing if p.name in self.threads]

    def watch(self, interval: float = WATCH_SECONDS) -> None:
        """Poll the file until stopped; start again what is not running."""
        while not self.stopping.wait(interval):
            try:
                if self.check_file() is None:
                    self.revive()
            except Exception as exc:  # the watcher keeps watching
                log.error("sync.config_watch_failed", file=self.config.path, error=describe(exc))

    # -- health --------------------------------------------------------------------------------------------
    def health(self) -> tuple[bool, dict[str, object]]:
        now = self.clock()
        with self._lock:
            threads = list(self.threads.values())
        policies = [t.health.as_json(now) for t in threads]
        dead = [t.policy.name for t in threads if not t.thread.is_alive() and not t.stop_event.is_set()]
        failing = [t.policy.name for t in threads if t.health.failing.failing]
        ok = not self.stopping.is_set() and not dead and not failing
        return ok, {"status": "ok" if ok else "failing", "dead": dead, "failing": failing, "policies": policies}

    def alive(self) -> tuple[bool, dict[str, object]]:
        """Whether the process does its job apart from what its metastores do: every policy's thread runs and the
        service is not stopping (``/livez``: a restart would not mend a failing policy's source)."""
        with self._lock:
            threads = list(self.threads.values())
        dead = [t.policy.name for t in threads if not t.thread.is_alive() and not t.stop_event.is_set()]
        ok = not self.stopping.is_set() and not dead
        return ok, {"status": "ok" if ok else "stopping" if self.stopping.is_set() else "dead", "dead": dead}

    def failing_seconds(self) -> list[tuple[str, float]]:
        """Each policy's seconds of failing (0: not failing), for ``waggle_sync_failing_seconds``."""
        now = self.clock()
        return [(policy.name, health.failing.seconds(now)) for policy, health in self.states()]

    def states(self) -> list[tuple[Policy, Health]]:
        with self._lock:
            return [(t.policy, t.health) for t in self.threads.values()]

    # -- stop ----------------------------------------------------------------------------------------------
    def stop(self) -> None:
        """Every policy finishes its batch in hand; then return."""
        self.stopping.set()
        with self._apply, self._lock:
            threads = list(self.threads.values())
            self.threads.clear()
        for t in threads:
            t.stop()
        for t in threads:
            t.join()


def _file_mark(path: str) -> tuple[float, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime, st.st_size


def _needs_restart(old: PolicyFile, new: PolicyFile) -> list[str]:
    """Keys of the file an edit changed that the running service does not take up."""
    keys = {"federation-config": (old.run.federation_config, new.run.federation_config),
            "max-writes-per-second": (old.run.max_writes_per_second, new.run.max_writes_per_second),
            "master": (old.run.master, new.run.master), "http-port": (old.http_port, new.http_port),
            "lease-seconds": (old.lease_seconds, new.lease_seconds), "page-size": (old.page_size, new.page_size),
            "poll-interval-max": (old.poll_interval_max, new.poll_interval_max),
            "execution-window": (old.execution_window, new.execution_window)}
    return [k for k, (a, b) in keys.items() if a != b]
