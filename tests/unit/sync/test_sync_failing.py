"""A failing policy tells the truth: failing from its first failed batch (and since when, with which error),
backing off up to poll-interval-max x BACKOFF, logging at each change of state and once a minute rather than at
every batch, writing rows that say so, and ``--status`` exiting 2; and the follower's calls have timeouts. A fake
follower and a fake clock (milliseconds), and a loopback peer that never answers.
"""

from __future__ import annotations

import io
import re
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.faults import BlackHole
from tests.support.waits import wait_for
from waggle.sync import policy_thread as service_module
from waggle.sync.budget import FairBudget
from waggle.sync.execution import FAILED, INCREMENTAL, SUCCEEDED, Execution, PolicyState
from waggle.sync.failing import BACKOFF, CHANGED, RECOVERED, REMINDER, STARTED, Failing, failure_wait
from waggle.sync.hms import FOLLOW_BULK_SECONDS, FOLLOW_CALL_SECONDS, call_timeout, follow_connections
from waggle.sync.http import Api, HttpServer, SyncMetrics
from waggle.sync.metrics_table import COLUMNS, ExecutionRow
from waggle.sync.policies import Policy, load_policies
from waggle.sync.policy_thread import PolicyThread, iso_ms
from waggle.sync.service import Service
from waggle.sync.status import Verdict, _print_policy, _Reach, from_live, from_rows, live_health
from waggle.upstream.blocking import MetastoreUnavailable, plain_member

EPOCH = 1_767_225_600.0  # 2026-01-01T00:00:00Z
DOWN = "metastore 'analytics' is unreachable: 127.0.0.1:9083: Connection refused"
HUNG = "metastore 'analytics' did not answer get_current_notificationEventId within 30s"


# -- the pure parts ----------------------------------------------------------------------------------------------------
def test_failed_batches_back_off_doubling_up_to_backoff_times_poll_interval_max() -> None:
    assert BACKOFF == 4
    assert [failure_wait(n, 1.0) for n in range(1, 7)] == [1.0, 2.0, 4.0, 4.0, 4.0, 4.0]
    assert [failure_wait(n, 0.25) for n in (1, 2, 3, 50, 10_000)] == [0.25, 0.5, 1.0, 1.0, 1.0]


def test_failing_notes_each_change_of_state_and_reminds_once_a_minute() -> None:
    f = Failing()
    assert not f.failing and f.recovered(0.0) is None  # nothing to recover from
    started = f.failed(10.0, "2026-01-01T00:00:10.000Z", DOWN)
    assert started is not None and started.event == STARTED and started.level == "warning"
    assert started.fields == {"since": "2026-01-01T00:00:10.000Z", "error": DOWN}
    assert f.failing and f.since_at == "2026-01-01T00:00:10.000Z" and f.seconds(25.0) == 15.0
    # the same error again: counted, not said
    assert [f.failed(10.0 + i, f"t{i}", DOWN) for i in range(1, 30)] == [None] * 29
    changed = f.failed(40.0, "t40", HUNG)
    assert changed is not None and changed.event == CHANGED
    assert changed.fields["previous_error"] == DOWN and changed.fields["failed_batches"] == 31
    assert f.failed(41.0, "t41", DOWN) is None  # seen in this run already: no line for flapping errors
    assert f.failed(99.0, "t99", DOWN) is None  # 59 s after the last line
    reminder = f.failed(100.0, "t100", DOWN)
    assert reminder is not None and reminder.event == REMINDER
    assert reminder.fields == {"since": "2026-01-01T00:00:10.000Z", "failing_seconds": 90.0, "failed_batches": 34,
                               "error": DOWN}
    assert f.failed(130.0, "t130", DOWN) is None
    assert f.since_at == "2026-01-01T00:00:10.000Z"  # the run's start stays
    recovered = f.recovered(131.0)
    assert recovered is not None and recovered.event == RECOVERED and recovered.level == "info"
    assert recovered.fields == {"failed_since": "2026-01-01T00:00:10.000Z", "failing_seconds": 121.0,
                                "failed_batches": 35, "last_error": DOWN}
    assert not f.failing and f.batches == 0 and f.as_json(200.0) == {
        "failing": False, "failing_since": None, "failing_seconds": 0.0, "failed_batches": 0}
    again = f.failed(300.0, "t300", DOWN)  # a new run starts afresh
    assert again is not None and again.event == STARTED and f.since_at == "t300"


