"""The service's scheduling with fake followers: reconciling edited sync files, continuous and scheduled loops,
run-now, rows per execution window, health, and a graceful stop."""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path

import pytest

from tests.support.waits import wait_for
from waggle.sync.budget import FairBudget, Share
from waggle.sync.execution import BOOTSTRAP, FAILED, INCREMENTAL, PARTIAL, Execution, PolicyState
from waggle.sync.metrics_table import COLUMNS, ExecutionRow, escape, line, table_definition
from waggle.sync.policies import Policy, load_policies
from waggle.sync.service import Service, plan_changes

HEAD = "federation-config: fed.yml\nsource: analytics\nhttp-port: 0\npoll-interval-max: 0.2\n"


class FakeFollower:
    """Batches from a script (an Execution, or an exception to raise), then caught up (None)."""

    def __init__(self, policy: Policy, script: list[Execution | Exception] | None = None) -> None:
        self.policy = policy
        self.script = list(script or [])
        self.steps = 0
        self.closed = False
        self.checkpoint = 0
        self.in_step = threading.Event()
        self.release = threading.Event()
        self.release.set()

    def step(self, stop: threading.Event) -> Execution | None:
        self.steps += 1
        self.in_step.set()
        self.release.wait(5)
        self.in_step.clear()
        if not self.script:
            return None
        item = self.script.pop(0)
        if isinstance(item, Exception):
            raise item
        self.checkpoint = item.to_event
        return item

    def state(self) -> PolicyState:
        return PolicyState(self.policy.name, self.policy.spec.source, self.checkpoint, 100, 100 - self.checkpoint,
                           None)

    def close(self) -> None:
        self.closed = True


class FakeObserver:
    def __init__(self) -> None:
        self.batches: list[tuple[str, Execution]] = []
        self.rows: list[ExecutionRow] = []
        self.states: list[PolicyState] = []

    def batch(self, policy: Policy, execution: Execution) -> None:
        self.batches.append((policy.name, execution))

    def row(self, policy: Policy, row: ExecutionRow) -> None:
        self.rows.append(row)

    def state(self, policy: Policy, state: PolicyState) -> None:
        self.states.append(state)


class FakeFactory:
    def __init__(self, scripts: dict[str, list[Execution | Exception]] | None = None) -> None:
        self.scripts = scripts or {}
        self.made: list[FakeFollower] = []

    def __call__(self, policy: Policy, share: Share) -> FakeFollower:
        follower = FakeFollower(policy, self.scripts.pop(policy.name, []))
        self.made.append(follower)
        return follower

    def of(self, name: str) -> list[FakeFollower]:
        return [f for f in self.made if f.policy.name == name]


def batch(policy: str, start: int, end: int, phase: str = INCREMENTAL, **kw: object) -> Execution:
    return Execution(policy, phase, start, end, started_at="2026-01-01T00:00:00Z", **kw)  # type: ignore[arg-type]


def write(path: Path, jobs: str) -> str:
    path.write_text(HEAD + "jobs:\n" + jobs)
    return str(path)


@pytest.fixture
def sync_file(tmp_path: Path) -> Path:
    return tmp_path / "sync.yml"


def policies(path: str) -> tuple[Policy, ...]:
    return load_policies(path).policies


def test_plan_changes(sync_file):
    before = {p.name: p for p in policies(write(sync_file, "  - {name: a, tables: 's.*', follow: true}\n"
                                                        "  - {name: b, tables: 't.*', every: 1h}\n"
                                                        "  - {name: c, tables: 'u.*', follow: true}\n"))}
    after = policies(write(sync_file, "  - {name: a, tables: 's.*', follow: true}\n"  # unchanged
                                      "  - {name: b, tables: 't.*', every: 2h}\n"  # changed
                                      "  - {name: c, tables: 'u.*', follow: true, enabled: false}\n"  # disabled
                                      "  - {name: d, tables: 'v.*', follow: true}\n"))  # new
    changes = plan_changes(before, after)
    assert [p.name for p in changes.start] == ["d"]
    assert changes.stop == ("c",)
    assert [p.name for p in changes.restart] == ["b"] and changes.restart[0].every == 7200
    assert not plan_changes({p.name: p for p in after if p.enabled}, after)


