"""Iceberg through waggle with pyiceberg's HiveCatalog: on the primary, on a writable member behind a prefix, and
on a read-only member; concurrent commits, and locks released where they were granted."""

from __future__ import annotations

import re
import threading
import uuid
from typing import Any

import pytest

from tests.support.audit import audit_text
from tests.support.clients import hive2_client
from tests.support.env import require
from waggle.hms.gen.hive_metastore.ttypes import ShowLocksRequest

pytestmark = pytest.mark.integration


def _catalog(waggle: Any, warehouse: Any, name: str = "waggle") -> Any:
    try:
        from pyiceberg.catalog import load_catalog
    except ImportError:
        require(False, "pyiceberg is not installed (pip install 'pyiceberg[hive,pyarrow,pyiceberg-core]')")
    return load_catalog(name, type="hive", uri=f"thrift://127.0.0.1:{waggle.port}", warehouse=f"file://{warehouse}")


def _rows(n: int, start: int = 0) -> Any:
    import pyarrow as pa

    return pa.table({"id": pa.array(range(start, start + n), pa.int64()),
                     "name": pa.array([f"n{i}" for i in range(start, start + n)], pa.string())})


def _schema() -> Any:
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField, StringType

    return Schema(NestedField(1, "id", LongType(), required=False),
                  NestedField(2, "name", StringType(), required=False))


def _locks(store: Any) -> list[Any]:
    with hive2_client(store.port) as c:
        return list(c.show_locks(ShowLocksRequest()).locks or [])


def test_pyiceberg_on_the_primary_namespaces_tables_appends_schema_rename_drop(waggle, primary, tmp_path):
    cat = _catalog(waggle, tmp_path)
    ns = f"ice_{uuid.uuid4().hex[:8]}"
    cat.create_namespace(ns, {"owner": "data-platform"})
    assert (ns,) in cat.list_namespaces()
    table = cat.create_table(f"{ns}.events", schema=_schema())
    table.append(_rows(3))
    table.append(_rows(2, start=3))
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == [0, 1, 2, 3, 4]

    with table.update_schema() as update:
        from pyiceberg.types import DoubleType

        update.add_column("score", DoubleType())
    table = cat.load_table(f"{ns}.events")
    assert [f.name for f in table.schema().fields] == ["id", "name", "score"]
    assert len(table.snapshots()) == 2

    # waggle relayed the commits: the primary's own record names the table's current metadata
    with hive2_client(primary.port) as c:
        hms_table = c.get_table(ns, "events")
    assert hms_table.parameters["table_type"].upper() == "ICEBERG"
    assert hms_table.parameters["metadata_location"] == table.metadata_location

    cat.rename_table(f"{ns}.events", f"{ns}.events_v2")
    assert cat.list_tables(ns) == [(ns, "events_v2")]
    assert cat.load_table(f"{ns}.events_v2").scan().to_arrow().num_rows == 5
    cat.drop_table(f"{ns}.events_v2")
    assert cat.list_tables(ns) == []
    cat.drop_namespace(ns)
    assert (ns,) not in cat.list_namespaces()
    assert _locks(primary) == []


def test_pyiceberg_on_a_writable_member_behind_its_prefix(waggle, ops, primary, tmp_path):
    cat = _catalog(waggle, tmp_path)
    name = f"ice_{uuid.uuid4().hex[:8]}"
    table = cat.create_table(f"ops_scratch.{name}", schema=_schema())
    since = len(waggle.log())
    table.append(_rows(4))
    assert cat.load_table(f"ops_scratch.{name}").scan().to_arrow().num_rows == 4
    assert ("ops_scratch", name) in cat.list_tables("ops_scratch")

    # the table lives in the member, under its own name, and nothing of it in the primary
    with hive2_client(ops.port) as c:
        assert c.get_table("scratch", name).parameters["metadata_location"] == table.metadata_location
    with hive2_client(primary.port) as c:
        assert "ops_scratch" not in c.get_all_databases()
    # the commit's lock was taken and released at the member that granted it
    lock_calls = {(e["method"], e["metastore"]) for e in waggle.events("call", since)
                  if e["method"] in ("lock", "check_lock", "unlock")}
    assert ("lock", "ops") in lock_calls and ("unlock", "ops") in lock_calls, lock_calls
    assert {m for _, m in lock_calls} == {"ops"}
    assert _locks(ops) == []
    cat.drop_table(f"ops_scratch.{name}")


def test_a_read_only_member_refuses_iceberg_writes_before_its_metastore_sees_them(waggle, analytics, tmp_path):
    from pyiceberg.exceptions import CommitFailedException

    cat = _catalog(waggle, tmp_path)
    name = f"ice_{uuid.uuid4().hex[:8]}"
    before = len(audit_text(analytics))
    with pytest.raises(Exception) as refused:
        cat.create_table(f"analytics_sales.{name}", schema=_schema())
    message = str(refused.value)
    assert "analytics" in message and re.search(r"read.only|not writable|refus|access", message, re.I), message
    with pytest.raises((CommitFailedException, Exception)) as namespace_refused:
        cat.create_namespace(f"analytics_{name}")
    assert "analytics" in str(namespace_refused.value)
    reached = audit_text(analytics)[before:]
    assert name not in reached
    assert "create_table" not in reached and "create_database" not in reached


