"""waggle's cache over real Hive 2.3 metastores that write their notification logs as production ones do.

``cached`` is a waggle of its own over the session's primary and ``ops`` (prefix ``ops_``, writable ``scratch``),
both with ``cache: events``. Each test makes tables of its own in ``scratch`` (other files use the same
metastores), changes them straight at the member or through waggle, and reads them back through waggle.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hmsclient.genthrift.hive_metastore import ttypes

from tests.support.audit import audit_lines
from tests.support.clients import hive2_client
from tests.support.federation import federation_yaml
from tests.support.proxy import WaggleProcess
from tests.support.waits import wait_for
from waggle.local.client import hms_client

pytestmark = pytest.mark.integration
ADMIN_TOKEN = "cache-admin-token-0123456789"


def _federation(primary: Any, ops: Any) -> str:
    """The primary and ops (prefix ops_, writable scratch), both with cache: events."""
    members = (f"  cache: events\nfederated-meta-stores:\n- name: ops\n  remote-meta-store-uris: {ops.uri}\n"
               "  database-prefix: ops_\n  access-control-type: READ_AND_WRITE_ON_DATABASE_WHITELIST\n"
               "  writable-database-white-list: [scratch]\n  cache: events\n")
    return federation_yaml(primary.uri, members)


@pytest.fixture(scope="module")
def cached(primary: Any, ops: Any, federation_data: dict[str, Any],
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[WaggleProcess]:
    proc = WaggleProcess(tmp_path_factory.mktemp("cached"), _federation(primary, ops),
                         "database-resolution: PREFIXED\n").start()
    yield proc
    proc.stop()


def _table(name: str, columns: tuple[str, ...] = ("id",), db: str = "scratch") -> Any:
    from waggle.hms.gen.hive_metastore.ttypes import FieldSchema, SerDeInfo, StorageDescriptor, Table

    sd = StorageDescriptor(cols=[FieldSchema(c, "string", None) for c in columns], location=None,
                           inputFormat="org.apache.hadoop.mapred.TextInputFormat",
                           outputFormat="org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
                           serdeInfo=SerDeInfo(serializationLib="org.apache.hadoop.hive.serde2.lazy."
                                                                "LazySimpleSerDe", parameters={}),
                           parameters={})
    return Table(tableName=name, dbName=db, owner="test", sd=sd, partitionKeys=[], parameters={},
                 tableType="MANAGED_TABLE")


def _name() -> str:
    return f"c_{uuid.uuid4().hex[:10]}"


def _hits(proc: WaggleProcess, member: str) -> float:
    return proc.metric("waggle_cache_hits_total", metastore=member) or 0.0


def test_a_repeated_read_is_answered_from_memory_and_named_as_a_miss_is(cached: WaggleProcess, ops: Any) -> None:
    name = _name()
    with hms_client("127.0.0.1", ops.port) as direct:
        direct.create_table(_table(name))
    before = _hits(cached, "ops")
    with hive2_client(cached.port) as c:
        first = c.get_table("ops_scratch", name)
        # answered from memory while the log reader is current (on a loaded machine a read may find it a poll late)
        deadline = time.monotonic() + 10
        while _hits(cached, "ops") < before + 3 and time.monotonic() < deadline:
            assert c.get_table("ops_scratch", name) == first
        other = c.get_table("OPS_SCRATCH", name.upper())  # the same table by other spellings: a call of its own
    assert first.dbName == "ops_scratch" and first.tableName == name
    assert other.dbName == "OPS_SCRATCH" and other.tableName == name  # named as the call spelled it, as a miss is
    assert _hits(cached, "ops") >= before + 3
    time.sleep(0.5)  # the metastore writes its audit line through a buffer
    assert len(audit_lines(ops, rf"(?i)get_table : db=scratch tbl={name}\b")) == 2  # once by each spelling


def test_a_change_made_straight_at_the_member_is_seen_within_a_second(cached: WaggleProcess, ops: Any) -> None:
    name = _name()
    with hms_client("127.0.0.1", ops.port) as direct, hive2_client(cached.port) as c:
        direct.create_table(_table(name))
        wait_for(lambda: _exists(c, name), 5, "the new table through waggle")
        assert [f.name for f in c.get_table("ops_scratch", name).sd.cols] == ["id"]
        assert [f.name for f in c.get_table("ops_scratch", name).sd.cols] == ["id"]  # now held
        table = direct.get_table("scratch", name)
        table.sd.cols.append(ttypes.FieldSchema("added", "string", None))  # type: ignore[attr-defined]
        direct.alter_table("scratch", name, table)
        changed = time.monotonic()
        while [f.name for f in c.get_table("ops_scratch", name).sd.cols] != ["id", "added"]:
            assert time.monotonic() - changed < 1.5, "the change made at the member was not seen within a second"
            time.sleep(0.02)


def _exists(c: Any, name: str) -> bool:
    try:
        c.get_table("ops_scratch", name)
    except ttypes.NoSuchObjectException:
        return False
    return True


def test_what_is_written_through_waggle_is_read_back_at_once_on_any_connection(cached: WaggleProcess) -> None:
    name = _name()
    with hive2_client(cached.port) as writer, hive2_client(cached.port) as reader:
        writer.create_table(_table(name, db="ops_scratch"))
        for i in range(20):
            assert reader.get_table("ops_scratch", name).parameters.get("round") == (str(i - 1) if i else None)
            table = writer.get_table("ops_scratch", name)
            table.parameters["round"] = str(i)
            writer.alter_table("ops_scratch", name, table)
            assert reader.get_table("ops_scratch", name).parameters["round"] == str(i)
        names = reader.get_all_tables("ops_scratch")
        assert name in names
        writer.drop_table("ops_scratch", name, True)
        assert name not in reader.get_all_tables("ops_scratch")


def test_identical_reads_at_once_make_one_call(primary: Any, ops: Any, tmp_path: Any) -> None:
    from tests.support.faults import SlowLink

    log_calls = ("getStatus", "get_current_notificationEventId", "get_next_notification", "get_config_value")
    link = SlowLink(ops.port, delay=1.0, spare=log_calls)  # each get_table takes a second: all 8 arrive meanwhile
    members = (f"federated-meta-stores:\n- name: ops\n  remote-meta-store-uris: thrift://127.0.0.1:{link.port}\n"
               "  database-prefix: ops_\n  cache: events\n")
    proc = WaggleProcess(tmp_path / "w", federation_yaml(primary.uri, members), "database-resolution: PREFIXED\n")
    try:
        proc.start()
        name = _name()
        with hms_client("127.0.0.1", ops.port) as direct:
            direct.create_table(_table(name))
        results: list[Any] = []
        start = threading.Barrier(8)

        def read() -> None:
            with hive2_client(proc.port) as c:
                start.wait()
                results.append(c.get_table("ops_scratch", name))

        threads = [threading.Thread(target=read) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert len(results) == 8 and all(r == results[0] for r in results)
        assert link.held("get_table") == 1  # one call reached the member; its reply answered all eight
    finally:
        proc.stop()
        link.close()


# -- two waggle processes, one of them with two workers ------------------------------------------------------
@pytest.fixture(scope="module")
def twin(primary: Any, ops: Any, federation_data: dict[str, Any],
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[WaggleProcess]:
    """A second waggle over the same members, with two workers (each its own cache; one log reader for both)."""
    work = tmp_path_factory.mktemp("cached-twin")
    (work / "admin-token").write_text(ADMIN_TOKEN + "\n")
    proc = WaggleProcess(work, _federation(primary, ops),
                         f"database-resolution: PREFIXED\nadmin:\n  token-file: {work / 'admin-token'}\n",
                         args=("--workers", "2")).start()
    yield proc
    proc.stop()


def test_with_workers_a_write_through_one_is_read_back_through_any(twin: WaggleProcess) -> None:
    name = _name()
    with hive2_client(twin.port) as setup:
        setup.create_table(_table(name, db="ops_scratch"))
    writers = [hive2_client(twin.port) for _ in range(3)]
    readers = [hive2_client(twin.port) for _ in range(3)]
    opened = [cm.__enter__() for cm in (*writers, *readers)]  # several connections: both workers get some
    try:
        for i in range(60):
            writer, reader = opened[i % 3], opened[3 + (i * 7) % 3]
            reader.get_table("ops_scratch", name)  # held by the reader's worker
            table = writer.get_table("ops_scratch", name)
            table.parameters["round"] = str(i)
            writer.alter_table("ops_scratch", name, table)
            assert reader.get_table("ops_scratch", name).parameters["round"] == str(i), f"stale in round {i}"
    finally:
        for cm in (*writers, *readers):
            cm.__exit__(None, None, None)
    assert (twin.metric("waggle_cache_hits_total", metastore="ops") or 0) > 0


def test_an_admin_call_makes_every_worker_forget_a_member(twin: WaggleProcess, ops: Any) -> None:
    name = _name()
    with hms_client("127.0.0.1", ops.port) as direct:
        direct.create_table(_table(name))
    connections = [hive2_client(twin.port) for _ in range(4)]
    try:
        for client in [cm.__enter__() for cm in connections]:  # held by both workers
            client.get_table("ops_scratch", name)
            client.get_table("ops_scratch", name)
    finally:
        for cm in connections:
            cm.__exit__(None, None, None)
    assert twin.request("/api/admin/cache/drop?metastore=ops", "POST")[0] == 401
    status, body = twin.request("/api/admin/cache/drop?metastore=nope", "POST", ADMIN_TOKEN)
    assert status == 404 and "with cache on" in body["error"], body
    status, body = twin.request("/api/admin/cache/drop?metastore=ops", "POST", ADMIN_TOKEN)
    assert status == 200 and body["metastore"] == "ops", body
    wait_for(lambda: (twin.metric("waggle_cache_invalidations_total", metastore="ops", cause="admin") or 0) >= 2, 10,
             "both workers forgot (and the supervisor)")


def test_iceberg_writers_through_two_caching_waggles_lose_no_commit(cached: WaggleProcess, twin: WaggleProcess,
                                                                     tmp_path: Any) -> None:
    try:
        import pyarrow as pa
        from pyiceberg.catalog import load_catalog
        from pyiceberg.exceptions import CommitFailedException
        from pyiceberg.schema import Schema
        from pyiceberg.types import LongType, NestedField
    except ImportError:
        from tests.support.env import require

        require(False, "pyiceberg is not installed (pip install 'pyiceberg[hive,pyarrow,pyiceberg-core]')")
    name = f"ops_scratch.ice_{uuid.uuid4().hex[:8]}"

    def catalog(proc: WaggleProcess, label: str) -> Any:
        return load_catalog(label, type="hive", uri=f"thrift://127.0.0.1:{proc.port}", warehouse=f"file://{tmp_path}")

    catalog(cached, "setup").create_table(name, schema=Schema(NestedField(1, "id", LongType(), required=False)))
    appends, errors, retries = 3, [], []
    start = threading.Barrier(4)

    def writer(k: int) -> None:
        cat = catalog(cached if k % 2 else twin, f"writer{k}")
        try:
            start.wait()
            for n in range(appends):
                for _attempt in range(40):
                    table = cat.load_table(name)
                    try:
                        table.append(pa.table({"id": pa.array([k * 100 + n], pa.int64())}))
                        break
                    except CommitFailedException:
                        retries.append(k)
                else:
                    raise AssertionError(f"writer {k} never committed append {n}")
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors, errors
    table = catalog(cached, "check").load_table(name)
    ids = sorted(table.scan().to_arrow().column("id").to_pylist())
    assert ids == sorted(k * 100 + n for k in range(4) for n in range(appends))  # every commit landed once
    assert len(table.snapshots()) == 4 * appends


# -- a member of its own: killed, restarted; a log purged under waggle -------------------------------------------
def _own_member(store: Any, tmp: Any, name: str) -> WaggleProcess:
    from tests.support.federation import prefixed

    text = prefixed(store.uri, (name, store.uri, f"{name}_")).replace(
        f"  database-prefix: {name}_\n", f"  database-prefix: {name}_\n  cache: events\n")
    return WaggleProcess(tmp, text, "database-resolution: PREFIXED\n").start()


def _invalidations(proc: WaggleProcess, member: str, cause: str) -> float:
    return proc.metric("waggle_cache_invalidations_total", metastore=member, cause=cause) or 0.0


def test_a_member_killed_and_restarted_gives_no_stale_reply(tmp_path: Any) -> None:
    from waggle.local.metastore import LocalMetastore
    from waggle.local.seed import ensure_database

    store = LocalMetastore(tmp_path / "lake").start().wait_ready()
    proc = None
    try:
        with hms_client("127.0.0.1", store.port) as direct:
            ensure_database(direct, "d", f"file://{store.warehouse}/d.db")
            direct.create_table(_table("t", db="d"))
        proc = _own_member(store, tmp_path / "w", "lake")
        with hive2_client(proc.port) as c:
            c.get_table("lake_d", "t")
            assert c.get_table("lake_d", "t").parameters.get("v") is None  # held
        # while nothing changes, the log costs one call a poll: at most 2 a second
        before = proc.metric("waggle_cache_log_calls_total", metastore="lake") or 0.0
        time.sleep(3.0)
        polls = (proc.metric("waggle_cache_log_calls_total", metastore="lake") or 0.0) - before
        assert 3 <= polls <= 7, polls
        store.kill()
        store.start().wait_ready()
        with hms_client("127.0.0.1", store.port) as direct:
            table = direct.get_table("d", "t")
            table.parameters["v"] = "after-restart"
            direct.alter_table("d", "t", table)
        wait_for(lambda: _read_v(proc) == "after-restart", 30, "the change after the restart, through waggle")
        changed_at = time.monotonic()
        for _ in range(20):  # and never the old one again
            assert _read_v(proc) == "after-restart"
        assert time.monotonic() - changed_at < 30
        assert _invalidations(proc, "lake", "unreadable") + _invalidations(proc, "lake", "down") > 0
    finally:
        if proc is not None:
            proc.stop()
        store.stop()


def _read_v(proc: WaggleProcess) -> str | None:
    try:
        with hive2_client(proc.port, timeout=5) as c:
            return str(c.get_table("lake_d", "t").parameters.get("v"))
    except Exception:  # the member is still starting: asked again
        return None


def test_a_log_purged_under_waggle_makes_it_forget_the_member(short_lived_events: Any, tmp_path: Any) -> None:
    import os
    import signal

    from waggle.local.seed import ensure_database

    store = short_lived_events
    with hms_client("127.0.0.1", store.port) as direct:
        ensure_database(direct, "d", f"file://{store.warehouse}/d.db")
        direct.create_table(_table("t", db="d"))
    proc = _own_member(store, tmp_path / "w", "short")
    try:
        with hive2_client(proc.port) as c:
            c.get_table("short_d", "t")
            c.get_table("short_d", "t")
        assert proc.proc is not None
        os.kill(proc.proc.pid, signal.SIGSTOP)  # waggle reads nothing while the events live and are purged
        try:
            with hms_client("127.0.0.1", store.port) as direct:
                table = direct.get_table("d", "t")
                table.parameters["v"] = "unseen"
                direct.alter_table("d", "t", table)
                time.sleep(4.0)  # the events live 2 s and are purged every second
                direct.create_table(_table("later", db="d"))  # a newer event, after the purge
        finally:
            os.kill(proc.proc.pid, signal.SIGCONT)
        wait_for(lambda: _invalidations(proc, "short", "gap") > 0, 10, "the gap noticed")
        with hive2_client(proc.port) as c:
            assert c.get_table("short_d", "t").parameters.get("v") == "unseen"
    finally:
        proc.stop()


# -- a member whose log is not written -------------------------------------------------------------------------
def test_cache_events_on_a_member_without_a_notification_log_is_an_error_at_check_and_at_start(
        primary: Any, tmp_path: Any) -> None:
    import subprocess
    import sys

    from tests.support.env import ROOT
    from tests.support.federation import prefixed
    from waggle.local.metastore import LocalMetastore

    silent = LocalMetastore(tmp_path / "silent", notifications=False).start().wait_ready()
    try:
        federation = tmp_path / "federation.yml"
        federation.write_text(prefixed(primary.uri, ("silent", silent.uri, "silent_")) + "  cache: events\n")
        server = tmp_path / "server.yml"
        server.write_text("database-resolution: PREFIXED\nport: 0\nendpoint:\n  port: 0\n")
        files = ("--server-config", str(server), "--federation-config", str(federation))
        check = subprocess.run([sys.executable, "-m", "waggle", "check", "--connect", *files], capture_output=True,
                               text=True, timeout=120, cwd=ROOT)
        assert check.returncode == 2, check.stdout + check.stderr
        assert "error: metastore 'silent' has cache: events, but its notification log is not written" in check.stderr
        assert "ok: metastore 'primary'" in check.stdout  # the primary has no cache: nothing asked of its log
        serve = subprocess.run([sys.executable, "-m", "waggle", "serve", *files], capture_output=True, text=True,
                               timeout=120, cwd=ROOT)
        assert serve.returncode == 2
        assert "error: metastore 'silent' has cache: events, but its notification log is not written" in serve.stderr
    finally:
        silent.stop()


# -- Spark ------------------------------------------------------------------------------------------------------
def test_spark_queries_twenty_tables_mostly_from_memory_and_sees_a_column_added_at_the_member(
        cached: WaggleProcess, ops: Any, tmp_path: Any) -> None:
    from tests.support.env import java_available, require
    from tests.support.spark_steps import run_gated
    from waggle.local.seed import ensure_database, ensure_table

    require(java_available(), "Java 17 is needed for Spark")
    db = f"sp_{uuid.uuid4().hex[:8]}"
    root = f"file://{ops.warehouse}/{db}.db"
    with hms_client("127.0.0.1", ops.port) as direct:
        ensure_database(direct, db, root)
        for i in range(20):
            ensure_table(direct, db, f"t{i}", f"{root}/t{i}", [("id", "int"), ("name", "string")],
                         rows=[f"{j},n{j}" for j in range(i + 1)])
    query = "SELECT count(*), sum(id) FROM ops_{db}.t{i}"
    steps = [(f"r{r}t{i}", query.format(db=db, i=i)) for r in range(4) for i in range(20)]
    steps.append(("after", f"SELECT * FROM ops_{db}.t0"))
    seen: dict[str, tuple[float, float]] = {}

    def counts() -> tuple[float, float]:
        return _hits(cached, "ops"), cached.metric("waggle_cache_misses_total", metastore="ops") or 0.0

    def warmed() -> None:  # the first round is over: each table was asked once
        seen["warm"] = counts()

    def add_column() -> None:
        seen["loop"] = counts()
        with hms_client("127.0.0.1", ops.port) as direct:
            table = direct.get_table(db, "t0")
            table.sd.cols.append(ttypes.FieldSchema("extra", "string", None))  # type: ignore[attr-defined]
            direct.alter_table(db, "t0", table)
        time.sleep(1.1)  # a change made at the member is seen through waggle within a second

    result = run_gated({"uri": f"thrift://127.0.0.1:{cached.port}", "warehouse": str(tmp_path / "wh"),
                        "steps": steps}, {"r1t0": warmed, "after": add_column})
    for r in range(4):
        for i in range(20):
            step = result[f"r{r}t{i}"]
            assert step.get("rows") == [[str(i + 1), str(i * (i + 1) // 2)]], (r, i, step)  # the rows written
    assert result["after"].get("rows") == [["0", "n0", None]], result["after"]  # the new column, read as null
    hits = seen["loop"][0] - seen["warm"][0]
    asked = hits + seen["loop"][1] - seen["warm"][1]
    print(f"spark loop: {hits:g} of {asked:g} cacheable reads answered from memory")
    assert asked > 0 and hits / asked >= 0.9, f"{hits:g} of {asked:g} cacheable reads answered from memory"
