"""Reads from copies (issue 26), with real metastores, Spark and pyiceberg.

A member ``lake`` (its own metastore, killed and restarted here; :mod:`tests.support.lake`) holds a partitioned
Hive table (``lake_sales.orders`` to clients) and an Iceberg table (``lake_ice.t2``); ``waggle sync --mode copy``
copies both into the session's primary. waggle processes federate ``lake`` with ``read-from-copies``, and answer
from the copies while ``lake`` is down (``when-down``), or with the copies' storage while it is up (``prefer``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from hmsclient.genthrift.hive_metastore import ttypes

from tests.support import copies as cp
from tests.support.clients import hive2_client
from tests.support.lake import Lake, path
from tests.support.proxy import WaggleProcess
from tests.support.waits import wait_for
from waggle.call import lock_ids

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def _own_proxies(lake: Lake) -> Iterator[None]:
    """Each test's waggle processes stop when it ends."""
    yield
    lake.stop_proxies()


# -- the copies themselves, and read-from-copies: never ------------------------------------------------------------
def test_the_copies_and_never_is_todays_behaviour(lake: Lake) -> None:
    with hive2_client(lake.primary.port) as c:
        orders = c.get_table(lake.sales_copy, cp.ORDERS)
        parts = c.get_partitions(lake.sales_copy, cp.ORDERS, -1)
        ice = c.get_table(lake.ice_copy, cp.T2)
    assert orders.parameters["waggle.sync.source"] == "lake"
    assert orders.parameters["waggle.sync.source-object"] == f"{cp.SALES}.{cp.ORDERS}"
    assert path(orders.sd.location) == f"{lake.copy_root(lake.sales_copy)}/{cp.ORDERS}"
    assert sorted(p.values[0] for p in parts) == sorted(cp.ORDER_ROWS)
    assert ice.parameters["waggle.sync.source-object"] == f"{cp.ICE}.{cp.T2}"
    assert path(ice.parameters["metadata_location"]).startswith(f"{lake.copy_root(lake.ice_copy)}/{cp.T2}/metadata/")

    proxy = lake.proxy()  # read-from-copies: never (the default)
    with proxy.client() as c:
        table = c.get_table("lake_sales", cp.ORDERS)
        assert path(table.sd.location) == path(lake.orders_location)
        _not_served(table.parameters)
    table = cp.iceberg_catalog(f"thrift://127.0.0.1:{proxy.port}", lake.work).load_table(f"lake_{cp.ICE}.{cp.T2}")
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == cp.ICE_IDS

    lake.down(proxy)
    with proxy.client() as c, pytest.raises(ttypes.MetaException, match="metastore 'lake' is unavailable"):
        c.get_table("lake_sales", cp.ORDERS)  # a copy exists, but this member never reads from it
    lake.up()


# -- when-down ----------------------------------------------------------------------------------------------------
def _served(params: dict[str, str], copy: str, reason: str) -> None:
    """The marks of a reply served from ``copy``; none of the copy's own sync bookkeeping."""
    assert params.get("waggle.served-from") == copy, params
    assert params.get("waggle.served-reason") == reason, params
    assert int(params["waggle.served-staleness-seconds"]) >= 0, params
    assert not [k for k in params if k.startswith("waggle.sync.")], params


def _not_served(params: dict[str, str]) -> None:
    assert not [k for k in params if k.startswith("waggle.served-")], params


def _lock(c: Any, db: str, table: str, kind: int = ttypes.LockType.SHARED_READ) -> Any:
    """A table lock through ``c``, acquired."""
    component = ttypes.LockComponent(type=kind, level=ttypes.LockLevel.TABLE, dbname=db, tablename=table)
    lock = c.lock(ttypes.LockRequest(component=[component], user="alice", hostname="client"))
    assert lock.state == ttypes.LockState.ACQUIRED, lock
    return lock


