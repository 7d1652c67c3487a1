"""Federation over three real metastores: routing, name rewriting, listings, access control, both modes.

The session ``waggle`` is PREFIXED over the primary, ``analytics`` (prefix ``analytics_``, READ_ONLY, only
sales/web/default visible, web shows visits and page_* only) and ``ops`` (prefix ``ops_``, writable
``scratch``, ``telemetry`` also served as ``metrics``). ``manual_waggle`` is MANUAL over the same metastores.
"""

from __future__ import annotations

import re
import time

import pytest
from hmsclient.genthrift.hive_metastore import ttypes

from tests.support.audit import audit_text
from tests.support.clients import hive2_client
from waggle.call import lock_ids


def test_listings_merge_every_member_and_hide_what_is_hidden(waggle, primary):
    with hive2_client(waggle.port) as c:
        names = c.get_all_databases()
    for expected in ("default", "analytics_sales", "analytics_web", "analytics_default", "ops_telemetry",
                     "ops_metrics", "ops_scratch", "ops_sales", "ops_default"):
        assert expected in names, names
    assert not any("secret" in n for n in names), names
    assert len(names) == len(set(names))


def test_get_databases_patterns_reach_only_members_that_can_match(waggle):
    with hive2_client(waggle.port) as c:
        assert sorted(c.get_databases("analytics_*")) == ["analytics_default", "analytics_sales", "analytics_web"]
        assert sorted(c.get_databases("ANALYTICS_S*|ops_m*")) == ["analytics_sales", "ops_metrics"]
        assert c.get_databases("analytics_secr*") == []
        assert sorted(c.get_databases("*sales")) == ["analytics_sales", "ops_sales"]
        assert sorted(c.get_databases("ops_.ales")) == ["ops_sales"]
    log = waggle.log()
    # the prefix cut: analytics is asked for "s*" / "*", ops is never asked for "analytics_*"
    assert "fanout.member_omitted" not in log


def test_names_are_rewritten_in_requests_and_replies(waggle):
    with hive2_client(waggle.port) as c:
        db = c.get_database("analytics_sales")
        assert db.name == "analytics_sales"
        table = c.get_table("analytics_sales", "orders")
        assert table.dbName == "analytics_sales"
        assert [f.name for f in table.sd.cols] == ["id", "customer"]
        parts = c.get_partitions("analytics_sales", "daily", -1)
        assert len(parts) == 5 and {p.dbName for p in parts} == {"analytics_sales"}
        assert c.get_partition_names("Analytics_Sales", "daily", -1)[0] == "part=p000000"
        objs = c.get_table_objects_by_name("analytics_sales", ["orders", "daily"])
        assert {t.dbName for t in objs} == {"analytics_sales"}
        meta = c.get_table_meta("analytics_*", "*", None)
        assert {(m.dbName, m.tableName) for m in meta} >= {("analytics_sales", "orders"), ("analytics_web", "visits")}


def test_view_sql_is_rewritten_so_a_view_over_a_federated_database_reads_back(waggle):
    with hive2_client(waggle.port) as c:
        view = c.get_table("analytics_sales", "orders_view")
    assert view.viewExpandedText == ("SELECT `orders`.`id`, `orders`.`customer` FROM `analytics_sales`.`orders` "
                                     "WHERE `orders`.`id` > 1")
    assert view.viewOriginalText == "SELECT * FROM analytics_sales.orders WHERE id > 1"


def test_aliases_work_both_ways(waggle):
    with hive2_client(waggle.port) as c:
        assert c.get_database("ops_metrics").name == "ops_metrics"
        assert c.get_database("ops_telemetry").name == "ops_telemetry"
        assert c.get_table("ops_metrics", "events").dbName == "ops_metrics"
        assert c.get_table("ops_telemetry", "events").dbName == "ops_telemetry"


def test_hidden_databases_are_unreachable_by_any_name(waggle):
    with hive2_client(waggle.port) as c:
        for name in ("analytics_secret", "ANALYTICS_SECRET", "Analytics_Secret"):
            with pytest.raises(ttypes.NoSuchObjectException):
                c.get_database(name)
            with pytest.raises(ttypes.NoSuchObjectException):
                c.get_table(name, "keys")
        with pytest.raises(ttypes.MetaException, match="does not exist"):
            c.get_all_tables("analytics_secret")
        assert c.get_databases("analytics_sec*") == []
        assert c.get_table_meta("analytics_secret", "*", None) == []


