"""``waggle sync`` against two real metastores: the analytics member is the source, the primary the target.

The primary is reached through a recording stub (``HiveStubMetastore``, a thin proxy over the real primary), so a
test can assert which calls a run made: a no-op rerun makes no write at all.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.support.env import ROOT, java_available, require
from tests.support.federation import federation_yaml
from tests.support.hive_stubs import HiveStubMetastore
from waggle.hms.methods import METHODS, Access
from waggle.local.client import hms_client
from waggle.local.seed import ensure_database, ensure_partitioned_table, ensure_table, ensure_view

pytestmark = pytest.mark.integration
HERE = Path(__file__).resolve().parent
SRC = "syncsrc"
PARTITIONS = 2000
SMALL = 40
WRITES = {name for name, spec in METHODS.items() if spec.access in (Access.WRITE, Access.CREATE_DATABASE)}


@dataclass
class SyncEnv:
    work: Path
    federation: Path
    recorder: HiveStubMetastore  # in front of the primary
    analytics: Any
    primary: Any
    events_location: str

    def sync(self, *args: str, timeout: float = 600, federation: Path | None = None, sync_file: Path | None = None
             ) -> tuple[int, dict[str, Any], str]:
        """``waggle sync`` with these arguments, or with a sync file (which names its own federation file):
        (exit code, the JSON report, stdout and stderr)."""
        report = self.work / f"report-{uuid.uuid4().hex[:6]}.json"
        given = ("--config", str(sync_file)) if sync_file else ("--federation-config",
                                                                 str(federation or self.federation))
        run = subprocess.run([sys.executable, "-m", "waggle", "sync", *given, "--report", str(report), *args],
                             capture_output=True, text=True, timeout=timeout, cwd=ROOT)
        data = json.loads(report.read_text()) if report.exists() else {}
        return run.returncode, data, run.stdout + run.stderr

    def calls(self) -> list[str]:
        return [c.method for c in self.recorder.calls]

    def writes(self) -> list[str]:
        """The writes a run made to tables, partitions and databases (its own records in waggle_sys aside)."""
        return [c.method for c in self.recorder.calls if c.method in WRITES and not _on_records(c.args)]

    def records(self) -> list[str]:
        """The writes a run made to its own records (waggle_sys: how fresh its copies are)."""
        return [c.method for c in self.recorder.calls if c.method in WRITES and _on_records(c.args)]


def _on_records(args: Any) -> bool:
    names = {getattr(args, "dbname", None), getattr(args, "name", None),
             getattr(getattr(args, "database", None), "name", None)}
    return "waggle_sys" in names


def table_report(report: dict[str, Any], target: str) -> dict[str, Any]:
    return next(t for t in report["tables"] if t["target"] == target)


@pytest.fixture(scope="module")
def env(primary: Any, analytics: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SyncEnv]:
    work = tmp_path_factory.mktemp("sync")
    wh = f"file://{analytics.warehouse}/{SRC}.db"
    with hms_client("127.0.0.1", analytics.port, timeout=300) as c:
        ensure_database(c, SRC, wh)
        ensure_partitioned_table(c, SRC, "events", f"{wh}/events", PARTITIONS, batch=500, data=True)
        ensure_partitioned_table(c, SRC, "daily", f"{wh}/daily", SMALL, data=True)  # for Spark to read
        ensure_table(c, SRC, "people", f"{wh}/people", [("id", "int"), ("name", "string")],
                     rows=["1,ann", "2,bob"])
        ensure_view(c, SRC, "people_view", [("id", "int"), ("name", "string")],
                    f"SELECT * FROM {SRC}.people WHERE id > 1",
                    f"SELECT `people`.`id`, `people`.`name` FROM `{SRC}`.`people` WHERE `people`.`id` > 1")
        events_location = c.get_table(SRC, "events").sd.location  # as the metastore spells it
    recorder = HiveStubMetastore("127.0.0.1", primary.port, version="2.3.10").start()
    federation = work / "federation.yml"
    federation.write_text(federation_yaml(recorder.uri, "federated-meta-stores:\n- name: analytics\n"
                                                        f"  remote-meta-store-uris: {analytics.uri}\n"))
    yield SyncEnv(work, federation, recorder, analytics, primary, events_location)
    recorder.stop()


def target_partitions(primary: Any, db: str, table: str) -> list[Any]:
    with hms_client("127.0.0.1", primary.port, timeout=300) as c:
        return list(c.get_partitions(db, table, -1))


# -- mirror ---------------------------------------------------------------------------------------------------
def test_mirror_then_a_rerun_that_writes_nothing(env: SyncEnv) -> None:
    code, report, out = env.sync("--source", "analytics", "--tables", f"{SRC}.events,{SRC}.people.*",
                                 "--target-database", "m1")
    assert code == 0, out
    events = table_report(report, "m1.events")
    assert (events["status"], events["table"], events["created"]) == ("ok", "created", PARTITIONS), events
    assert {t["target"] for t in report["tables"]} == {"m1.events", "m1.people", "m1.people_view"}
    assert "m1.events" in out and "created" in out  # the human-readable table
    with hms_client("127.0.0.1", env.primary.port) as c:
        table = c.get_table("m1", "events")
        view = c.get_table("m1", "people_view")
    assert table.tableType == "EXTERNAL_TABLE" and table.parameters["EXTERNAL"] == "TRUE"
    assert table.sd.location == env.events_location  # points at the source's data
    assert table.parameters["waggle.sync.source"] == "analytics"
    assert table.parameters["waggle.sync.source-object"] == f"{SRC}.events"
    assert table.parameters["waggle.sync.mode"] == "mirror"
    assert "`m1`.`people`" in view.viewExpandedText and SRC not in view.viewExpandedText
    parts = target_partitions(env.primary, "m1", "events")
    assert len(parts) == PARTITIONS
    p = next(p for p in parts if p.values == ["p000042"])
    assert p.sd.location == f"{env.events_location}/part=p000042"
    assert p.parameters["waggle.sync.source-object"] == f"{SRC}.events/part=p000042"
    assert len(p.parameters["waggle.sync.fingerprint"]) == 32 and "waggle.sync.synced-at" in p.parameters

    env.recorder.clear()
    code, report, out = env.sync("--source", "analytics", "--tables", f"{SRC}.events,{SRC}.people.*",
                                 "--target-database", "m1")
    assert code == 0, out
    assert {(t["table"], t["created"], t["updated"], t["dropped"]) for t in report["tables"]} == \
        {("unchanged", 0, 0, 0)}, report
    assert table_report(report, "m1.events")["unchanged"] == PARTITIONS
    assert env.writes() == [], env.writes()
    assert "get_partitions_by_names" not in env.calls()  # the combined fingerprint matched: never read
    # the rerun's one write: its coverage record, saying when these copies were last found in sync
    assert env.records() == ["alter_database"], env.records()
    with hms_client("127.0.0.1", env.primary.port) as c:
        params = c.get_database("waggle_sys").parameters
        marked = c.get_database("m1").parameters
    (record,) = [json.loads(v) for k, v in params.items() if k.startswith("waggle.sync.coverage.run-") and
                 f"{SRC}.events" in v]
    assert record["source"] == "analytics" and record["patterns"] == [f"{SRC}.events", f"{SRC}.people.*"]
    assert time.time() - 120 < record["at"] < time.time()
    assert marked["waggle.sync.source"] == "analytics"  # the proxy looks for copies in this database


def test_changed_new_and_deleted_source_partitions(env: SyncEnv) -> None:
    with hms_client("127.0.0.1", env.analytics.port) as c:
        _small_partitioned(c, "churn")
    args = ("--source", "analytics", "--tables", f"{SRC}.churn", "--target-database", "m2")
    code, report, out = env.sync(*args)
    assert code == 0 and table_report(report, "m2.churn")["created"] == 3, out
    with hms_client("127.0.0.1", env.analytics.port) as c:
        changed = c.get_partition(SRC, "churn", ["b"])
        changed.parameters["owner.note"] = "changed"
        changed.parameters["transient_lastDdlTime"] = "1"  # volatile, ignored by itself
        c.alter_partition(SRC, "churn", changed)
        c.add_partition(_partition(c, "churn", "d"))
        c.drop_partition(SRC, "churn", ["c"], False)
    code, report, out = env.sync(*args)
    r = table_report(report, "m2.churn")
    assert code == 0 and (r["created"], r["updated"], r["dropped"], r["kept"], r["unchanged"]) == (1, 1, 0, 1, 1), r
    names = sorted(p.values[0] for p in target_partitions(env.primary, "m2", "churn"))
    assert names == ["a", "b", "c", "d"]  # c is kept: deleted at the source, no --propagate-deletes
    code, report, out = env.sync(*args, "--propagate-deletes")
    r = table_report(report, "m2.churn")
    assert code == 0 and (r["created"], r["updated"], r["dropped"]) == (0, 0, 1), r
    parts = {p.values[0]: p for p in target_partitions(env.primary, "m2", "churn")}
    assert sorted(parts) == ["a", "b", "d"] and parts["b"].parameters["owner.note"] == "changed"
    env.recorder.clear()
    code, report, _ = env.sync(*args, "--propagate-deletes")
    assert table_report(report, "m2.churn")["table"] == "unchanged" and env.writes() == []


def _small_partitioned(c: Any, table: str) -> None:
    ensure_table(c, SRC, table, f"file:/tmp/{table}", [("id", "int")], [("k", "string")])
    c.add_partitions([_partition(c, table, v) for v in "abc"])


def _partition(c: Any, table: str, value: str) -> Any:
    from waggle.hms.gen.hive_metastore import ttypes
    from waggle.local.seed import text_sd

    return ttypes.Partition(values=[value], dbName=SRC, tableName=table,
                            sd=text_sd(f"file:/tmp/{table}/k={value}", [("id", "int")]), parameters={})


def test_a_table_the_sync_did_not_create_is_refused_and_others_go_on(env: SyncEnv) -> None:
    with hms_client("127.0.0.1", env.primary.port) as c:
        ensure_database(c, "m3", f"file://{env.work}/m3.db")
        ensure_table(c, "m3", "people", f"file://{env.work}/m3.db/people", [("id", "int")])
    code, report, out = env.sync("--source", "analytics", "--tables", f"{SRC}.people,{SRC}.people_view",
                                 "--target-database", "m3")
    assert code == 2, out
    people = table_report(report, "m3.people")
    assert people["status"] == "failed" and "was not created by waggle sync" in people["error"], people
    assert table_report(report, "m3.people_view")["status"] == "ok"
    assert "error: analytics:syncsrc.people -> m3.people: target table m3.people exists and was not created" in out


def test_dry_run_prints_the_plan_and_changes_nothing(env: SyncEnv) -> None:
    env.recorder.clear()
    code, report, out = env.sync("--source", "analytics", "--tables", f"{SRC}.events", "--target-database",
                                 "dry1", "--dry-run")
    assert code == 0, out
    events = table_report(report, "dry1.events")
    assert events["status"] == "planned" and events["created"] == PARTITIONS
    assert "plan: analytics:syncsrc.events -> dry1.events: create table" in out
    assert f"add {PARTITIONS} partition(s)" in out
    assert env.writes() == []
    with hms_client("127.0.0.1", env.primary.port) as c:
        assert "dry1" not in c.get_all_databases()


def test_switching_a_mirror_to_a_copy_needs_the_option(env: SyncEnv, tmp_path: Path) -> None:
    args = ("--source", "analytics", "--tables", f"{SRC}.people", "--target-database", "sw1")
    assert env.sync(*args)[0] == 0
    code, report, out = env.sync(*args, "--mode", "copy", "--location-root", f"file://{tmp_path}/copies")
    assert code == 2 and "needs --switch-mode" in table_report(report, "sw1.people")["error"], out
    code, report, out = env.sync(*args, "--mode", "copy", "--location-root", f"file://{tmp_path}/copies",
                                 "--switch-mode")
    assert code == 0 and table_report(report, "sw1.people")["table"] == "updated", out
    assert (tmp_path / "copies" / "people" / "data.csv").read_text() == "1,ann\n2,bob\n"


def test_a_write_limit_paces_the_run_and_the_report_shows_the_rate(env: SyncEnv) -> None:
    with hms_client("127.0.0.1", env.analytics.port) as c:
        _small_partitioned(c, "paced")
    env.recorder.clear()
    started = time.monotonic()
    code, report, out = env.sync("--source", "analytics", "--tables", f"{SRC}.paced,{SRC}.people",
                                 "--target-database", "rl1", "--max-writes-per-second", "2")
    seconds = time.monotonic() - started
    assert code == 0, out
    made = env.writes()  # what reached the metastore
    assert len(made) >= 5, made  # the database, two tables, the partitions, the fingerprint
    (writes,) = report["writes"]
    assert (writes["metastore"], writes["writes"], writes["limit_per_second"]) == ("primary", len(made), 2), writes
    assert seconds >= writes["seconds"] >= (len(made) - 1) / 2 * 0.99  # one write every half second
    assert writes["mean_per_second"] <= 2 and writes["peak_per_second"] <= 2, writes
    assert f"writes to primary: {len(made)} call(s)" in out and "(limit 2/s)" in out
    assert len(target_partitions(env.primary, "rl1", "paced")) == 3


# -- copy -----------------------------------------------------------------------------------------------------
def source_files(env: SyncEnv) -> dict[str, bytes]:
    root = Path(urlsplit(env.events_location).path)
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def copied_files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*")
            if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)}


def test_copy_then_a_rerun_that_copies_nothing_then_one_changed_file(env: SyncEnv, tmp_path: Path) -> None:
    require(java_available(), "Java 17 is needed for Spark")
    root = tmp_path / "copies"
    args = ("--source", "analytics", "--tables", f"{SRC}.events", "--target-database", "c1", "--mode", "copy",
            "--location-root", f"file://{root}", "--master", "local[2]")
    code, report, out = env.sync(*args)
    assert code == 0, out
    r = table_report(report, "c1.events")
    assert r["created"] == PARTITIONS and r["files"] == PARTITIONS and r["bytes"] > 0, r
    assert copied_files(root / "events") == source_files(env)
    parts = target_partitions(env.primary, "c1", "events")
    assert len(parts) == PARTITIONS
    assert all(urlsplit(p.sd.location).path == f"{root}/events/part={p.values[0]}" for p in parts)
    env.recorder.clear()
    code, report, out = env.sync(*args)
    r = table_report(report, "c1.events")
    assert code == 0 and (r["table"], r["bytes"], r["created"], r["updated"]) == ("unchanged", 0, 0, 0), r
    assert env.writes() == []
    changed = Path(urlsplit(env.events_location).path) / "part=p000007" / "data.csv"
    original = changed.read_text()
    try:
        changed.write_text("7,name7\n7,again\n")
        code, report, out = env.sync(*args)
        r = table_report(report, "c1.events")
        assert code == 0 and (r["updated"], r["files"], r["bytes"]) == (1, 1, len("7,name7\n7,again\n")), r
        assert (root / "events" / "part=p000007" / "data.csv").read_text() == "7,name7\n7,again\n"
    finally:
        changed.write_text(original)


def test_killed_mid_copy_then_a_rerun_leaves_a_consistent_target(env: SyncEnv, tmp_path: Path) -> None:
    require(java_available(), "Java 17 is needed for Spark")
    root = tmp_path / "copies"
    cmd = [sys.executable, "-m", "waggle", "sync", "--federation-config", str(env.federation), "--source",
           "analytics", "--tables", f"{SRC}.events", "--target-database", "k1", "--mode", "copy",
           "--location-root", f"file://{root}", "--master", "local[2]"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and len(list((root / "events").glob("part=*"))) < 200:
        assert proc.poll() is None, "the sync finished before it could be killed"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # the driver and its Spark JVM and workers
    proc.wait()
    copied = len(list((root / "events").glob("part=*")))
    assert 0 < copied < PARTITIONS, copied
    # metadata last: no partition points at data that is not there
    for p in target_partitions(env.primary, "k1", "events"):
        assert Path(urlsplit(p.sd.location).path).joinpath("data.csv").exists()
    code, _, out = env.sync(*cmd[6:])
    assert code == 0, out
    assert copied_files(root / "events") == source_files(env)
    assert not list((root / "events").glob(".waggle-*"))  # the crashed run's temporary directories are gone
    assert len(target_partitions(env.primary, "k1", "events")) == PARTITIONS


# -- reading the result ------------------------------------------------------------------------------------------
@pytest.mark.spark
def test_spark_reads_the_synced_tables_with_the_sources_rows(env: SyncEnv, tmp_path: Path) -> None:
    require(java_available(), "Java 17 is needed for Spark")
    root = tmp_path / "copies"
    for args in (("--target-database", "s1"), ("--target-database", "s2", "--mode", "copy", "--location-root",
                                                f"file://{root}", "--master", "local[2]")):
        code, _, out = env.sync("--source", "analytics", "--tables", f"{SRC}.daily,{SRC}.people.*", *args)
        assert code == 0, out
    queries = ["SELECT count(*), sum(id) FROM {db}.daily", "SELECT id, name FROM {db}.people ORDER BY id",
               "SELECT id, name FROM {db}.people_view ORDER BY id", "SELECT name FROM {db}.daily WHERE part='p000004'"]
    results = {}
    # one Spark session a metastore: the source's, and the primary's for both the mirror and the copy
    for names, uri, dbs in ((("source",), env.analytics.uri, (SRC,)),
                            (("mirror", "copy"), env.primary.uri, ("s1", "s2"))):
        run = subprocess.run([sys.executable, str(HERE / "spark_query.py"), uri, str(tmp_path / f"wh-{names[0]}"),
                              *(q.format(db=db) for db in dbs for q in queries)], capture_output=True, text=True,
                             timeout=600)
        assert run.returncode == 0, run.stderr[-3000:]
        rows = json.loads(next(line for line in run.stdout.splitlines() if line.startswith("RESULT "))[7:])
        for i, name in enumerate(names):
            results[name] = rows[i * len(queries):(i + 1) * len(queries)]
    assert results["source"] == [[[str(SMALL), str(SMALL * (SMALL - 1) // 2)]], [["1", "ann"], ["2", "bob"]],
                                 [["2", "bob"]], [["name4"]]], results
    assert results["mirror"] == results["source"] and results["copy"] == results["source"], results


# -- a sync file, spark-submit, incremental -------------------------------------------------------------------------
def test_a_sync_file_runs_many_jobs(env: SyncEnv, tmp_path: Path) -> None:
    sync_file = tmp_path / "sync.yml"
    sync_file.write_text(f"federation-config: {env.federation}\nsource: analytics\njobs:\n"
                         f"- tables: {SRC}.people, {SRC}.people_view\n  mode: mirror\n  target-database: f1\n"
                         f"- tables: {SRC}.events\n  target-database: f2\n  partition-filter: part < 'p000010'\n")
    code, report, out = env.sync(sync_file=sync_file)
    assert code == 0, out
    assert {t["target"] for t in report["tables"]} == {"f1.people", "f1.people_view", "f2.events"}
    assert table_report(report, "f2.events")["created"] == 10
    bad = tmp_path / "bad.yml"
    bad.write_text(f"federation-config: {env.federation}\nsource: analytics\njobs:\n- tables: nodot\n  mode: clone\n")
    code, _, out = env.sync(sync_file=bad, timeout=60)
    assert code == 1
    assert f"{bad}: key 'jobs[0].tables': invalid value 'nodot'" in out
    assert f"{bad}: key 'jobs[0].mode': invalid value 'clone': expected mirror or copy" in out


def test_runs_unchanged_under_spark_submit(env: SyncEnv, tmp_path: Path) -> None:
    require(java_available(), "Java 17 is needed for Spark")
    submit = Path(sys.executable).parent / "spark-submit"
    require(submit.exists(), "pyspark's spark-submit is needed")
    run = subprocess.run([str(submit), "--master", "local[2]", str(ROOT / "waggle" / "sync" / "__main__.py"),
                          "--federation-config", str(env.federation), "--source", "analytics", "--tables",
                          f"{SRC}.people", "--target-database", "ss1", "--mode", "copy", "--location-root",
                          f"file://{tmp_path}/copies"], capture_output=True, text=True, timeout=600, cwd=ROOT,
                         env=dict(os.environ, PYSPARK_PYTHON=sys.executable))  # a Python that has waggle
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    assert (tmp_path / "copies" / "people" / "data.csv").read_text() == "1,ann\n2,bob\n"


def test_incremental_skips_a_table_without_events_and_syncs_one_with_events(env: SyncEnv, tmp_path: Path) -> None:
    """The source writes notification events (waggle's listener, as hcatalog's DbNotificationListener does); a
    recorder in front of it shows which calls a run made."""
    stub = HiveStubMetastore("127.0.0.1", env.analytics.port, version="2.3.10-recorded").start()
    try:
        federation = tmp_path / "federation.yml"
        federation.write_text(env.federation.read_text().replace(env.analytics.uri, stub.uri))
        with hms_client("127.0.0.1", env.analytics.port) as c:
            _small_partitioned(c, "churn2")
            _small_partitioned(c, "churn3")

        def sync() -> dict[str, Any]:
            code, report, out = env.sync("--source", "analytics", "--tables", f"{SRC}.churn2", "--target-database",
                                         "inc1", "--incremental", federation=federation, timeout=300)
            assert code == 0, out
            return table_report(report, "inc1.churn2")

        assert sync()["created"] == 3
        with hms_client("127.0.0.1", env.analytics.port) as c:
            c.add_partition(_partition(c, "churn3", "d"))  # an event, for another table
        stub.clear()
        assert sync()["table"] == "unchanged"  # no event for this table: it is not even listed
        assert "get_partition_names" not in [c.method for c in stub.calls]
        with hms_client("127.0.0.1", env.analytics.port) as c:
            c.add_partition(_partition(c, "churn2", "d"))  # its ADD_PARTITION event
        r = sync()
        assert (r["created"], r["unchanged"]) == (1, 3), r
    finally:
        stub.stop()
