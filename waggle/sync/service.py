"""``waggle sync --follow``: one process serves every policy of a sync file, a thread each.

A continuous policy (``follow``) calls its follower's ``step`` in a loop: each call is one batch (a bootstrap, or
one page of events applied and checkpointed); when it is caught up (``step`` returns None) it waits, from 0.1 s
doubling up to ``poll-interval-max``. After a failed batch it waits longer each time, up to
:data:`~waggle.sync.failing.BACKOFF` times ``poll-interval-max``; the log says when it starts failing, when its
error changes, once a minute while it goes on and when it recovers, not at every batch (:mod:`waggle.sync.failing`
says what "failing" means). A scheduled policy (``every``, ``cron``) runs at each fire time
(:mod:`waggle.sync.schedule`): ``step`` until caught up. ``POST /policies/NAME/run`` (:mod:`waggle.sync.http`) runs
a policy at once, as Hive's ``ALTER SCHEDULED QUERY ... EXECUTE`` does.

Hot edits: the file is polled every :data:`WATCH_SECONDS` (its mtime and size); on a change it is read whole. A
bad edit is logged, naming the file, key and value, and changes nothing. Otherwise (:func:`plan_changes`): new
policies start, removed and disabled ones stop after their batch in hand, changed ones stop and start again with
the new definition, and re-enabled ones start again from their checkpoint (the follower keeps it in the primary).
SIGTERM: every policy finishes its batch in hand (its checkpoint written), then the process exits 0.

Each policy's executions become rows of ``waggle_sys.replication_metrics`` (:mod:`waggle.sync.metrics_table`: a
scheduled run is a row; a continuous policy's batches over each ``execution-window`` are one), Prometheus series
and one JSON log line per batch that did not fail. A row never mixes failed batches with others, and the batch
that starts a failure, or ends one, is written at once (when the source is found caught up, as a row of no
batch): so the newest rows say whether a policy is failing, and since when, to ``--status`` on any host.

The followers are made by a factory (:data:`FollowerFactory`), so the scheduling here is tested with fakes and
runs with :class:`waggle.sync.follow.follower.Follower`.
"""

from __future__ import annotations

import datetime as dt
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from waggle.common.logging import Throttle, get_logger
from waggle.sync.budget import FairBudget, Share, policy_weight
from waggle.sync.execution import BOOTSTRAP, FAILED, Execution, PolicyState
from waggle.sync.failing import BACKOFF, REMIND_SECONDS, Failing, Note, failure_wait
from waggle.sync.metrics_table import ExecutionRow
from waggle.sync.policies import FOLLOW, Policy, PolicyFile, load_policies
from waggle.sync.runner import SyncConfigError
from waggle.sync.schedule import Schedule

log = get_logger("waggle.sync.service")

#: How often the sync file is looked at for edits.
WATCH_SECONDS = 2.0
#: The first wait of a caught-up continuous policy; it doubles up to ``poll-interval-max``.
FIRST_POLL = 0.1
#: How long after its last applied batch a continuous policy keeps polling every FIRST_POLL seconds.
ACTIVE_SECONDS = 5.0
RUN_NOW = "run-now"


class FollowerLike(Protocol):
    """What the service needs of a follower (:class:`waggle.sync.follow.follower.Follower`)."""

    def step(self, stop: threading.Event) -> Execution | None: ...

    def state(self) -> PolicyState: ...

    def close(self) -> None: ...


#: Makes a policy's follower, given the policy and its share of the write budget.
FollowerFactory = Callable[[Policy, Share], FollowerLike]


class Observer(Protocol):
    """Who hears of batches and rows: the Prometheus series, the metrics table."""

    def batch(self, policy: Policy, execution: Execution) -> None: ...

    def row(self, policy: Policy, row: ExecutionRow) -> None: ...

    def state(self, policy: Policy, state: PolicyState) -> None: ...