def test_mapped_tables_hide_unlisted_tables_everywhere(waggle):
    with hive2_client(waggle.port) as c:
        assert sorted(c.get_all_tables("analytics_web")) == ["page_home", "visits"]
        assert sorted(c.get_tables("analytics_web", "*")) == ["page_home", "visits"]
        with pytest.raises(ttypes.NoSuchObjectException):
            c.get_table("analytics_web", "internal")
        assert [t.tableName for t in c.get_table_objects_by_name("analytics_web", ["visits", "internal"])] == \
            ["visits"]
        meta = {m.tableName for m in c.get_table_meta("analytics_web", "*", None)}
        assert meta == {"visits", "page_home"}


def _table(db: str, name: str, location: str) -> ttypes.Table:
    sd = ttypes.StorageDescriptor(
        cols=[ttypes.FieldSchema("id", "int", None)], location=location,
        inputFormat="org.apache.hadoop.mapred.TextInputFormat",
        outputFormat="org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
        serdeInfo=ttypes.SerDeInfo(None, "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe", {}),
        compressed=False, numBuckets=-1, bucketCols=[], sortCols=[], parameters={})
    return ttypes.Table(tableName=name, dbName=db, sd=sd, partitionKeys=[], parameters={"EXTERNAL": "TRUE"},
                        tableType="EXTERNAL_TABLE", owner="waggle", createTime=0, lastAccessTime=0, retention=0)


def test_refused_write_never_reaches_the_member(waggle, analytics, tmp_path):
    marker = f"forbidden_{int(time.time() * 1000)}"
    with hive2_client(waggle.port) as c:
        with pytest.raises(ttypes.MetaException) as info:
            c.create_table(_table("analytics_sales", marker, f"file://{tmp_path}/{marker}"))
        assert "analytics_sales" in info.value.message and "READ_ONLY" in info.value.message
        with pytest.raises(ttypes.MetaException, match="read-only"):
            c.drop_table("analytics_sales", "orders", False)
        with pytest.raises(ttypes.MetaException, match="read-only"):
            c.drop_partition_by_name("analytics_sales", "daily", "part=p000000", False)
        assert "orders" in c.get_all_tables("analytics_sales")
        assert len(c.get_partition_names("analytics_sales", "daily", -1)) == 5
    # the metastore's own audit log records every call it receives; none of these reached it
    audit = audit_text(analytics)
    assert marker not in audit
    assert not re.search(r"cmd=drop_table : db=sales tbl=orders", audit)


def test_whitelisted_database_is_writable_and_others_are_not(waggle, ops, tmp_path):
    with hive2_client(waggle.port) as c:
        c.create_table(_table("ops_scratch", "notes", f"file://{tmp_path}/notes"))
        assert c.get_table("ops_scratch", "notes").dbName == "ops_scratch"
        c.drop_table("ops_scratch", "notes", False)
        with pytest.raises(ttypes.MetaException, match="writable-database-white-list"):
            c.create_table(_table("ops_telemetry", "notes", f"file://{tmp_path}/notes2"))


def test_create_database_only_on_the_primary(waggle, unique_db, tmp_path):
    with hive2_client(waggle.port) as c:
        with pytest.raises(ttypes.MetaException, match="only be created in the primary"):
            c.create_database(ttypes.Database(name="analytics_new", locationUri=f"file://{tmp_path}/x",
                                              parameters={}))
        c.create_database(ttypes.Database(name=unique_db, locationUri=f"file://{tmp_path}/{unique_db}",
                                          parameters={}))
        assert unique_db in c.get_all_databases()


def test_writes_spanning_two_metastores_are_refused(waggle, unique_db, tmp_path):
    with hive2_client(waggle.port) as c:
        c.create_database(ttypes.Database(name=unique_db, locationUri=f"file://{tmp_path}/db", parameters={}))
        c.create_table(_table(unique_db, "t", f"file://{tmp_path}/t"))
        renamed = _table("ops_scratch", "t", f"file://{tmp_path}/t")
        with pytest.raises(ttypes.MetaException, match="two metastores") as info:
            c.alter_table(unique_db, "t", renamed)
        assert "ops_scratch" in str(info.value)


def _lock(*components):
    return ttypes.LockRequest(
        component=[ttypes.LockComponent(type=t, level=ttypes.LockLevel.TABLE, dbname=db, tablename=tbl,
                                        operationType=ttypes.DataOperationType.SELECT)
                   for t, db, tbl in components],
        user="waggle", hostname="test")