def service(sync_file: Path, factory: FakeFactory, observer: FakeObserver | None = None) -> Service:
    return Service(load_policies(str(sync_file)), factory, observer or FakeObserver(), FairBudget("primary", 0))


def edit(svc: Service, path: Path, jobs: str) -> None:
    previous = path.stat().st_mtime_ns
    write(path, jobs)
    os.utime(path, ns=(previous + 1_000_000_000, previous + 1_000_000_000))  # an edit within the same tick shows


def test_file_edits_add_disable_reenable_change_and_remove_policies(sync_file):
    write(sync_file, "  - {name: a, tables: 's.*', follow: true}\n")
    factory = FakeFactory()
    svc = service(sync_file, factory).start()
    try:
        assert set(svc.threads) == {"a"}
        assert svc.check_file() is None  # no edit: nothing read

        edit(svc, sync_file, "  - {name: a, tables: 's.*', follow: true}\n  - {name: b, tables: 't.*', every: 1h}\n")
        changes = svc.check_file()
        assert changes is not None and [p.name for p in changes.start] == ["b"]
        assert set(svc.threads) == {"a", "b"}

        first_a = svc.threads["a"]
        edit(svc, sync_file, "  - {name: a, tables: 's.*', follow: true, enabled: false}\n"
                             "  - {name: b, tables: 't.*', every: 1h}\n")
        svc.check_file()
        assert set(svc.threads) == {"b"} and not first_a.thread.is_alive()
        assert factory.of("a")[0].closed

        edit(svc, sync_file, "  - {name: a, tables: 's.*', follow: true}\n  - {name: b, tables: 't.*', every: 1h}\n")
        svc.check_file()
        assert set(svc.threads) == {"a", "b"} and len(factory.of("a")) == 2  # resumed: a new follower, same name

        old_b = svc.threads["b"]
        edit(svc, sync_file, "  - {name: a, tables: 's.*', follow: true}\n  - {name: b, tables: 't.*', every: 2h}\n")
        svc.check_file()
        assert svc.threads["b"] is not old_b and svc.threads["b"].policy.every == 7200

        edit(svc, sync_file, "  - {name: b, tables: 't.*', every: 2h}\n")
        svc.check_file()
        assert set(svc.threads) == {"b"}
    finally:
        svc.stop()
    assert all(f.closed for f in factory.made)


def test_a_bad_edit_changes_nothing_and_is_logged(sync_file, capsys):
    write(sync_file, "  - {name: a, tables: 's.*', follow: true}\n")
    svc = service(sync_file, FakeFactory()).start()
    try:
        running = svc.threads["a"]
        edit(svc, sync_file, "  - {name: a, tables: 's.*', every: often}\n")
        assert svc.check_file() is None
        assert svc.threads["a"] is running and running.thread.is_alive()
    finally:
        svc.stop()
    said = capsys.readouterr()
    assert "key 'jobs[0].every': invalid value 'often'" in said.out + said.err


def test_a_removed_policy_finishes_its_batch_in_hand(sync_file):
    write(sync_file, "  - {name: a, tables: 's.*', follow: true}\n")
    factory = FakeFactory({"a": [batch("a", 0, 5)]})
    observer = FakeObserver()
    svc = service(sync_file, factory, observer).start()
    follower = factory.of("a")[0]
    follower.release.clear()
    try:
        assert follower.in_step.wait(5)
        edit(svc, sync_file, "  - {name: b, tables: 't.*', follow: true}\n")
        done = threading.Thread(target=svc.check_file)
        done.start()
        done.join(0.3)
        assert done.is_alive()  # waiting for a's batch in hand
        follower.release.set()
        done.join(5)
        assert not done.is_alive() and set(svc.threads) == {"b"}
    finally:
        svc.stop()
    assert [e.to_event for n, e in observer.batches if n == "a"] == [5]
    assert [r.to_event for r in observer.rows if r.policy == "a"] == [5]  # the window's row is written at the stop