def test_distinct_errors_of_one_run_are_said_a_few_times_at_most() -> None:
    f = Failing()
    notes = [f.failed(float(i), f"t{i}", f"error {'abcdefghij'[i % 10]}") for i in range(200)]
    assert [n.event for n in notes if n is not None] == [STARTED] + [CHANGED] * 4 + [REMINDER] * 3


def test_an_error_timed_differently_is_not_a_new_one() -> None:
    f = Failing()
    refused = "metastore 'analytics' is unreachable: 127.0.0.1:9083: Connection refused after {} ms"
    assert f.failed(0.0, "t0", refused.format(0)) is not None
    assert [f.failed(float(i), f"t{i}", refused.format(i % 3)) for i in range(1, 20)] == [None] * 19
    assert f.error == refused.format(1)  # the last one's, as it was


# -- a policy's thread, with a fake follower and a fake clock ---------------------------------------------------------
class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def wall(self) -> float:
        return EPOCH + self.now


class FakeWake:
    """The thread's wake event: each wait moves the fake clock on by its timeout, and is recorded."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.waits: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(round(timeout or 0.0, 6))
        self.clock.now += timeout or 0.0
        return False

    def set(self) -> None:
        pass

    def clear(self) -> None:
        pass


class ScriptedFollower:
    """Each step runs the next item: an exception is raised, an Execution returned, None is caught up; each
    takes ``seconds`` of the fake clock (a call timing out takes its timeout). The end of the script stops the
    policy."""

    def __init__(self, clock: Clock, script: list[tuple[object, float]], stop: threading.Event) -> None:
        self.clock, self.script, self.stop = clock, list(script), stop
        self.checkpoint = 7

    def step(self, stop: threading.Event) -> Execution | None:
        item, seconds = self.script.pop(0)
        self.clock.now += seconds
        if not self.script:
            self.stop.set()
        if isinstance(item, Exception):
            raise item
        if isinstance(item, Execution):
            self.checkpoint = item.to_event
            return item
        return None

    def state(self) -> PolicyState:
        return PolicyState("p", "analytics", self.checkpoint, self.checkpoint, 0, 0.0)

    def close(self) -> None:
        pass


class Rows:
    def __init__(self) -> None:
        self.rows: list[ExecutionRow] = []
        self.batches: list[Execution] = []

    def batch(self, policy: Policy, execution: Execution) -> None:
        self.batches.append(execution)

    def row(self, policy: Policy, row: ExecutionRow) -> None:
        self.rows.append(row)

    def state(self, policy: Policy, state: PolicyState) -> None:
        pass


class Lines:
    """The service's log, as (level, event, fields)."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, str, dict[str, Any]]] = []

    def __getattr__(self, level: str) -> Callable[..., None]:
        return lambda event, **fields: self.lines.append((level, event, fields))

    def events(self) -> list[str]:
        return [event for _, event, _ in self.lines]


def applied(start: int, end: int) -> Execution:
    return Execution("p", INCREMENTAL, start, end, partitions=1, started_at="2026-01-01T00:00:00.000Z")


@pytest.fixture
def policy(tmp_path: Path) -> Policy:
    path = tmp_path / "sync.yml"
    path.write_text("federation-config: fed.yml\nsource: analytics\njobs:\n  - {name: p, tables: 's.*', "
                    "follow: true}\n")
    return load_policies(str(path)).policies[0]


def follow(policy: Policy, script: list[tuple[object, float]], monkeypatch: pytest.MonkeyPatch,
           poll_interval_max: float = 1.0, execution_window: float = 60.0
           ) -> tuple[PolicyThread, FakeWake, Rows, Lines, Clock]:
    """Run a continuous policy's loop in this thread over ``script``, to its end."""
    clock = Clock()
    lines = Lines()
    monkeypatch.setattr(service_module, "log", lines)
    rows = Rows()
    thread = PolicyThread(policy, None, rows, poll_interval_max, execution_window,  # type: ignore[arg-type]
                          clock=clock, wall=clock.wall)
    thread.follower = ScriptedFollower(clock, script, thread.stop_event)
    wake = FakeWake(clock)
    thread.wake = wake  # type: ignore[assignment]
    thread._follow()
    return thread, wake, rows, lines, clock