def _held(store: Any, lockid: int) -> list[tuple[str, str]]:
    """The (database, table) of the lock ``lockid`` held in a metastore (lock ids of two metastores may be
    equal: a test checks the tables too)."""
    with hive2_client(store.port) as c:
        return [(e.dbname, e.tablename) for e in c.show_locks(ttypes.ShowLocksRequest()).locks or []
                if e.lockid == lockid]


def _client_partition(lake: Lake, dt: str) -> Any:
    """The partition ``dt`` of ``lake_sales.orders`` as a client sends it through waggle."""
    part = cp.order_partition(lake.orders_location, dt)
    part.dbName = "lake_sales"
    return part


@pytest.mark.spark
def test_when_down_spark_and_pyiceberg_read_the_copies_and_writes_are_refused(lake: Lake) -> None:
    lake.up()
    proxy = lake.proxy(read_from_copies="when-down")
    with proxy.client() as c:  # lake up: its own table
        table = c.get_table("lake_sales", cp.ORDERS)
        assert path(table.sd.location) == path(lake.orders_location)
        _not_served(table.parameters)
    since = len(proxy.log())
    lake.down(proxy)
    sales_copy = f"{lake.sales_copy}.{cp.ORDERS}"
    copy_orders = lake.copy_orders

    # metadata: the client's names, the copy's storage, the marks
    with proxy.client() as c:
        started = time.monotonic()
        table = c.get_table("lake_sales", cp.ORDERS)
        assert time.monotonic() - started < 1.0  # a plan, not a retry after lake's timeout
        assert (table.dbName, table.tableName) == ("lake_sales", cp.ORDERS)
        assert [k.name for k in table.partitionKeys] == ["dt"]
        assert path(table.sd.location) == copy_orders
        _served(table.parameters, sales_copy, "down")
        assert c.get_partition_names("lake_sales", cp.ORDERS, -1) == [f"dt={d}" for d in sorted(cp.ORDER_ROWS)]
        (part,) = c.get_partitions_by_filter("lake_sales", cp.ORDERS, "dt = '2024-01-02'", -1)
        assert (part.dbName, part.tableName, part.values) == ("lake_sales", cp.ORDERS, ["2024-01-02"])
        assert path(part.sd.location) == f"{copy_orders}/dt=2024-01-02"
        _served(part.parameters, sales_copy, "down")
        assert c.get_database("lake_sales").name == "lake_sales"
        assert c.get_database("lake_ice").name == "lake_ice"
        assert c.get_all_tables("lake_sales") == [cp.ORDERS]  # only the copied tables
        assert c.get_tables("lake_ice", "*") == [cp.T2]
        assert {"lake_sales", "lake_ice"} <= set(c.get_all_databases())
        # a read lock on a table served from a copy is taken in the primary
        lock = _lock(c, "lake_sales", cp.ORDERS)
        assert _held(lake.primary, lock.lockid) == [(lake.sales_copy, cp.ORDERS)]
        c.unlock(ttypes.UnlockRequest(lockid=lock.lockid))
        assert _held(lake.primary, lock.lockid) == []

    # Spark: partition pruning, a join with a local table, DESCRIBE FORMATTED, and an INSERT (refused)
    result = cp.spark_steps(f"thrift://127.0.0.1:{proxy.port}", lake.work / "wh-down", [
        ("pruned", "SELECT id, name, dt FROM lake_sales.orders WHERE dt = '2024-01-02' ORDER BY id"),
        ("explain", "EXPLAIN SELECT id FROM lake_sales.orders WHERE dt = '2024-01-02'"),
        ("files", "SELECT id, input_file_name() FROM lake_sales.orders WHERE dt = '2024-01-02' ORDER BY id"),
        ("join", f"SELECT o.id, o.name, p.city FROM lake_sales.orders o JOIN {lake.local_db}.people p "
                 "ON o.id = p.id ORDER BY o.id"),
        ("all", "SELECT id, name, dt FROM lake_sales.orders ORDER BY id"),
        ("describe", "DESCRIBE FORMATTED lake_sales.orders"),
        ("insert", "INSERT INTO lake_sales.orders PARTITION (dt = '2024-01-09') VALUES (9, 'zed')"),
        ("insert_existing", "INSERT INTO lake_sales.orders PARTITION (dt = '2024-01-02') VALUES (8, 'yan')"),
    ])
    assert cp.rows(result, "pruned") == [["3", "cid", "2024-01-02"], ["4", "dan", "2024-01-02"]]
    (plan,) = cp.rows(result, "explain")[0]
    assert "Pruned Partitions: [(dt=2024-01-02)]" in plan, plan
    assert {path(f) for _, f in cp.rows(result, "files")} == {f"{copy_orders}/dt=2024-01-02/data.csv"}
    assert cp.rows(result, "join") == [["1", "ann", "oslo"], ["3", "cid", "rome"]]
    assert cp.rows(result, "all") == [[*row.split(","), dt] for dt, rs in sorted(cp.ORDER_ROWS.items())
                                      for row in rs]
    properties = dict((r[0], r[1]) for r in cp.rows(result, "describe"))["Table Properties"]
    assert f"waggle.served-from={sales_copy}" in properties and "waggle.served-reason=down" in properties, \
        properties
    for insert in ("insert", "insert_existing"):
        assert "error" in result[insert], result[insert]
        assert "metastore 'lake' is unavailable" in result[insert]["error"], result[insert]["error"]
        assert "served from copies" in result[insert]["error"], result[insert]["error"]
    written = lake.copy_files()
    lake.restore_copy()

    # pyiceberg: the copy's metadata, the source's rows; a commit is refused naming lake
    ice = cp.iceberg_catalog(f"thrift://127.0.0.1:{proxy.port}", lake.work).load_table(f"lake_{cp.ICE}.{cp.T2}")
    assert path(ice.metadata_location).startswith(f"{lake.copy_root(lake.ice_copy)}/{cp.T2}/metadata/")
    assert sorted(ice.scan().to_arrow().column("id").to_pylist()) == cp.ICE_IDS
    assert {path(f).startswith(lake.copy_root(lake.ice_copy))
            for f in ice.inspect.files().column("file_path").to_pylist()} == {True}
    import pyarrow as pa

    with hive2_client(lake.primary.port) as p:
        before = p.get_table(lake.ice_copy, cp.T2).parameters["metadata_location"]
    with pytest.raises(Exception) as refused:  # pyiceberg's commit: an EXCLUSIVE lock, then alter_table
        ice.append(pa.table({"id": pa.array([99], pa.int64()), "day": pa.array(["2026-11-09"], pa.string())}))
    assert "lake" in str(refused.value), refused.value
    with hive2_client(lake.primary.port) as p:  # the copy is not written
        assert p.get_table(lake.ice_copy, cp.T2).parameters["metadata_location"] == before

    # a write through hmsclient: the message of the contract
    with proxy.client() as c, pytest.raises(ttypes.MetaException) as write:
        c.add_partition(_client_partition(lake, "2024-01-08"))
    assert "metastore 'lake' is unavailable" in write.value.message
    assert "reads of its tables are served from copies" in write.value.message
    assert (proxy.metric("waggle_copy_reads_total", metastore="lake", reason="down") or 0) > 0
    serving = wait_for(lambda: proxy.events("copies.serving", since), timeout=5)
    assert serving[0].get("member") == "lake" and serving[0].get("reason") == "down", serving

    # last: the refused INSERTs changed no metadata, of the copy or of lake; Spark wrote its files before it asked
    # the metastore to commit them, and the files it left in the copy's directory go with the next sync run (see
    # the prefer test); they were removed above so that later tests read the copy as made
    assert any(name.startswith("dt=2024-01-02/part-") for name in written), written
    with hive2_client(lake.primary.port) as p:
        assert p.get_partition_names(lake.sales_copy, cp.ORDERS, -1) == [f"dt={d}" for d in sorted(cp.ORDER_ROWS)]