def test_continuous_policy_applies_batches_then_idles_and_rows_cover_windows(sync_file):
    sync_file.write_text(HEAD + "execution-window: 1s\njobs:\n  - {name: a, tables: 's.*', follow: true}\n")
    script: list[Execution | Exception] = [
        batch("a", 0, 0, BOOTSTRAP, objects=3, bootstrap_reason="first run"),
        batch("a", 0, 10, events={("ADD_PARTITION", "applied"): 4, ("INSERT", "skipped"): 2}, partitions=4),
        batch("a", 10, 20, status=PARTIAL, error="line one\nline\ttwo", failed_tables={"d.t": "boom"}),
    ]
    factory = FakeFactory({"a": script})
    observer = FakeObserver()
    svc = service(sync_file, factory, observer).start()
    try:
        wait_for(lambda: len(observer.batches) == 3, timeout=5)
        wait_for(lambda: len(observer.rows) == 1, timeout=5)  # the one-second window closes
        steps = factory.of("a")[0].steps
        wait_for(lambda: factory.of("a")[0].steps >= steps + 2, timeout=5)  # caught up: it polls again
    finally:
        svc.stop()
    row = observer.rows[0]
    assert (row.policy, row.trigger, row.batches, row.from_event, row.to_event) == ("a", "follow", 3, 0, 20)
    assert (row.phases, row.status, row.objects, row.partitions) == (["bootstrap", "incremental"], "partial", 3, 4)
    assert (row.applied, row.skipped, row.bootstrap_reason) == (4, 2, "first run")
    assert row.failed_tables == {"d.t": "boom"} and row.error == "line one\nline\ttwo"
    assert len(observer.rows) == 1  # idle windows write no rows
    assert svc.budget.share("a").stats().weight == 3  # the bootstrap counted three tables


def test_scheduled_policy_runs_at_once_then_on_run_now(sync_file):
    write(sync_file, "  - {name: s, tables: 's.*', every: 1h}\n")
    factory = FakeFactory({"s": [batch("s", 0, 5), batch("s", 5, 9), batch("s", 9, 12)]})
    observer = FakeObserver()
    svc = service(sync_file, factory, observer).start()
    try:
        wait_for(lambda: len(observer.rows) == 1, timeout=5)
        assert (observer.rows[0].trigger, observer.rows[0].batches, observer.rows[0].to_event) == ("every", 3, 12)
        wait_for(lambda: svc.threads["s"].health.phase == "waiting", timeout=5)
        assert svc.run_now("s") is None
        wait_for(lambda: len(observer.rows) == 2, timeout=5)
        assert (observer.rows[1].trigger, observer.rows[1].batches, observer.rows[1].to_event) == ("run-now", 0, 12)
        assert svc.run_now("nope") == f"no policy 'nope' in {sync_file}"
    finally:
        svc.stop()


def test_a_failing_policy_makes_health_fail_at_its_first_failed_batch(sync_file):
    write(sync_file, "  - {name: a, tables: 's.*', follow: true}\n  - {name: ok, tables: 't.*', follow: true}\n")
    factory = FakeFactory({"a": [ConnectionRefusedError("source down")] * 50})
    observer = FakeObserver()
    svc = service(sync_file, factory, observer).start()
    try:
        wait_for(lambda: not svc.health()[0], timeout=5)
        _, body = svc.health()
        assert body["status"] == "failing" and body["failing"] == ["a"] and body["dead"] == []
        a = next(p for p in body["policies"] if p["policy"] == "a")  # type: ignore[attr-defined]
        assert a["last_status"] == "failed" and a["last_error"] == "ConnectionRefusedError: source down"
        assert a["failing"] is True and a["error"] == "ConnectionRefusedError: source down"
        assert a["failing_since"].endswith("Z") and a["failed_batches"] >= 1
        ok = next(p for p in body["policies"] if p["policy"] == "ok")  # type: ignore[attr-defined]
        assert ok["failing"] is False and ok["failing_since"] is None
        assert svc.alive() == (True, {"status": "ok", "dead": []})  # /livez: a restart would not mend a source
    finally:
        svc.stop()
    assert observer.batches[0][1].status == FAILED