def test_a_source_down_then_back_fails_from_the_first_batch_backs_off_and_says_so_a_few_times(
        policy: Policy, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[bool, str | None, int]] = []  # the policy's failing state as each batch starts

    class Watching(ScriptedFollower):
        def step(self, stop: threading.Event) -> Execution | None:
            f = thread.health.failing
            seen.append((f.failing, f.since_at, f.batches))
            return super().step(stop)

    clock = Clock()
    lines = Lines()
    monkeypatch.setattr(service_module, "log", lines)
    thread = PolicyThread(policy, None, Rows(), 1.0, 60.0, clock=clock, wall=clock.wall)  # type: ignore[arg-type]
    down = [(ConnectionRefusedError("source down"), 0.01)] * 60
    thread.follower = Watching(clock, [(applied(7, 8), 0.5), *down, (None, 0.01)], thread.stop_event)
    wake = FakeWake(clock)
    thread.wake = wake  # type: ignore[assignment]
    thread._follow()

    # failing from the first failed batch, since its start (the fake wall clock's), until found caught up
    assert seen[1] == (False, None, 0)
    assert seen[2] == (True, iso_ms(EPOCH + 0.5), 1)
    assert seen[-1] == (True, iso_ms(EPOCH + 0.5), 60)
    assert not thread.health.failing.failing and thread.health.phase == "idle"
    # backed off after each failed batch: 1 s, 2 s, then 4 s (poll-interval-max x BACKOFF); caught up, 0.1 s
    assert wake.waits == [1.0, 2.0] + [4.0] * 58 + [0.1]
    # the log: the applied batch, then one line when it started failing, a reminder each minute of its ~4
    # minutes, one when it recovered; not a line per failed batch
    assert lines.events() == ["sync.batch", STARTED, REMINDER, REMINDER, REMINDER, RECOVERED]
    level, _, first = lines.lines[1]
    assert level == "warning" and first["since"] == iso_ms(EPOCH + 0.5)
    assert first["error"] == "ConnectionRefusedError: source down" and first["retry_in"] == 1.0
    assert [fields["failed_batches"] for _, _, fields in lines.lines[2:5]] == [18, 33, 48]
    level, _, recovered = lines.lines[-1]
    assert level == "info" and recovered["failed_batches"] == 60
    assert recovered["failed_since"] == iso_ms(EPOCH + 0.5)
    # counted from the start of the first failed batch (the fake clock ends after the last, caught-up wait)
    assert recovered["failing_seconds"] == round(clock.now - 0.1 - 0.5, 1)