def test_a_table_without_a_copy_on_a_down_member_fails_at_once(lake: Lake) -> None:
    proxy = lake.proxy(read_from_copies="when-down")
    lake.down(proxy)
    with proxy.client() as c:
        for table in (cp.NOCOPY, cp.LATER):
            started = time.monotonic()
            with pytest.raises(ttypes.MetaException) as failed:
                c.get_table("lake_sales", table)
            assert time.monotonic() - started < 2.0
            assert "metastore 'lake' is unavailable" in failed.value.message, failed.value.message


def test_when_lake_returns_reads_and_writes_go_to_it(lake: Lake) -> None:
    proxy = lake.proxy(read_from_copies="when-down")
    lake.down(proxy)
    with proxy.client() as c:
        _served(c.get_table("lake_sales", cp.ORDERS).parameters, f"{lake.sales_copy}.{cp.ORDERS}", "down")
    since = len(proxy.log())
    lake.up()

    def from_lake() -> Any:
        with proxy.client() as c:
            try:
                table = c.get_table("lake_sales", cp.ORDERS)
            except ttypes.MetaException:
                return None
            return table if "waggle.served-from" not in table.parameters else None

    table = wait_for(from_lake, timeout=15, message=lambda: proxy.log()[-3000:])
    assert path(table.sd.location) == path(lake.orders_location)
    with proxy.client() as c:
        for part in c.get_partitions("lake_sales", cp.ORDERS, -1):
            assert path(part.sd.location).startswith(path(lake.orders_location)), part
            _not_served(part.parameters)
        assert set(c.get_all_tables("lake_sales")) >= {cp.ORDERS, cp.NOCOPY, cp.LATER}
        # a write reaches lake again: the partition the prefer tests read from the source
        cp.write_rows(f"{lake.orders_location}/dt={cp.NEW_PARTITION}", cp.NEW_ROWS)
        names = c.get_partition_names("lake_sales", cp.ORDERS, -1)
        if f"dt={cp.NEW_PARTITION}" not in names:
            added = c.add_partition(_client_partition(lake, cp.NEW_PARTITION))
            assert added.dbName == "lake_sales"
    with hive2_client(lake.store.port) as c:
        assert f"dt={cp.NEW_PARTITION}" in c.get_partition_names(cp.SALES, cp.ORDERS, -1)
    ice = cp.iceberg_catalog(f"thrift://127.0.0.1:{proxy.port}", lake.work).load_table(f"lake_{cp.ICE}.{cp.T2}")
    assert path(ice.metadata_location).startswith(f"{lake.store.warehouse}/{cp.ICE}.db/")
    released = wait_for(lambda: proxy.events("copies.released", since), timeout=5)  # logged within a second
    assert released[0].get("member") == "lake" and released[0].get("reason") == "down", released