def test_locks_read_locks_pass_write_locks_follow_access_and_ids_stay_with_their_metastore(waggle, unique_db,
                                                                                          analytics):
    with hive2_client(waggle.port) as c:
        granted = c.lock(_lock((ttypes.LockType.SHARED_READ, "analytics_sales", "orders")))
        assert granted.state == ttypes.LockState.ACQUIRED
        # the lock id is analytics's: check_lock / unlock must go there, not to the primary
        assert c.check_lock(ttypes.CheckLockRequest(lockid=granted.lockid)).state == ttypes.LockState.ACQUIRED
        c.heartbeat(ttypes.HeartbeatRequest(lockid=granted.lockid))
        c.unlock(ttypes.UnlockRequest(lockid=granted.lockid))
        # a refused lock is a lock not acquired (lock id 0), its reason in errorMessage (a Hive 4 field; the
        # Hive 2 client here skips it), and the connection goes on
        for refused in (_lock((ttypes.LockType.EXCLUSIVE, "analytics_sales", "orders")),
                        _lock((ttypes.LockType.SHARED_READ, "default", "x"),
                              (ttypes.LockType.SHARED_READ, "analytics_sales", "orders"))):
            answer = c.lock(refused)
            assert (answer.state, answer.lockid) == (ttypes.LockState.NOT_ACQUIRED, 0)
        deadline = time.monotonic() + 10  # the log is written by another process: wait for its lines
        while True:
            reasons = [e["reason"] for e in waggle.events("call.refused") if e["method"] == "lock"]
            found = (any(re.search(r"read-only.*type EXCLUSIVE", r) for r in reasons)
                     and any("two metastores" in r for r in reasons))
            if found or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert found, reasons
    with hive2_client(analytics.port) as direct, pytest.raises(ttypes.NoSuchLockException):
        # the unlock reached analytics (which knows the lock by its own id)
        direct.check_lock(ttypes.CheckLockRequest(lockid=lock_ids.decode(granted.lockid)[1]))


def test_functions_merge_across_members(waggle, tmp_path):
    fn = ttypes.Function(functionName="waggle_fn", dbName="ops_scratch", className="org.example.Fn",
                         ownerName="waggle", ownerType=ttypes.PrincipalType.USER, createTime=0,
                         functionType=ttypes.FunctionType.JAVA, resourceUris=[])
    with hive2_client(waggle.port) as c:
        c.create_function(fn)
        try:
            functions = c.get_all_functions().functions
            assert ("ops_scratch", "waggle_fn") in {(f.dbName, f.functionName) for f in functions}
            assert c.get_function("ops_scratch", "waggle_fn").dbName == "ops_scratch"
        finally:
            c.drop_function("ops_scratch", "waggle_fn")


# -- MANUAL -----------------------------------------------------------------------------------------------
def test_manual_mode_each_database_belongs_to_one_metastore(manual_waggle):
    with hive2_client(manual_waggle.port) as c:
        names = c.get_all_databases()
        for expected in ("default", "sales", "web", "telemetry", "metrics", "scratch"):
            assert expected in names, names
        assert "secret" not in names
        assert c.get_table("sales", "orders").dbName == "sales"  # analytics keeps sales (listed first)
        assert c.get_table("metrics", "events").dbName == "metrics"
        with pytest.raises(ttypes.NoSuchObjectException):
            c.get_table("sales", "refunds")  # ops's sales is the clash's loser
        with pytest.raises(ttypes.NoSuchObjectException):
            c.get_database("secret")
    log = manual_waggle.log()
    assert log.count("database 'sales' exists in metastores 'analytics' and 'ops'") == 1, log


def test_manual_mode_sees_databases_created_upstream_without_a_restart(manual_waggle, ops, tmp_path):
    name = f"fresh_{int(time.time() * 1000)}"
    with hive2_client(ops.port) as direct:
        direct.create_database(ttypes.Database(name=name, locationUri=f"file://{tmp_path}/{name}", parameters={}))
    try:
        deadline = time.monotonic() + 10
        with hive2_client(manual_waggle.port) as c:
            while name not in c.get_all_databases():
                assert time.monotonic() < deadline, "not visible after 10 s"
                time.sleep(0.2)
            while True:  # the map follows within one refresh
                try:
                    assert c.get_database(name).name == name
                    break
                except ttypes.NoSuchObjectException:
                    assert time.monotonic() < deadline
                    time.sleep(0.2)
    finally:
        with hive2_client(ops.port) as direct:
            direct.drop_database(name, True, True)
