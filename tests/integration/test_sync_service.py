"""The sync service against real metastores: ``waggle_sys.replication_metrics`` read by Spark, ``--status`` from
the primary's records, and (with the follower) the service's HTTP port, run-now and hot edits of the sync file.

The analytics member is the source and the primary the target, as in ``test_sync.py``.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.support.federation import federation_yaml
from tests.support.waits import wait_for
from waggle.local.client import hms_client
from waggle.local.seed import ensure_database, ensure_table
from waggle.sync.execution import BOOTSTRAP, FAILED, INCREMENTAL, Execution
from waggle.sync.hms import Metastore
from waggle.sync.metrics_table import TABLE, ExecutionRow, write_rows
from waggle.sync.metrics_table import ensure_table as ensure_metrics_table
from waggle.sync.system import SYS_DB

pytestmark = pytest.mark.integration
NASTY = "boom:\tcolumn\nsecond line \\ with a backslash\r and \\N"


def namespace(config: Path, **extra: Any) -> argparse.Namespace:
    base: dict[str, Any] = {"config": str(config), "federation_config": None, "server_config": None,
                            "principal": None, "keytab": None, "master": None, "max_writes_per_second": None,
                            "run_now": None}
    return argparse.Namespace(**{**base, **extra})


@pytest.fixture
def work(primary: Any, analytics: Any, tmp_path: Path) -> Path:
    (tmp_path / "federation.yml").write_text(federation_yaml(
        primary.uri, f"federated-meta-stores:\n- name: analytics\n  remote-meta-store-uris: {analytics.uri}\n"))
    return tmp_path


def rows_for(policy: str, *executions: Execution, trigger: str = "every") -> list[ExecutionRow]:
    out = []
    for e in executions:
        row = ExecutionRow(policy, trigger, "analytics")
        row.add(e, "2026-01-01T00:00:02.000Z")
        out.append(row)
    return out


@pytest.mark.spark
def test_the_metrics_table_is_created_and_spark_reads_one_row_per_execution(primary: Any, spark: Any) -> None:
    policy = f"p_{uuid.uuid4().hex[:8]}"
    with hms_client("127.0.0.1", primary.port) as c:
        location = ensure_metrics_table(Metastore(c))
        assert ensure_metrics_table(Metastore(c)) == location  # made once
        table = c.get_table(SYS_DB, TABLE)
    assert table.tableType == "EXTERNAL_TABLE"
    first = Execution(policy, BOOTSTRAP, 0, 7, objects=3, partitions=12, bytes=0, seconds=1.5,
                      started_at="2026-01-01T00:00:00.000Z", bootstrap_reason="first run",
                      events={("CREATE_TABLE", "applied"): 3})
    second = Execution(policy, INCREMENTAL, 7, 9, status=FAILED, error=NASTY, seconds=0.25,
                       started_at="2026-01-01T00:01:00.000Z", failed_tables={"d.t": NASTY})
    for row in rows_for(policy, first, second):
        write_rows(location, [row])
    spark.catalog.refreshTable(f"{SYS_DB}.{TABLE}")
    got = spark.sql(f"SELECT * FROM {SYS_DB}.{TABLE} WHERE policy_name = '{policy}' ORDER BY started_at").collect()
    assert len(got) == 2
    a, b = (r.asDict() for r in got)
    assert (a["phase"], a["status"], a["from_event"], a["to_event"], a["objects"], a["partitions"]) == \
        ("bootstrap", "succeeded", 0, 7, 3, 12)
    assert (a["events_applied"], a["seconds"], a["bootstrap_reason"], a["error"], a["failed_tables"]) == \
        (3, 1.5, "first run", None, None)
    assert (b["phase"], b["status"], b["error"], b["lag_seconds"]) == ("incremental", "failed", NASTY, None)
    assert json.loads(b["failed_tables"]) == {"d.t": NASTY}
    assert spark.sql(f"SELECT count(*) AS n FROM {SYS_DB}.{TABLE} WHERE policy_name = '{policy}' "
                     "AND status = 'failed'").collect()[0].n == 1


def test_status_prints_checkpoint_lag_last_execution_and_failed_tables(primary: Any, analytics: Any,
                                                                       work: Path) -> None:
    policy = f"s_{uuid.uuid4().hex[:8]}"
    sync_file = work / "sync.yml"
    sync_file.write_text(f"federation-config: federation.yml\nsource: analytics\njobs:\n"
                         f"  - {{name: {policy}, tables: 'sales.*', every: 1h}}\n"
                         f"  - {{name: {policy}_new, tables: 'web.*', follow: true, enabled: false}}\n")
    with hms_client("127.0.0.1", analytics.port) as c:
        current = int(c.get_current_notificationEventId().eventId)
    checkpoint = max(current - 2, 0)
    with hms_client("127.0.0.1", primary.port) as c:
        location = ensure_metrics_table(Metastore(c))
        db = c.get_database(SYS_DB)
        db.parameters = {**(db.parameters or {}), f"waggle.sync.policy.{policy}.checkpoint": str(checkpoint),
                         f"waggle.sync.policy.{policy}.source": "analytics"}
        c.alter_database(SYS_DB, db)
    failed = Execution(policy, INCREMENTAL, checkpoint - 1, checkpoint, status="partial", error=None,
                       started_at="2099-01-01T00:00:00.000Z", failed_tables={"sales.orders": "no such table"})
    write_rows(location, rows_for(policy, failed))

    from waggle.sync.status import status

    out = io.StringIO()
    code = status(namespace(sync_file), out)
    text = out.getvalue()
    assert code == 2, text  # a failed table
    assert f"policy {policy} (every 3600s; source analytics: sales.*)" in text
    assert f"  checkpoint: {checkpoint}" in text
    assert f"  source event: {current}" in text
    assert f"  lag: {current - checkpoint} event(s)" in text
    assert "  last execution: partial (every, incremental)" in text
    assert "  failed table: sales.orders: no such table" in text
    assert f"policy {policy}_new (disabled;" in text and "checkpoint: none (not bootstrapped yet)" in text


def test_run_now_without_a_running_service_names_an_unknown_policy(work: Path, capsys: Any) -> None:
    sync_file = work / "sync.yml"
    sync_file.write_text("federation-config: federation.yml\nsource: analytics\nhttp-port: 0\njobs:\n"
                         "  - {name: known, tables: 'sales.*', every: 1h}\n")
    from waggle.sync.service_main import run_now

    assert run_now(namespace(sync_file, run_now="unknown")) == 1
    assert "no policy 'unknown'" in capsys.readouterr().err


# -- with the follower (waggle.sync.follow) ----------------------------------------------------------------------
def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@pytest.mark.spark
def test_service_http_run_now_and_hot_edits(primary: Any, analytics: Any, work: Path, spark: Any) -> None:
    """One service process over a real primary and source: /healthz, /metrics and run-now answer; an edit adds
    a policy, disables it (its thread stops, its checkpoint stays) and enables it again (it resumes from it)."""
    from waggle.sync.budget import FairBudget
    from waggle.sync.http import Api, HttpServer, SyncMetrics
    from waggle.sync.policies import load_policies
    from waggle.sync.runner import _LazySpark
    from waggle.sync.service import Service
    from waggle.sync.service_main import Observers, Setup, TableRows, follower_factory

    src = f"svc_{uuid.uuid4().hex[:6]}"
    wh = f"file://{analytics.warehouse}/{src}.db"
    with hms_client("127.0.0.1", analytics.port) as c:
        ensure_database(c, src, wh)
        ensure_table(c, src, "people", f"{wh}/people", [("id", "int"), ("name", "string")], rows=["1,ann"])
    sync_file = work / "sync.yml"
    head = (f"federation-config: federation.yml\nsource: analytics\nhttp-port: 0\npoll-interval-max: 1s\n"
            f"execution-window: 1s\njobs:\n  - {{name: {src}_a, tables: '{src}.*', target-database: {src}_a, "
            "every: 1h}\n")
    sync_file.write_text(head)
    args = namespace(sync_file)
    setup = Setup(args, io.StringIO())
    pf = setup.policies()
    config = setup.config(pf)
    credentials = setup.credentials(config)
    sync_spark = _LazySpark("local[1]")
    metrics = SyncMetrics()
    table = TableRows(config.federation.primary, credentials)
    service = Service(pf, follower_factory(pf, config, credentials, sync_spark), Observers(metrics, table),
                      FairBudget(config.federation.primary.name, 20)).start()
    http = HttpServer(Api(service.health, service.run_now, metrics), 0, "127.0.0.1").start()
    base = f"http://127.0.0.1:{http.port}"
    try:
        # the every policy runs at once: its bootstrap creates the target table
        wait_for(lambda: _target_exists(primary, f"{src}_a", "people"), timeout=120)
        code, body = _get(f"{base}/healthz")
        assert code == 200 and json.loads(body)["policies"][0]["policy"] == f"{src}_a", body
        wait_for(lambda: f'waggle_sync_executions_total{{policy="{src}_a"' in _get(f"{base}/metrics")[1],
                 timeout=60)
        runs = _rows(table, f"{src}_a")
        request = urllib.request.Request(f"{base}/policies/{src}_a/run", method="POST", data=b"")
        with urllib.request.urlopen(request, timeout=10) as r:
            assert r.status == 202
        wait_for(lambda: [r["trigger"] for r in _rows(table, f"{src}_a") if r not in runs][-1:] == ["run-now"],
                 timeout=60)  # the run the request made (the first run's row may land after `runs` was read)

        # add a continuous policy
        added = head + f"  - {{name: {src}_b, tables: '{src}.*', target-database: {src}_b, follow: true}}\n"
        _edit(sync_file, added)
        service.check_file()
        assert set(service.threads) == {f"{src}_a", f"{src}_b"}
        wait_for(lambda: _target_exists(primary, f"{src}_b", "people"), timeout=120)
        wait_for(lambda: _checkpoint(base, f"{src}_b") is not None, timeout=60)  # its bootstrap is done
        # disable it: it stops; a new table at the source is not followed meanwhile
        _edit(sync_file, added.replace("follow: true}", "follow: true, enabled: false}"))
        service.check_file()
        assert set(service.threads) == {f"{src}_a"}
        with hms_client("127.0.0.1", analytics.port) as c:
            ensure_table(c, src, "later", f"{wh}/later", [("id", "int")], rows=["1"])
        assert service.run_now(f"{src}_b") == f"policy '{src}_b' is disabled"
        # the new table was there to follow: the enabled policy, run now, reads it; the disabled one did not
        assert service.run_now(f"{src}_a") is None
        wait_for(lambda: _target_exists(primary, f"{src}_a", "later"), timeout=120)
        assert not _target_exists(primary, f"{src}_b", "later")
        # enable it again: it resumes from its checkpoint and catches up
        _edit(sync_file, added)
        service.check_file()
        assert f"{src}_b" in service.threads
        wait_for(lambda: _target_exists(primary, f"{src}_b", "later"), timeout=120)
        wait_for(lambda: _checkpoint(base, f"{src}_b") is not None, timeout=30)
    finally:
        http.stop()
        service.stop()
        sync_spark.stop()
    assert load_policies(str(sync_file)).policy(f"{src}_b") is not None
    # Spark finds one row per execution the follower recorded (the first run, the run-now, policy b's windows)
    spark.catalog.refreshTable("waggle_sys.replication_metrics")
    for policy in (f"{src}_a", f"{src}_b"):
        got = spark.sql("SELECT execution_id, trigger, status FROM waggle_sys.replication_metrics "
                        f"WHERE policy_name = '{policy}'").collect()
        assert sorted(r.execution_id for r in got) == sorted(r["execution_id"] for r in _rows(table, policy))
        assert got and {r.status for r in got} == {"succeeded"}
    assert "run-now" in {r.trigger for r in spark.sql("SELECT trigger FROM waggle_sys.replication_metrics "
                                                      f"WHERE policy_name = '{src}_a'").collect()}


def _checkpoint(base: str, policy: str) -> Any:
    """A policy's checkpoint, as the service's /healthz says it (None before its bootstrap is done)."""
    return next(p for p in json.loads(_get(f"{base}/healthz")[1])["policies"] if p["policy"] == policy)["checkpoint"]


def _edit(path: Path, text: str) -> None:
    before = path.stat().st_mtime_ns
    path.write_text(text)
    os.utime(path, ns=(before + 1_000_000_000, before + 1_000_000_000))


def _target_exists(primary: Any, db: str, table: str) -> bool:
    with hms_client("127.0.0.1", primary.port) as c:
        return table in c.get_all_tables(db) if db in c.get_all_databases() else False


def _rows(table: Any, policy: str) -> list[dict[str, Any]]:
    from waggle.sync.metrics_table import read_rows

    return sorted((r for r in read_rows(table.ensure()) if r["policy_name"] == policy),
                  key=lambda r: r["ended_at"] or "")