# -- prefer -------------------------------------------------------------------------------------------------------
@pytest.mark.spark
def test_prefer_reads_the_copys_files_and_a_partition_it_lacks_from_the_source(lake: Lake) -> None:
    lake.up()
    lake.ensure_new_partition()
    proxy = lake.proxy(read_from_copies="prefer", max_staleness="1h")
    sales_copy = f"{lake.sales_copy}.{cp.ORDERS}"
    copy_orders = lake.copy_orders
    with proxy.client() as c:
        table = c.get_table("lake_sales", cp.ORDERS)
        assert (table.dbName, path(table.sd.location)) == ("lake_sales", copy_orders)
        _served(table.parameters, sales_copy, "prefer")
        parts = {p.values[0]: p for p in c.get_partitions("lake_sales", cp.ORDERS, -1)}
    assert sorted(parts) == sorted([*cp.ORDER_ROWS, cp.NEW_PARTITION])
    for dt in cp.ORDER_ROWS:
        assert path(parts[dt].sd.location) == f"{copy_orders}/dt={dt}"
        _served(parts[dt].parameters, sales_copy, "prefer")
    assert path(parts[cp.NEW_PARTITION].sd.location) == f"{path(lake.orders_location)}/dt={cp.NEW_PARTITION}"
    _not_served(parts[cp.NEW_PARTITION].parameters)
    with proxy.client() as c:  # a read lock is taken where the data is read; a write lock where writes go
        read = _lock(c, "lake_sales", cp.ORDERS)
        assert _held(lake.primary, read.lockid) == [(lake.sales_copy, cp.ORDERS)]
        c.unlock(ttypes.UnlockRequest(lockid=read.lockid))
        write = _lock(c, "lake_sales", cp.ORDERS, ttypes.LockType.EXCLUSIVE)
        own = lock_ids.decode(write.lockid)[1]  # the member's own id (the client's names the member)
        assert _held(lake.store, own) == [(cp.SALES, cp.ORDERS)]
        assert (lake.sales_copy, cp.ORDERS) not in _held(lake.primary, write.lockid)
        c.unlock(ttypes.UnlockRequest(lockid=write.lockid))
        assert _held(lake.store, own) == []

    result = cp.spark_steps(f"thrift://127.0.0.1:{proxy.port}", lake.work / "wh-prefer", [
        ("files", "SELECT id, dt, input_file_name() FROM lake_sales.orders ORDER BY id"),
        ("describe", "DESCRIBE FORMATTED lake_sales.orders"),
        ("insert_existing", "INSERT INTO lake_sales.orders PARTITION (dt = '2024-01-01') VALUES (8, 'yan')"),
    ])
    written = lake.copy_files()
    # Spark wrote its file into the copy's partition before the metastore refused the commit; the next sync run
    # finds the copy's directory unlike the source's and makes it again
    code, out = lake.sync(sync_file=(
        f"source: lake\nmaster: local[1]\njobs:\n- tables: {cp.SALES}.{cp.ORDERS}\n  mode: copy\n"
        f"  target-database: {lake.sales_copy}\n  partition-filter: dt <= '2024-01-02'\n"))
    assert code == 0, out
    healed = lake.copy_files()
    files = {row[0]: (row[1], path(row[2])) for row in cp.rows(result, "files")}
    expected = {row.split(",")[0]: (dt, f"{copy_orders}/dt={dt}/data.csv")
                for dt, rs in cp.ORDER_ROWS.items() for row in rs}
    expected.update({row.split(",")[0]: (cp.NEW_PARTITION,
                                          f"{path(lake.orders_location)}/dt={cp.NEW_PARTITION}/data.csv")
                     for row in cp.NEW_ROWS})
    assert files == expected
    properties = dict((r[0], r[1]) for r in cp.rows(result, "describe"))["Table Properties"]
    assert f"waggle.served-from={sales_copy}" in properties and "waggle.served-reason=prefer" in properties

    ice = cp.iceberg_catalog(f"thrift://127.0.0.1:{proxy.port}", lake.work).load_table(f"lake_{cp.ICE}.{cp.T2}")
    assert path(ice.metadata_location).startswith(f"{lake.copy_root(lake.ice_copy)}/{cp.T2}/metadata/")
    assert sorted(ice.scan().to_arrow().column("id").to_pylist()) == cp.ICE_IDS
    # the copy's metadata is read-only: a commit based on it never reaches lake's table
    import pyarrow as pa

    with hive2_client(lake.store.port) as c:
        source_metadata = c.get_table(cp.ICE, cp.T2).parameters["metadata_location"]
    with pytest.raises(Exception) as refused:
        ice.append(pa.table({"id": pa.array([99], pa.int64()), "day": pa.array(["2026-11-09"], pa.string())}))
    assert "read-only" in str(refused.value) and lake.ice_copy in str(refused.value), refused.value
    with hive2_client(lake.store.port) as c:
        assert c.get_table(cp.ICE, cp.T2).parameters["metadata_location"] == source_metadata
    assert (proxy.metric("waggle_copy_reads_total", metastore="lake", reason="prefer") or 0) > 0
    assert (proxy.metric("waggle_copy_reads_total", metastore="lake", reason="source") or 0) > 0

    # last: an INSERT into a partition read from the copy is refused (the copy is read-only) before lake's
    # partition could point at the copy; the file Spark had written into the copy is gone after the next sync run
    assert "read-only" in result["insert_existing"].get("error", ""), result["insert_existing"]
    assert any(name.startswith("dt=2024-01-01/part-") for name in written), written
    assert healed == [f"dt={d}/data.csv" for d in sorted(cp.ORDER_ROWS)], healed
    with hive2_client(lake.store.port) as c:
        (source,) = c.get_partitions_by_names(cp.SALES, cp.ORDERS, ["dt=2024-01-01"])
        assert path(source.sd.location) == f"{path(lake.orders_location)}/dt=2024-01-01"