def test_a_failing_policys_rows_start_and_end_with_the_failure(policy: Policy,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    script: list[tuple[object, float]] = [(applied(7, 8), 0.5), (applied(8, 9), 0.5)]
    script += [(ConnectionRefusedError("source down"), 30.0)] * 5  # hung calls that time out, 30 s each
    script += [(applied(9, 12), 1.0), (None, 0.01)]
    _, _, rows, _, _ = follow(policy, script, monkeypatch, execution_window=600.0)
    shape = [(r.status, r.batches, r.from_event, r.to_event) for r in rows.rows]
    # the good batches' row ends where the failure starts; the first failed batch is written at once; the
    # others of the run make one row; the batch that recovers is written at once
    assert shape == [(SUCCEEDED, 2, 7, 9), (FAILED, 1, 9, 9), (FAILED, 4, 9, 9), (SUCCEEDED, 1, 9, 12)]
    assert rows.rows[1].started_at == iso_ms(EPOCH + 1.0) and rows.rows[1].error == "ConnectionRefusedError: " \
        "source down"
    assert from_rows([row_dict(r) for r in rows.rows]) == Verdict(False, "waggle_sys.replication_metrics")
    failing = from_rows([row_dict(r) for r in rows.rows[:3]])
    assert failing == Verdict(True, "waggle_sys.replication_metrics", iso_ms(EPOCH + 1.0),
                              "ConnectionRefusedError: source down", 5, rows.rows[2].ended_at)


def test_a_policy_that_recovers_by_finding_its_source_caught_up_writes_a_row_of_no_batch(
        policy: Policy, monkeypatch: pytest.MonkeyPatch) -> None:
    script: list[tuple[object, float]] = [(ConnectionRefusedError("down"), 0.01)] * 2 + [(None, 0.01)]
    _, _, rows, lines, _ = follow(policy, script, monkeypatch)
    assert [(r.status, r.batches) for r in rows.rows] == [(FAILED, 1), (FAILED, 1), (SUCCEEDED, 0)]
    assert (rows.rows[-1].from_event, rows.rows[-1].to_event) == (7, 7)
    assert lines.events() == [STARTED, RECOVERED]
    assert from_rows([row_dict(r) for r in rows.rows]).failing is False  # type: ignore[union-attr]


def row_dict(row: ExecutionRow) -> dict[str, str | None]:
    """A row as ``--status`` reads it back from the table."""
    return {name: None if v is None else str(v) for (name, _), v in zip(COLUMNS, row.values(), strict=True)}


def test_a_scheduled_run_that_fails_after_good_batches_writes_the_failure_as_its_own_row(
        policy: Policy, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr(service_module, "log", Lines())
    rows = Rows()
    thread = PolicyThread(policy, None, rows, 1.0, 60.0, clock=clock, wall=clock.wall)  # type: ignore[arg-type]
    thread.follower = ScriptedFollower(clock, [(applied(7, 8), 1.0), (TimeoutError("hung"), 30.0),
                                               (None, 0.0)], threading.Event())
    written = thread.run_once("every")
    assert [(r.status, r.batches) for r in written] == [(SUCCEEDED, 1), (FAILED, 1)] == \
        [(r.status, r.batches) for r in rows.rows]
    assert from_rows([row_dict(r) for r in rows.rows]).failing is True  # type: ignore[union-attr]


# -- /healthz and --status -----------------------------------------------------------------------------------------
def test_healthz_says_failing_since_when_and_livez_stays_ok(tmp_path: Path) -> None:
    path = tmp_path / "sync.yml"
    path.write_text("federation-config: fed.yml\nsource: analytics\nhttp-port: 0\njobs:\n"
                    "  - {name: p, tables: 's.*', follow: true}\n")
    gate = threading.Event()

    class Down:
        def step(self, stop: threading.Event) -> Execution | None:
            gate.wait(5)
            raise ConnectionRefusedError("source down")

        def state(self) -> PolicyState:
            return PolicyState("p", "analytics", 7, None, None, None)

        def close(self) -> None:
            pass

    svc = Service(load_policies(str(path)), lambda p, s: Down(), Rows(), FairBudget("primary", 0)).start()
    metrics = SyncMetrics()
    metrics.failing_seconds = svc.failing_seconds
    http = HttpServer(Api(svc.health, svc.run_now, metrics, svc.alive), 0, "127.0.0.1").start()
    try:
        live = live_health(http.port)
        assert live is not None and live["p"]["failing"] is False
        gate.set()
        live = wait_for(lambda: (got := live_health(http.port)) and got["p"]["failing"] and got, timeout=5)
        entry = live["p"]
        assert entry["error"] == "ConnectionRefusedError: source down" and entry["failing_since"].endswith("Z")
        verdict = from_live(entry, http.port)
        assert verdict.failing and verdict.since == entry["failing_since"] and verdict.error == entry["error"]
        assert verdict.said_by == f"the running follower, port {http.port}"
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(f"http://127.0.0.1:{http.port}/healthz", timeout=5)
        assert err.value.code == 503
        with urllib.request.urlopen(f"http://127.0.0.1:{http.port}/livez", timeout=5) as r:
            assert r.status == 200

        def failing_seconds() -> float:
            with urllib.request.urlopen(f"http://127.0.0.1:{http.port}/metrics", timeout=5) as r:
                scraped = r.read().decode()
            found = re.search(r'^waggle_sync_failing_seconds\{policy="p"\} ([0-9.]+)$', scraped, re.M)
            assert found, scraped
            return float(found.group(1))

        wait_for(lambda: failing_seconds() >= 0.1, timeout=5, message="waggle_sync_failing_seconds growing")
    finally:
        http.stop()
        svc.stop()
    assert live_health(http.port) is None  # nobody answers: --status reads the rows


def test_status_prints_a_failing_policy_and_counts_it_for_exit_code_2(policy: Policy) -> None:
    failing = Verdict(True, "the running follower, port 9184", "2026-01-01T00:00:00.500Z", HUNG, 12,
                      "2026-01-01T00:02:00.000Z")
    out = io.StringIO()
    bad = _print_policy(out, policy, {"waggle.sync.policy.p.checkpoint": "7"}, _Reach(None, "source 'analytics' "
                        f"unreachable: {HUNG}"), [], failing)
    text = out.getvalue()
    assert bad == 1
    assert f"  state: failing since 2026-01-01T00:00:00.500Z, 12 failed batch(es), the last at " \
           f"2026-01-01T00:02:00.000Z: {HUNG} (says the running follower, port 9184)" in text
    assert f"  source: source 'analytics' unreachable: {HUNG}" in text
    out = io.StringIO()
    good = _print_policy(out, policy, {}, _Reach(None, "x"), [], Verdict(False, "waggle_sys.replication_metrics"))
    assert good == 0 and "  state: ok (says waggle_sys.replication_metrics)" in out.getvalue()
    out = io.StringIO()
    assert _print_policy(out, policy, {}, _Reach(None, "x"), [], None) == 0
    assert "  state: not run yet" in out.getvalue()


def test_status_names_an_execution_without_batches_as_such(policy: Policy) -> None:
    # a follower that was failing and is caught up again writes an execution with no batch: its phase is null
    row: dict[str, str | None] = {"status": "succeeded", "trigger": "follow", "phase": None,
                                  "started_at": "2026-01-01T00:00:00Z", "ended_at": "2026-01-01T00:00:00Z",
                                  "from_event": "5", "to_event": "5", "objects": "0", "partitions": "0"}
    out = io.StringIO()
    _print_policy(out, policy, {}, _Reach(None, "x"), [row], Verdict(False, "waggle_sys.replication_metrics"))
    assert "  last execution: succeeded (follow, no batch) 2026-01-01T00:00:00Z" in out.getvalue(), out.getvalue()


# -- calls have timeouts ---------------------------------------------------------------------------------------------
def test_a_call_to_a_metastore_that_never_answers_fails_in_its_time_naming_the_metastore_and_the_call() -> None:
    assert (FOLLOW_CALL_SECONDS, FOLLOW_BULK_SECONDS) == (30.0, 120.0)
    assert call_timeout(plain_member("h", 1), FOLLOW_CALL_SECONDS) == 30.0  # read-timeout's default: 600 s
    assert call_timeout(plain_member("h", 1, read_timeout_ms=2000, latency_ms=500), 30.0) == 2.5
    hole = BlackHole()  # accepts, reads, never answers: a metastore whose JVM is stopped
    try:
        member = plain_member("127.0.0.1", hole.port, name="hung")
        with follow_connections(member, 2, call=0.3, bulk=1.0) as (reader, other):
            started = time.monotonic()
            with pytest.raises(MetastoreUnavailable) as err:
                reader.current_event_id()
            assert 0.25 < time.monotonic() - started < 0.9
            said = "metastore 'hung' did not answer get_current_notificationEventId within 0.3s"
            assert str(err.value) == said
            assert reader.broken == "did not answer get_current_notificationEventId within 0.3s"
            with pytest.raises(MetastoreUnavailable, match="connection closed after: did not answer"):
                reader.client.get_table("d", "t")  # at once: a late reply is never read as this one's
            with pytest.raises(MetastoreUnavailable, match="did not answer get_current_notificationEventId"):
                reader.check()
            other.check()  # the other connection is intact
            started = time.monotonic()
            with pytest.raises(MetastoreUnavailable, match="did not answer get_partition_names within 1s"):
                other.partition_names("d", "t")  # a bulk call has longer
            assert time.monotonic() - started > 0.9
    finally:
        hole.close()
