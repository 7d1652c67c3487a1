"""One policy of ``waggle sync --follow`` in a thread of its own: :class:`PolicyThread` runs its batches and says
how it goes (:class:`Health`), for the service (:mod:`waggle.sync.service`) that runs every policy of a file.

A continuous policy (``follow``) calls its follower's ``step`` in a loop: each call is one batch (a bootstrap, or
one page of events applied and checkpointed); when it is caught up (``step`` returns None) it waits, from 0.1 s
doubling up to ``poll-interval-max``. After a failed batch it waits longer each time, up to
:data:`~waggle.sync.failing.BACKOFF` times ``poll-interval-max``; the log says when it starts failing, when its
error changes, once a minute while it goes on and when it recovers, not at every batch (:mod:`waggle.sync.failing`
says what "failing" means). A scheduled policy (``every``, ``cron``) runs at each fire time
(:mod:`waggle.sync.schedule`): ``step`` until caught up; :meth:`PolicyThread.run_now` runs it at once.

Its executions become rows of ``waggle_sys.replication_metrics`` (:mod:`waggle.sync.metrics_table`: a scheduled
run is a row; a continuous policy's batches over each ``execution-window`` are one), Prometheus series and one
JSON log line per batch that did not fail. A row never mixes failed batches with others, and the batch that starts
a failure, or ends one, is written at once (when the source is found caught up, as a row of no batch): so the
newest rows say whether a policy is failing, and since when, to ``--status`` on any host.

Its follower is made by a factory (:data:`FollowerFactory`), so the scheduling here is tested with fakes and runs
with :class:`waggle.sync.follow.follower.Follower`.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Protocol

from waggle.common.logging import get_logger
from waggle.sync.budget import Share, policy_weight
from waggle.sync.execution import BOOTSTRAP, FAILED, Execution, PolicyState
from waggle.sync.failing import BACKOFF, REMIND_SECONDS, Failing, Note, failure_wait
from waggle.sync.metrics_table import ExecutionRow
from waggle.sync.policies import FOLLOW, Policy
from waggle.sync.schedule import Schedule

log = get_logger("waggle.sync.service")

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
                log.warning("sync.policy_close_failed", policy=self.policy.name, error=describe(exc))
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
            execution = Execution(self.policy.name, "", -1, -1, status=FAILED, error=describe(exc),
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
            log.warning("sync.metrics_failed", policy=self.policy.name, error=describe(exc))
        return execution

    def _refresh_state(self) -> None:
        try:
            self.health.state = self.follower.state()
            self.observer.state(self.policy, self.health.state)
        except Exception as exc:
            log.warning("sync.policy_state_failed", policy=self.policy.name, error=describe(exc))

    def _new_row(self, trigger: str) -> ExecutionRow:
        return ExecutionRow(self.policy.name, trigger, self.policy.spec.source)

    def _flush(self, row: ExecutionRow) -> None:
        try:
            self.observer.row(self.policy, row)
        except Exception as exc:  # the row is lost, the policy goes on
            log.warning("sync.metrics_row_failed", policy=self.policy.name, error=describe(exc))

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


def describe(exc: BaseException) -> str:
    from waggle.sync.job import describe

    return describe(exc)


def _iso(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