@pytest.mark.spark
def test_prefer_with_partial_refuse_names_the_partition_the_copy_lacks(lake: Lake) -> None:
    lake.up()
    lake.ensure_new_partition()
    proxy = lake.proxy(read_from_copies="prefer", partial="refuse")
    copy_orders = lake.copy_orders
    with proxy.client() as c:
        with pytest.raises(ttypes.MetaException) as refused:
            c.get_partitions("lake_sales", cp.ORDERS, -1)
        assert f"dt={cp.NEW_PARTITION}" in refused.value.message, refused.value.message
        (part,) = c.get_partitions_by_filter("lake_sales", cp.ORDERS, "dt = '2024-01-01'", -1)
        assert path(part.sd.location) == f"{copy_orders}/dt=2024-01-01"  # what it reads, the copy holds
    result = cp.spark_steps(f"thrift://127.0.0.1:{proxy.port}", lake.work / "wh-refuse", [
        ("all", "SELECT count(*) FROM lake_sales.orders"),
        ("pruned", "SELECT id, input_file_name() FROM lake_sales.orders WHERE dt = '2024-01-01' ORDER BY id"),
    ])
    assert "error" in result["all"] and f"dt={cp.NEW_PARTITION}" in result["all"]["error"], result["all"]
    assert [(i, path(f)) for i, f in cp.rows(result, "pruned")] == \
        [(row.split(",")[0], f"{copy_orders}/dt=2024-01-01/data.csv") for row in cp.ORDER_ROWS["2024-01-01"]]