def test_stop_waits_for_every_batch_in_hand(sync_file):
    write(sync_file, "  - {name: a, tables: 's.*', follow: true}\n")
    factory = FakeFactory({"a": [batch("a", 0, 1)]})
    svc = service(sync_file, factory).start()
    follower = factory.of("a")[0]
    follower.release.clear()
    assert follower.in_step.wait(5)
    stopper = threading.Thread(target=svc.stop)
    stopper.start()
    stopper.join(0.3)
    assert stopper.is_alive()
    follower.release.set()
    stopper.join(5)
    assert not stopper.is_alive() and follower.closed and follower.checkpoint == 1
    ok, body = svc.health()
    assert not ok and body["status"] == "failing"


def test_metrics_rows_escape_what_lazy_simple_serde_reads():
    row = ExecutionRow("p", "follow", "analytics", execution_id="x")
    row.add(batch("p", 1, 2, status=FAILED, error="a\tb\nc\\d\re"), "2026-01-01T00:00:01Z")
    text = line(row.values())
    assert text.endswith("\n") and text.count("\n") == 1  # one line, whatever the error holds
    fields = text[:-1].split("\t")
    # an escaped tab is the escape character then the tab: split on unescaped tabs only
    assert len([f for f in re.split(r"(?<!\\)\t", text[:-1])]) == len(COLUMNS)
    assert fields[0] == "p" and "a\\\tb\\nc\\\\d\\re" in text
    assert escape(None) == "\\N" and escape("\\N") == "\\\\N"


def test_the_metrics_table_is_external_text_with_lazy_simple_serde():
    table = table_definition("file:/w/waggle_sys.db/replication_metrics")
    assert (table.dbName, table.tableName, table.tableType) == ("waggle_sys", "replication_metrics", "EXTERNAL_TABLE")
    assert [c.name for c in table.sd.cols] == [name for name, _ in COLUMNS]
    assert table.sd.serdeInfo.parameters["escape.delim"] == "\\"
    assert table.sd.serdeInfo.parameters["serialization.escape.crlf"] == "true"


def test_http_answers_healthz_metrics_and_run_now(sync_file):
    import json
    import urllib.error
    import urllib.request

    from waggle.sync.http import Api, HttpServer, SyncMetrics

    write(sync_file, "  - {name: s, tables: 's.*', every: 1h}\n")
    factory = FakeFactory({"s": [batch("s", 0, 4, BOOTSTRAP, objects=2, bootstrap_reason="gap: events 1-3 purged",
                                       events={("CREATE_TABLE", "applied"): 2})]})
    metrics = SyncMetrics(svc_budget := FairBudget("primary", 0))

    class Both(FakeObserver):
        def batch(self, policy: Policy, execution: Execution) -> None:
            metrics.batch(policy, execution)

        def state(self, policy: Policy, state: PolicyState) -> None:
            metrics.state(policy, state)

        def row(self, policy: Policy, row: ExecutionRow) -> None:
            super().row(policy, row)
            metrics.row(policy, row)

    observer = Both()
    svc = Service(load_policies(str(sync_file)), factory, observer, svc_budget).start()
    http = HttpServer(Api(svc.health, svc.run_now, metrics), 0, "127.0.0.1").start()
    base = f"http://127.0.0.1:{http.port}"
    try:
        wait_for(lambda: len(observer.rows) == 1, timeout=5)
        with urllib.request.urlopen(f"{base}/healthz") as r:
            body = json.loads(r.read())
            assert r.status == 200 and body["status"] == "ok"
            assert body["policies"][0]["policy"] == "s" and body["policies"][0]["checkpoint"] == 4
        with urllib.request.urlopen(f"{base}/metrics") as r:
            text = r.read().decode()
        assert 'waggle_sync_checkpoint{policy="s",source="analytics"} 4.0' in text
        assert 'waggle_sync_events_total{outcome="applied",policy="s",type="CREATE_TABLE"} 2.0' in text
        assert 'waggle_sync_bootstraps_total{policy="s",reason="gap"} 1.0' in text
        assert 'waggle_sync_executions_total{policy="s",status="succeeded"} 1.0' in text
        assert 'waggle_sync_lag_events{policy="s",source="analytics"} 96.0' in text
        assert 'waggle_sync_share_weight{policy="s"} 2.0' in text  # the bootstrap's two tables
        post = urllib.request.Request(f"{base}/policies/s/run", method="POST", data=b"")
        with urllib.request.urlopen(post) as r:
            assert r.status == 202 and json.loads(r.read()) == {"policy": "s", "status": "started"}
        wait_for(lambda: len(observer.rows) == 2 and observer.rows[1].trigger == "run-now", timeout=5)
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(urllib.request.Request(f"{base}/policies/nope/run", method="POST", data=b""))
        assert err.value.code == 404 and "no policy 'nope'" in json.loads(err.value.read())["error"]
    finally:
        http.stop()
        svc.stop()