def iso_ms(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


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


# -- one policy's thread ----------------------------------------------------------------------------------------
@dataclass(slots=True)
class Health:
    """What ``/healthz`` and ``--status`` say of one policy."""

    policy: str
    kind: str
    #: starting, running (a batch in hand), idle (caught up), retrying (waiting after a failed batch), waiting
    #: (for a fire time), stopped
    phase: str = "starting"
    batches: int = 0
    last_batch_at: str | None = None
    last_status: str | None = None
    last_error: str | None = None
    failing: Failing = field(default_factory=Failing)  # the run of failed batches it is in, if any
    next_run_at: str | None = None
    state: PolicyState | None = None
    batch_started: float | None = None  # monotonic time the batch in hand started
    extra: dict[str, object] = field(default_factory=dict)

    def as_json(self, now: float) -> dict[str, object]:
        s = self.state
        return {
            "policy": self.policy, "kind": self.kind, "phase": self.phase, "batches": self.batches,
            "last_batch_at": self.last_batch_at, "last_status": self.last_status, "last_error": self.last_error,
            **self.failing.as_json(now), "error": self.failing.error, "next_run_at": self.next_run_at,
            "batch_seconds": None if self.batch_started is None else round(now - self.batch_started, 1),
            "checkpoint": s.checkpoint if s else None, "source_event": s.source_event if s else None,
            "lag_events": s.lag_events if s else None, "lag_seconds": s.lag_seconds if s else None,
            "failed_tables": dict(s.failed_tables) if s else {},
        }


class PolicyThread:
    def __init__(self, policy: Policy, follower: FollowerLike, observer: Observer, poll_interval_max: float,
                 execution_window: float, share: Share | None = None, clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time, backoff: float = BACKOFF,
                 remind_every: float = REMIND_SECONDS) -> None:
        self.policy, self.follower, self.observer = policy, follower, observer
        self.poll_interval_max, self.execution_window = poll_interval_max, execution_window
        self.share = share
        self.clock, self.wall = clock, wall
        self.backoff = backoff
        self.stop_event = threading.Event()
        self.wake = threading.Event()  # a run-now, or the stop
        self._run_now = False
        self.health = Health(policy.name, policy.kind, failing=Failing(remind_every))
        self.thread = threading.Thread(target=self._main, name=f"policy-{policy.name}", daemon=True)

    def start(self) -> PolicyThread:
        self.thread.start()
        return self

    def stop(self) -> None:
        """Ask the policy to stop after its batch in hand."""
        self.stop_event.set()
        self.wake.set()

    def join(self, timeout: float | None = None) -> None:
        self.thread.join(timeout)

    def run_now(self) -> None:
        self._run_now = True
        self.wake.set()

    def _main(self) -> None:
        try:
            if self.policy.kind == FOLLOW:
                self._follow()
            else:
                self._scheduled()
        finally:
            self.health.phase = "stopped"
            try:
                self.follower.close()
            except Exception as exc:  # closing is best effort: the checkpoint is already written
                log.warning("sync.policy_close_failed", policy=self.policy.name, error=_describe(exc))
            log.info("sync.policy_stopped", policy=self.policy.name)

    # -- continuous ----------------------------------------------------------------------------------------
    def _follow(self) -> None:
        wait = FIRST_POLL
        last_applied = float("-inf")
        row: ExecutionRow | None = None
        row_failed = False  # a row holds failed batches only, or none
        window_start = self.clock()
        failing = self.health.failing
        while not self.stop_event.is_set():
            was_failing = failing.failing
            execution = self._step()
            if execution is not None:
                failed = execution.status == FAILED
                if row is not None and failed != row_failed:
                    self._flush(row)
                    row = None
                if row is None:
                    row, row_failed, window_start = self._new_row(FOLLOW), failed, self.clock()
                row.add(execution, self._now_iso())
            if failing.failing != was_failing:  # started failing, or recovered: in the table at once
                if row is not None:
                    self._flush(row)
                    row = None
                if execution is None:  # recovered by finding the source caught up: a row of no batch
                    self._flush(self._empty_row(FOLLOW))
            if row is not None and self.clock() - window_start >= self.execution_window:
                self._flush(row)
                row = None
            if execution is not None and execution.status == FAILED:  # failing: wait longer each time
                self._pause("retrying", failure_wait(failing.batches, self.poll_interval_max, self.backoff))
            elif execution is None:  # caught up
                self._pause("idle", wait)
                # while the source is active (a batch applied lately), caught up is a moment between changes:
                # the wait stays short, so the lag does too; after ACTIVE_SECONDS of nothing it backs off
                active = self.clock() - last_applied < ACTIVE_SECONDS
                wait = FIRST_POLL if active else min(wait * 2, self.poll_interval_max)
            else:
                wait, last_applied = FIRST_POLL, self.clock()
        if row is not None:
            self._flush(row)

    def _pause(self, phase: str, seconds: float) -> None:
        """Wait ``seconds``, or less when woken (a run-now, the stop)."""
        self.health.phase = phase
        self.wake.wait(seconds)
        self.wake.clear()

    # -- scheduled -----------------------------------------------------------------------------------------
    def _scheduled(self) -> None:
        schedule = Schedule(self.policy.every, self.policy.cron, start=self.wall())
        due = schedule.first(self.wall())
        while not self.stop_event.is_set():
            self.health.phase = "waiting"
            self.health.next_run_at = _iso(due)
            while not self.stop_event.is_set() and not self._run_now and self.wall() < due:
                self.wake.wait(max(0.0, min(due - self.wall(), 1.0)))
                self.wake.clear()
            if self.stop_event.is_set():
                break
            if self._run_now:  # an extra run: the schedule stays as it was
                self._run_now = False
                self.run_once(RUN_NOW)
                continue
            self.run_once(self.policy.kind)
            due = schedule.due(due, self.wall())

    def run_once(self, trigger: str) -> list[ExecutionRow]:
        """Step until caught up (or stopped, or a batch failed); the run's rows, written: one, or two when a
        batch failed after others did not (the failed batch is a row of its own)."""
        rows: list[ExecutionRow] = []
        row = self._new_row(trigger)
        while not self.stop_event.is_set():
            execution = self._step()
            if execution is None:
                break
            if execution.status == FAILED and row.batches:
                self._flush(row)
                rows.append(row)
                row = self._new_row(trigger)
            row.add(execution, self._now_iso())
            if execution.status == FAILED:
                break
        if not row.batches:
            row = self._empty_row(trigger, row)
        self._flush(row)
        return [*rows, row]

    def _empty_row(self, trigger: str, row: ExecutionRow | None = None) -> ExecutionRow:
        """A row of no batch (a run that found its source caught up), at the checkpoint last known."""
        row = row or self._new_row(trigger)
        state = self.health.state
        row.from_event = row.to_event = state.checkpoint if state else None
        row.started_at = row.started_at or self._now_iso()
        row.ended_at = self._now_iso()
        return row

    def _now_iso(self) -> str:
        return iso_ms(self.wall())

    # -- one batch ------------------------------------------------------------------------------------------
    def _step(self) -> Execution | None:
        h = self.health
        h.phase, h.batch_started = "running", self.clock()
        began, started = h.batch_started, self._now_iso()
        try:
            execution = self.follower.step(self.stop_event)
        except Exception as exc:  # the batch did not run (source or target unreachable, ...): it failed
            execution = Execution(self.policy.name, "", -1, -1, status=FAILED, error=_describe(exc),
                                  seconds=self.clock() - h.batch_started, started_at=started)
            execution = _unknown_events(execution, self.health.state)
        finally:
            h.batch_started = None
        self._refresh_state()
        if execution is None:  # caught up: both metastores answered, whatever failed before is behind it
            self._note(h.failing.recovered(self.clock()))
            return None
        if not execution.started_at:
            execution = replace(execution, started_at=started)
        h.batches += 1
        h.last_batch_at, h.last_status, h.last_error = self._now_iso(), execution.status, execution.error
        if execution.phase == BOOTSTRAP and self.share is not None and execution.objects:
            self.share.set_weight(policy_weight(execution.objects))
        if execution.status != FAILED:
            self._note(h.failing.recovered(self.clock()))
            self._log(execution)
        elif self.stop_event.is_set():  # stopped in the middle of it: said once, and not a failure of the policy
            self._log(execution)
        else:  # counted; logged when the policy starts failing, its error changes, and once a minute
            self._note(h.failing.failed(self.clock(), execution.started_at, execution.error or "failed", began),
                       execution)
        try:
            self.observer.batch(self.policy, execution)
        except Exception as exc:
            log.warning("sync.metrics_failed", policy=self.policy.name, error=_describe(exc))
        return execution

    def _refresh_state(self) -> None:
        try:
            self.health.state = self.follower.state()
            self.observer.state(self.policy, self.health.state)
        except Exception as exc:
            log.warning("sync.policy_state_failed", policy=self.policy.name, error=_describe(exc))

    def _new_row(self, trigger: str) -> ExecutionRow:
        return ExecutionRow(self.policy.name, trigger, self.policy.spec.source)

    def _flush(self, row: ExecutionRow) -> None:
        try:
            self.observer.row(self.policy, row)
        except Exception as exc:  # the row is lost, the policy goes on
            log.warning("sync.metrics_row_failed", policy=self.policy.name, error=_describe(exc))

    def _note(self, note: Note | None, e: Execution | None = None) -> None:
        """Log a :class:`~waggle.sync.failing.Failing` note, with the failed batch's phase, checkpoint and time and
        when the next one comes."""
        if note is None:
            return
        fields: dict[str, object] = {"policy": self.policy.name, **note.fields}
        if e is not None:
            fields.update(phase=e.phase or None, from_event=e.from_event, seconds=round(e.seconds, 3))
            if self.policy.kind == FOLLOW:
                fields["retry_in"] = round(failure_wait(self.health.failing.batches, self.poll_interval_max,
                                                        self.backoff), 3)
            else:
                fields["next_run_at"] = self.health.next_run_at
        (log.info if note.level == "info" else log.warning)(note.event, **fields)

    def _log(self, e: Execution) -> None:
        fields: dict[str, object] = {
            "policy": e.policy or self.policy.name, "phase": e.phase, "status": e.status,
            "from_event": e.from_event, "to_event": e.to_event, "objects": e.objects, "partitions": e.partitions,
            "bytes": e.bytes, "seconds": round(e.seconds, 3),
            "events": {f"{t}:{o}": n for (t, o), n in sorted(e.events.items())},
        }
        if e.lag_seconds is not None:
            fields["lag_seconds"] = round(e.lag_seconds, 3)
        if e.bootstrap_reason:
            fields["bootstrap_reason"] = e.bootstrap_reason
        if e.failed_tables:
            fields["failed_tables"] = dict(e.failed_tables)
        if e.error:
            fields["error"] = e.error
        (log.warning if e.status == FAILED else log.info)("sync.batch", **fields)


def _unknown_events(execution: Execution, state: PolicyState | None) -> Execution:
    """A failed batch that never ran starts and ends at the checkpoint last known."""
    checkpoint = state.checkpoint if state and state.checkpoint is not None else 0
    return replace(execution, from_event=checkpoint, to_event=checkpoint)


def _describe(exc: BaseException) -> str:
    from waggle.sync.job import describe

    return describe(exc)


def _iso(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


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
                log.error("sync.policy_start_failed", policy=policy.name, error=_describe(exc),
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
                log.error("sync.config_watch_failed", file=self.config.path, error=_describe(exc))

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