def test_a_copy_older_than_max_staleness_is_not_used(lake: Lake) -> None:
    lake.up()
    wait_for(lambda: time.time() - lake.synced > 2.5, timeout=5)
    proxy = lake.proxy(read_from_copies="prefer", max_staleness=1)
    with proxy.client() as c:
        table = c.get_table("lake_sales", cp.ORDERS)
        assert path(table.sd.location) == path(lake.orders_location)
        _not_served(table.parameters)
        for part in c.get_partitions("lake_sales", cp.ORDERS, -1):
            assert path(part.sd.location).startswith(path(lake.orders_location)), part
            _not_served(part.parameters)
        ice = c.get_table(f"lake_{cp.ICE}", cp.T2)
        assert path(ice.parameters["metadata_location"]).startswith(f"{lake.store.warehouse}/{cp.ICE}.db/")


# -- replicas -----------------------------------------------------------------------------------------------------
def test_a_second_replica_serves_a_copy_made_after_it_started_without_a_reload(lake: Lake) -> None:
    lake.up()
    first = lake.proxy(read_from_copies="prefer")
    second = lake.proxy(read_from_copies="prefer")
    for proc in (first, second):
        with proc.client() as c:
            _not_served(c.get_table("lake_sales", cp.LATER).parameters)
    code, out = lake.sync("--source", "lake", "--tables", f"{cp.SALES}.{cp.LATER}", "--target-database",
                          lake.later_copy, "--mode", "copy")  # no partition: no file to copy, no Spark
    assert code == 0, out
    synced = time.monotonic()

    def served(proc: WaggleProcess) -> bool:
        with proc.client() as c:
            return c.get_table("lake_sales", cp.LATER).parameters.get("waggle.served-from") == \
                f"{lake.later_copy}.{cp.LATER}"

    for proc in (second, first):
        wait_for(lambda p=proc: served(p), timeout=10, message=lambda p=proc: p.log()[-3000:])
    assert time.monotonic() - synced < 1 + 3  # copies-refresh-seconds, and slack
    assert not second.events("config.reloaded") and not first.events("config.reloaded")