def test_a_policy_whose_follower_cannot_be_made_is_tried_again(sync_file):
    write(sync_file, "  - {name: a, tables: 's.*', follow: true}\n")
    attempts: list[str] = []
    fakes = FakeFactory()

    def flaky(policy: Policy, share: Share) -> FakeFollower:
        attempts.append(policy.name)
        if len(attempts) == 1:
            raise ConnectionRefusedError("primary down")
        return fakes(policy, share)

    svc = Service(load_policies(str(sync_file)), flaky, FakeObserver(), FairBudget("primary", 0)).start()
    try:
        assert svc.threads == {}
        assert svc.revive() == ["a"] and set(svc.threads) == {"a"}
        assert svc.revive() == []  # running: nothing to do
    finally:
        svc.stop()


SIGTERM_SCRIPT = """
import sys, threading, time
from waggle.sync import service_main
from waggle.sync.execution import Execution, PolicyState

class FakeFollower:
    def __init__(self, policy):
        self.policy, self.done = policy, 0
    def step(self, stop):
        if self.done >= 1:
            return None
        print("in-batch", flush=True)
        time.sleep(1.0)  # the batch in hand: SIGTERM arrives meanwhile
        self.done += 1
        print("batch-done", flush=True)
        return Execution(self.policy.name, "incremental", 0, 1, started_at="2026-01-01T00:00:00Z")
    def state(self):
        return PolicyState(self.policy.name, "analytics", self.done, 1, 1 - self.done, None)
    def close(self):
        print("closed", flush=True)

service_main.follower_factory = lambda *a: (lambda policy, share: FakeFollower(policy))
service_main.TableRows.ensure = lambda self: sys.argv[2]
import argparse
sys.exit(service_main.main_follow(argparse.Namespace(config=sys.argv[1], federation_config=None,
    server_config=None, principal=None, keytab=None, master=None, max_writes_per_second=None)))
"""


def test_sigterm_finishes_the_batch_in_hand_then_exits_0(tmp_path):
    import signal
    import subprocess
    import sys

    (tmp_path / "fed.yml").write_text("primary-meta-store:\n  name: primary\n  remote-meta-store-uris: "
                                      "thrift://127.0.0.1:1\nfederated-meta-stores:\n- name: analytics\n"
                                      "  remote-meta-store-uris: thrift://127.0.0.1:2\n")
    sync = tmp_path / "sync.yml"
    sync.write_text(HEAD + "jobs:\n  - {name: a, tables: 's.*', follow: true}\n")
    rows = tmp_path / "rows"
    proc = subprocess.Popen([sys.executable, "-c", SIGTERM_SCRIPT, str(sync), f"file://{rows}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=Path(__file__).resolve().parents[3])
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "in-batch"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert out.split() == ["batch-done", "closed"]
    assert "sync.service_stopped" in err
    assert len(list(rows.iterdir())) == 1  # the window's row, written at the stop