def test_two_concurrent_commits_to_one_member_table_both_land_and_leave_no_lock(waggle, ops, primary, tmp_path):
    from pyiceberg.exceptions import CommitFailedException

    name = f"ice_{uuid.uuid4().hex[:8]}"
    _catalog(waggle, tmp_path).create_table(f"ops_scratch.{name}", schema=_schema())
    retried: list[str] = []
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def writer(k: int) -> None:
        cat = _catalog(waggle, tmp_path, name=f"writer{k}")  # its own connection
        try:
            start.wait()
            for attempt in range(5):
                table = cat.load_table(f"ops_scratch.{name}")
                try:
                    table.append(_rows(10, start=100 * k))
                    return
                except CommitFailedException as exc:  # the other commit landed first: reload and retry
                    retried.append(f"{k}:{attempt}:{exc}")
            raise AssertionError(f"writer {k} never committed")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(k,)) for k in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    table = _catalog(waggle, tmp_path).load_table(f"ops_scratch.{name}")
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == [*range(100, 110), *range(200, 210)]
    assert len(table.snapshots()) == 2
    # each lock was released at the member that granted it; none was ever taken at the primary
    assert _locks(ops) == []
    assert _locks(primary) == []
    _catalog(waggle, tmp_path).drop_table(f"ops_scratch.{name}")


def test_lock_refusals_and_a_member_dying_under_a_lock_give_clear_errors(primary, analytics, tmp_path):
    """A lock a member refuses, and a member that dies holding one: the client gets an answer naming the
    metastore, and its connection goes on serving. A refused lock is a lock NOT_ACQUIRED with the reason (Iceberg's
    Java client retries every error from ``lock`` for minutes); ``check_lock`` and ``unlock`` declare no
    MetaException, so a dead member's error is a TApplicationException carrying the message."""
    from thrift.Thrift import TApplicationException

    from tests.support.federation import federation_yaml
    from tests.support.proxy import WaggleProcess
    from waggle.hms.gen.hive_metastore import ttypes as t
    from waggle.local.client import hms_client
    from waggle.local.metastore import LocalMetastore
    from waggle.local.seed import ensure_database

    member = LocalMetastore(tmp_path / "lake").start().wait_ready()
    proc = None
    try:
        with hive2_client(member.port) as c:
            ensure_database(c, "raw", f"file://{member.warehouse}/raw.db")
        proc = WaggleProcess(tmp_path / "waggle", federation_yaml(primary.uri, (
            "federated-meta-stores:\n"
            f"- name: lake\n  remote-meta-store-uris: {member.uri}\n  database-prefix: lake_\n"
            "  access-control-type: READ_AND_WRITE_ON_DATABASE_WHITELIST\n  writable-database-white-list: [raw]\n"
            f"- name: analytics\n  remote-meta-store-uris: {analytics.uri}\n  database-prefix: analytics_\n"
        )), "database-resolution: PREFIXED\n").start()
        table = _catalog(proc, tmp_path).create_table("lake_raw.events", schema=_schema())
        table.append(_rows(2))

        def exclusive(db: str, name: str) -> Any:
            component = t.LockComponent(type=t.LockType.EXCLUSIVE, level=t.LockLevel.TABLE, dbname=db,
                                        tablename=name)
            return t.LockRequest(component=[component], user="alice", hostname="client")

        with hms_client("127.0.0.1", proc.port) as c:
            refused = c.lock(exclusive("analytics_sales", "orders"))
            assert (refused.state, refused.lockid) == (t.LockState.NOT_ACQUIRED, 0)
            assert "'analytics' is read-only" in refused.errorMessage, refused
            assert "default" in c.get_all_databases()  # the same connection goes on

            held = c.lock(exclusive("lake_raw", "events"))
            assert held.state == t.LockState.ACQUIRED
            member.kill()
            for release in (lambda: c.check_lock(t.CheckLockRequest(lockid=held.lockid)),
                            lambda: c.unlock(t.UnlockRequest(lockid=held.lockid))):
                with pytest.raises((TApplicationException, t.MetaException)) as lost:
                    release()
                assert "'lake'" in str(lost.value), lost.value
            assert "default" in c.get_all_databases()

        # an Iceberg commit to the dead member fails with an error that names it
        with pytest.raises(Exception) as failed:
            table.append(_rows(1, start=9))
        assert "lake" in str(failed.value), failed.value
    finally:
        if proc is not None:
            proc.stop()
        member.stop()