def _rest(proc: WaggleProcess, method: str, path: str, **kwargs: Any) -> Any:
    """A request of ``proc``'s Iceberg REST port (open: no clients, no Kerberos)."""
    import requests

    return requests.request(method, f"http://127.0.0.1:{proc.rest_port}{path}", timeout=60,  # type: ignore[attr-defined]
                            **kwargs)


def test_the_iceberg_rest_port_loads_a_down_members_copied_table_and_refuses_writes(lake):
    """``lake``'s Iceberg table ``ice.t2`` copied into the primary by ``waggle sync --mode copy``
    (tests/support/lake.py); with ``read-from-copies: when-down`` and lake stopped, the REST port loads the copy
    and refuses commits to it, naming lake."""
    import pyarrow as pa
    from pyiceberg.exceptions import ForbiddenError, ServiceUnavailableError

    from tests.support.iceberg_rest import rest_catalog
    from waggle.local.jvm import free_port

    rest_port = free_port()
    lake.up()
    proxy = lake.proxy(server=f"iceberg-rest:\n  port: {rest_port}\n", read_from_copies="when-down")
    proxy.rest_port = rest_port  # type: ignore[attr-defined]
    try:
        lake.down(proxy)
        ident = f"lake_{cp.ICE}.{cp.T2}"
        loaded = _rest(proxy, "GET", f"/v1/namespaces/lake_{cp.ICE}/tables/{cp.T2}")
        assert loaded.status_code == 200, loaded.text
        copy_root = f"{lake.copy_root(lake.ice_copy)}/{cp.T2}/metadata/"
        assert path(loaded.json()["metadata-location"]).startswith(copy_root), loaded.json()["metadata-location"]
        with hive2_client(lake.primary.port) as p:
            before = p.get_table(lake.ice_copy, cp.T2).parameters["metadata_location"]
        assert loaded.json()["metadata-location"] == before

        cat = rest_catalog(proxy, credential="")
        table = cat.load_table(ident)
        assert table.metadata_location == before
        assert sorted(table.scan().to_arrow().column("id").to_pylist()) == cp.ICE_IDS
        assert ("lake_ice", cp.T2) in cat.list_tables("lake_ice")

        with pytest.raises((ForbiddenError, ServiceUnavailableError)) as refused:
            table.append(pa.table({"id": pa.array([99], pa.int64()), "day": pa.array(["2026-11-09"], pa.string())}))
        assert "lake" in str(refused.value), refused.value
        commit = _rest(proxy, "POST", f"/v1/namespaces/lake_{cp.ICE}/tables/{cp.T2}", json={
            "requirements": [{"type": "assert-table-uuid", "uuid": str(table.metadata.table_uuid)}],
            "updates": [{"action": "set-properties", "updates": {"k": "v"}}]})
        assert commit.status_code in (403, 503), commit.text
        assert "'lake'" in commit.json()["error"]["message"], commit.text
        dropped = _rest(proxy, "DELETE", f"/v1/namespaces/lake_{cp.ICE}/tables/{cp.T2}")
        assert dropped.status_code in (403, 503) and "'lake'" in dropped.text, dropped.text
        with hive2_client(lake.primary.port) as p:  # the copy is not written, and no lock is left
            assert p.get_table(lake.ice_copy, cp.T2).parameters["metadata_location"] == before
            assert not p.show_locks(ttypes.ShowLocksRequest()).locks
    finally:
        lake.up()
        lake.stop_proxies()
