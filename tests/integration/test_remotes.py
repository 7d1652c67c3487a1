"""Remote databases: users link remote databases from their own SQL, with no YAML edit. Real metastores and Spark.

The federation (PREFIXED): the primary, ``analytics`` (prefix ``analytics_``) and ``ops`` (``ops_``). Both
members hold a database called ``sales``; users link them as ``eu_sales`` and ``us_sales``.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from hmsclient.genthrift.hive_metastore import ttypes as t

from tests.support.audit import audit_count, audit_line
from tests.support.clients import hive2_client
from tests.support.federation import federation_yaml
from tests.support.proxy import WaggleProcess

pytestmark = pytest.mark.integration
HERE = Path(__file__).resolve().parent
SERVER = """\
database-resolution: PREFIXED
remote-databases:
  enabled: true
  allowed-metastores: [analytics, ops]
logging:
  format: json
"""


def federation(primary: Any, analytics: Any, ops: Any) -> str:
    return federation_yaml(primary.uri,
                           "federated-meta-stores:\n"
                           f"  - name: analytics\n    remote-meta-store-uris: {analytics.uri}\n"
                           f"  - name: ops\n    remote-meta-store-uris: {ops.uri}\n"
                           "    access-control-type: READ_AND_WRITE_ON_DATABASE_WHITELIST\n"
                           "    writable-database-white-list: [sales]\n    mapped-databases: [sales, scratch, linky]\n")


@pytest.fixture(scope="module")
def remotes(primary: Any, analytics: Any, ops: Any, federation_data: dict[str, Any],
            tmp_path_factory: pytest.TempPathFactory) -> Any:
    from waggle.hms.gen.hive_metastore import ttypes as own
    from waggle.local.client import hms_client
    from waggle.local.seed import ensure_table

    with hms_client("127.0.0.1", ops.port, timeout=60) as c:
        if "linky" not in c.get_all_databases():  # a link stored in a member (another waggle's): never linkable
            c.create_database(own.Database(name="linky", description="", locationUri=f"file://{ops.warehouse}/linky",
                                         parameters={"waggle.remote.metastore": "x"}))
        ensure_table(c, "sales", "orders", f"file://{ops.warehouse}/sales.db/orders",
                     [("id", "int"), ("customer", "string")], rows=["1,carol", "4,dave"])
    proc = WaggleProcess(tmp_path_factory.mktemp("waggle-remotes"), federation(primary, analytics, ops), SERVER)
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


def link(client: Any, name: str, **properties: str) -> None:
    client.create_database(t.Database(name=name, description="", parameters={
        f"waggle.remote.{k}": v for k, v in properties.items()}))


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def spark_sql(waggle: Any, tmp_path: Path, *queries: str) -> list[list[list[str]]]:
    done = subprocess.run([sys.executable, str(HERE / "spark_query.py"), f"thrift://127.0.0.1:{waggle.port}",
                           str(tmp_path / "warehouse"), *queries], capture_output=True, text=True, timeout=240)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, f"Spark failed:\n{done.stderr[-4000:]}\nwaggle:\n{waggle.log()[-3000:]}"
    return list(json.loads(lines[-1][len("RESULT "):]))


@pytest.mark.spark
def test_two_remote_databases_of_one_name_linked_from_spark_sql_and_joined(remotes, tmp_path):
    eu, us = unique("eu_sales"), unique("us_sales")
    rows = spark_sql(
        remotes, tmp_path,
        f"CREATE DATABASE {eu} WITH DBPROPERTIES ('waggle.remote.metastore'='analytics', "
        "'waggle.remote.database'='sales')",
        f"CREATE DATABASE {us} WITH DBPROPERTIES ('waggle.remote.metastore'='ops', 'waggle.remote.database'='sales')",
        "SHOW DATABASES",
        f"SHOW TABLES IN {eu}",
        f"SELECT e.customer, u.customer FROM {eu}.orders e JOIN {us}.orders u ON e.id = u.id",
        f"DESCRIBE DATABASE EXTENDED {eu}",
        f"CREATE VIEW default.{eu}_view AS SELECT id FROM {eu}.orders WHERE id > 1",
        f"SELECT * FROM default.{eu}_view ORDER BY id",
    )
    databases = {r[0] for r in rows[2]}
    assert {eu, us, "analytics_sales", "ops_sales"} <= databases
    assert "orders" in {r[1] for r in rows[3]}
    assert rows[4] == [["alice", "carol"]]
    described = {r[0]: r[1] for r in rows[5]}
    assert described["Namespace Name"] == eu
    assert "[waggle link to database 'sales' of metastore 'analytics']" in described["Comment"]
    assert "waggle.remote.via" in described["Properties"] and "thrift://127.0.0.1:" in described["Properties"]
    assert rows[7] == [["2"], ["3"]]
    with hive2_client(remotes.port) as c:
        table = c.get_table(eu, "orders")
        assert table.dbName == eu and table.sd.location.endswith("sales.db/orders")
        c.drop_table("default", f"{eu}_view", True)


def test_a_link_is_read_only_and_a_refused_write_never_reaches_the_remote(remotes, analytics):
    name = unique("ro_sales")
    with hive2_client(remotes.port) as c:
        link(c, name, metastore="analytics", database="sales")
        before = audit_count(analytics, "cmd=source:127.0.0.1 create_table")
        drops = audit_count(analytics, "drop_table")
        table = c.get_table(name, "orders")
        table.tableName = "sneaky"
        with pytest.raises(t.MetaException, match=rf"create_table refused: database '{name}' is a link to "
                                                  r"database 'sales' of metastore 'analytics', and linked databases "
                                                  r"are read-only \(remote-databases.access\)"):
            c.create_table(table)
        with pytest.raises(t.MetaException, match=r"nothing dropped: .* read-only .*the remote table stays"):
            c.drop_table(name, "orders", False)
        assert c.get_table(name, "orders").tableName == "orders"
        marker = unique("marker")
        with pytest.raises(t.NoSuchObjectException):
            c.get_table(name, marker)  # reaches analytics after anything the refused calls could have sent
    audit_line(analytics, rf"get_table : db=sales tbl={marker}\b")
    assert audit_count(analytics, "cmd=source:127.0.0.1 create_table") == before
    assert audit_count(analytics, "drop_table") == drops


def test_dropping_a_link_drops_only_the_link(remotes, analytics):
    name = unique("gone_sales")
    drops = audit_count(analytics, "drop_database") + audit_count(analytics, "drop_table")
    with hive2_client(remotes.port) as c:
        link(c, name, metastore="analytics", database="sales")
        assert c.get_table(name, "orders").dbName == name
        c.drop_database(name, True, True)  # CASCADE
        assert name not in c.get_all_databases()
        with pytest.raises(t.NoSuchObjectException):
            c.get_database(name)
        assert c.get_table("analytics_sales", "orders").tableName == "orders"
    assert audit_count(analytics, "drop_database") + audit_count(analytics, "drop_table") == drops
    assert remotes.events("link.dropped")[-1]["database"] == name


def test_a_stock_clients_drop_database_cascade_unlinks_and_drops_nothing_remote(remotes, analytics):
    # Hive 2.3's HiveMetaStoreClient.dropDatabase(name, deleteData, ignoreUnknownDb, cascade) with cascade: it reads
    # the database (getDatabase), lists its tables itself (getAllTables), drops each one with
    # dropTable(db, table, deleteData, ignoreUnknownTab=true) -- getTable, then drop_table_with_environment_context,
    # a NoSuchObjectException ignored -- and only then calls drop_database. Replayed call for call.
    name = unique("cascade_sales")
    drops = audit_count(analytics, "drop_database") + audit_count(analytics, "drop_table")
    with hive2_client(remotes.port) as c:
        link(c, name, metastore="analytics", database="sales")
        assert c.get_database(name).name == name
        tables = c.get_all_tables(name)
        assert "orders" in tables
        for table in tables:
            assert c.get_table(name, table).tableName == table
            with pytest.raises(t.NoSuchObjectException):  # ignored by the client (ignoreUnknownTab)
                c.drop_table_with_environment_context(name, table, True, None)
        c.drop_database(name, True, True)
        # outside such a sequence, a table drop is a MetaException that says why
        other = unique("cascade_other")
        link(c, other, metastore="analytics", database="sales")
        assert c.get_table(other, "orders").tableName == "orders"
        with pytest.raises(t.MetaException, match="nothing dropped"):
            c.drop_table_with_environment_context(other, "orders", True, None)
        c.drop_database(other, True, True)
        assert name not in c.get_all_databases()
        assert set(tables) <= set(c.get_all_tables("analytics_sales"))  # every remote table is still there
    assert audit_count(analytics, "drop_database") + audit_count(analytics, "drop_table") == drops


@pytest.mark.spark
def test_spark_drop_database_cascade_of_a_link_unlinks_and_drop_table_says_why(remotes, analytics, tmp_path):
    name = unique("spark_gone")
    drops = audit_count(analytics, "drop_database") + audit_count(analytics, "drop_table")
    done = subprocess.run([sys.executable, str(HERE / "spark_query.py"), f"thrift://127.0.0.1:{remotes.port}",
                           str(tmp_path / "warehouse"),
                           f"CREATE DATABASE {name} WITH DBPROPERTIES ('waggle.remote.metastore'='analytics', "
                           "'waggle.remote.database'='sales')",
                           f"DROP TABLE {name}.orders"], capture_output=True, text=True, timeout=240)
    assert "nothing dropped" in done.stdout + done.stderr and "the remote table stays" in done.stdout + done.stderr, \
        done.stderr[-3000:]
    rows = spark_sql(remotes, tmp_path, f"SELECT count(*) FROM {name}.orders", f"DROP DATABASE {name} CASCADE",
                     "SHOW DATABASES")
    assert int(rows[0][0][0]) > 0
    assert name not in {r[0] for r in rows[2]}
    with hive2_client(remotes.port) as c:
        assert "orders" in c.get_all_tables("analytics_sales")
    assert audit_count(analytics, "drop_database") + audit_count(analytics, "drop_table") == drops


def test_operators_see_links_with_their_health(remotes, ops):
    name = unique("seen_sales")
    with hive2_client(remotes.port) as c:
        link(c, name, metastore="ops", database="sales")
        parameters = c.get_database(name).parameters
    assert parameters["waggle.remote.via"] == ops.uri and parameters["waggle.remote.metastore"] == "ops"
    view = json.loads(remotes.http("/api/admin/federations"))
    mine = [entry for entry in view["links"] if entry["name"] == name]
    assert mine == [{"name": name, "metastore": "ops", "uri": None, "database": "sales",
                     "status": mine[0]["status"]}] and mine[0]["status"]["up"] is True
    assert (remotes.metric("waggle_links", metastore="ops") or 0) >= 1


def test_only_the_allowed_users_create_links(primary, analytics, ops, federation_data, tmp_path):
    server = SERVER.replace("allowed-metastores: [analytics, ops]",
                            "allowed-metastores: [analytics]\n  allowed-users: [etl]\n  allowed-groups: [admins]")
    proc = WaggleProcess(tmp_path / "w", federation(primary, analytics, ops), server).start()
    try:
        with hive2_client(proc.port) as c:
            with pytest.raises(t.MetaException, match=r"without a user .* is not in remote-databases.allowed-users"):
                link(c, unique("anon"), metastore="analytics", database="sales")
            c.set_ugi("bob", ["staff"])
            with pytest.raises(t.MetaException, match=r"user 'bob' is not in remote-databases.allowed-users"):
                link(c, unique("bobs"), metastore="analytics", database="sales")
        with hive2_client(proc.port) as c:
            c.set_ugi("carol", ["admins"])
            name = unique("carols")
            link(c, name, metastore="analytics", database="sales")
            c.drop_database(name, True, True)
    finally:
        proc.stop()


@pytest.mark.parametrize(("properties", "message"), [
    ({"metastore": "nowhere"}, "waggle.remote.metastore names 'nowhere', which is not a federated metastore"),
    ({"metastore": "analytics", "database": "no_such_db"},
     "there is no database 'no_such_db' of metastore 'analytics'"),
    ({"uris": "thrift//broken"}, "is not a thrift://host:port URI"),
    ({"metastore": "primary"}, "which is not a federated metastore (the primary's databases need no link)"),
    ({"metastore": "analytics", "uris": "thrift://h:1"}, "not both"),
    ({"metastore": "analytics", "colour": "red"}, "unknown link property waggle.remote.colour"),
])
def test_bad_links_are_refused_and_nothing_is_created(remotes, primary, properties, message):
    name = unique("bad")
    with hive2_client(remotes.port) as c:
        with pytest.raises(t.MetaException) as err:
            link(c, name, **properties)
        assert message in err.value.message
        assert name not in c.get_all_databases()
    with hive2_client(primary.port) as direct:
        assert name not in direct.get_all_databases()


def test_names_that_clash_and_links_to_links_are_refused(remotes):
    first = unique("first")
    with hive2_client(remotes.port) as c:
        link(c, first, metastore="analytics", database="sales")
        with pytest.raises(t.MetaException, match="is already a link"):
            link(c, first, metastore="ops", database="sales")
        with pytest.raises(t.MetaException, match="carries the prefix 'analytics_' of metastore 'analytics'"):
            link(c, "analytics_new", metastore="ops", database="sales")
        with pytest.raises((t.MetaException, t.AlreadyExistsException)):
            link(c, "default", metastore="ops", database="sales")
        with pytest.raises(t.MetaException, match="'telemetry' of metastore 'ops' is hidden by its mapped-databases"):
            link(c, unique("hidden"), metastore="ops", database="telemetry")
        with pytest.raises(t.MetaException, match="'linky' of metastore 'ops' is itself a link"):
            link(c, unique("chain"), metastore="ops", database="linky")
        c.drop_database(first, True, True)


def test_a_refused_uri_is_never_connected_to(remotes):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(5)
    listener.settimeout(0.2)
    seen: list[Any] = []

    def watch() -> None:
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            try:
                seen.append(listener.accept())
            except TimeoutError:
                pass

    watcher = threading.Thread(target=watch)
    watcher.start()
    uri = f"thrift://127.0.0.1:{listener.getsockname()[1]}"
    with hive2_client(remotes.port) as c, pytest.raises(t.MetaException,
                                                        match=r"matches no pattern of remote-databases.allowed-uris"):
        link(c, unique("elsewhere"), uris=uri, database="sales")
    watcher.join()
    listener.close()
    assert seen == []


def test_a_second_waggle_sees_a_new_link_at_once_and_links_survive_a_restart(remotes, primary, analytics, ops,
                                                                             tmp_path):
    other = WaggleProcess(tmp_path / "other", federation(primary, analytics, ops), SERVER).start()
    try:
        with hive2_client(other.port) as o:
            o.get_all_databases()  # the second waggle is up and has read the links it had
        name = unique("shared_sales")
        with hive2_client(remotes.port) as c:
            link(c, name, metastore="analytics", database="sales")
        with hive2_client(other.port) as o:  # no reload, no wait
            assert o.get_table(name, "orders").dbName == name
    finally:
        other.stop()
    again = WaggleProcess(tmp_path / "again", federation(primary, analytics, ops), SERVER).start()
    try:
        with hive2_client(again.port) as o:
            assert o.get_database(name).description.endswith("[waggle link to database 'sales' of metastore "
                                                              "'analytics']")
    finally:
        again.stop()


def test_a_primary_database_the_policy_forbids_is_served_as_a_plain_one(remotes, primary, analytics, ops, tmp_path):
    name = unique("forbidden")
    with hive2_client(primary.port) as direct:  # written behind waggle's back, naming a member not allowed
        link(direct, name, metastore="analytics", database="sales")
    strict = SERVER.replace("allowed-metastores: [analytics, ops]", "allowed-metastores: [ops]")
    other = WaggleProcess(tmp_path / "strict", federation(primary, analytics, ops), strict).start()
    try:
        with hive2_client(other.port) as o:
            assert o.get_all_tables(name) == []  # the primary's own (empty) database, not analytics' sales
            assert o.get_all_tables(name) == []
        refused = [e for e in other.events("link.refused") if e["database"] == name]
        assert len(refused) == 1 and "not in remote-databases.allowed-metastores" in refused[0]["reason"]
    finally:
        other.stop()


def test_a_hive4_connector_and_remote_database(remotes, analytics, primary):
    """Hive 4's CREATE CONNECTOR ... TYPE 'hivemetastore' and CREATE REMOTE DATABASE ... USING, as a Hive 4 client
    sends them (waggle's own IDL), over a Hive 2.3 primary."""
    from waggle.hms.gen.hive_metastore import ttypes as h4
    from waggle.local.client import hms_client

    connector, name = unique("eu"), unique("remote_sales")
    with hms_client("127.0.0.1", remotes.port, timeout=60) as c:
        c.create_dataconnector_req(h4.CreateDataConnectorRequest(connector=h4.DataConnector(
            name=connector, type="hivemetastore", url=analytics.uri, description="the EU cluster")))
        assert connector in c.get_dataconnectors()
        got = c.get_dataconnector_req(h4.GetDataConnectorRequest(connectorName=connector))
        assert (got.type, got.url, got.description) == ("hivemetastore", analytics.uri, "the EU cluster")
        with pytest.raises(h4.MetaException, match="type 'hivemetastore' only, not 'mysql'"):
            c.create_dataconnector_req(h4.CreateDataConnectorRequest(connector=h4.DataConnector(
                name=unique("jdbc"), type="mysql", url="jdbc:mysql://db/x")))
        c.create_database_req(h4.CreateDatabaseRequest(
            databaseName=name, type=h4.DatabaseType.REMOTE, dataConnectorName=connector,
            parameters={"connector.remoteDbName": "sales"}))
        database = c.get_database(name)
        assert (database.type, database.connector_name, database.remote_dbname) == (
            h4.DatabaseType.REMOTE, connector, "sales")
        assert c.get_table(name, "orders").dbName == name
        with pytest.raises(h4.MetaException, match="there is no data connector"):
            c.create_database_req(h4.CreateDatabaseRequest(
                databaseName=unique("nothing"), type=h4.DatabaseType.REMOTE, dataConnectorName="missing"))
    with hive2_client(remotes.port) as old:  # a Hive 2 client sees an ordinary database
        assert old.get_table(name, "orders").dbName == name
        assert "waggle link" in old.get_database(name).description
    with hms_client("127.0.0.1", primary.port, timeout=60) as direct:  # stored as a plain database, with the link
        stored = direct.get_database(name)
        assert stored.parameters["waggle.remote.connector"] == connector and stored.type is None
    with hms_client("127.0.0.1", remotes.port, timeout=60) as c:
        c.drop_database(name, True, True)
        c.drop_dataconnector_req(h4.DropDataConnectorRequest(connectorName=connector))
        assert connector not in c.get_dataconnectors()


def test_a_link_by_uri_where_the_policy_allows_it(primary, analytics, ops, federation_data, tmp_path):
    """No federation member needed: the policy's allowed-uris let users link a metastore by its thrift:// URI."""
    server = SERVER.replace("allowed-metastores: [analytics, ops]",
                            "allowed-metastores: [analytics]\n  allowed-uris: ['thrift://127[.]0[.]0[.]1:[0-9]+']")
    only_primary = f"primary-meta-store:\n  name: primary\n  remote-meta-store-uris: {primary.uri}\n" \
                   "  access-control-type: READ_AND_WRITE_AND_CREATE\n" \
                   f"federated-meta-stores:\n  - name: analytics\n    remote-meta-store-uris: {analytics.uri}\n"
    proc = WaggleProcess(tmp_path / "w", only_primary, server).start()
    name = unique("by_uri")
    try:
        with hive2_client(proc.port) as c:
            link(c, name, uris=ops.uri, database="sales")
            assert c.get_table(name, "orders").dbName == name
            assert f"[waggle link to database 'sales' of the metastore at {ops.uri}]" in \
                c.get_database(name).description
            assert name in c.get_all_databases() and "ops_sales" not in c.get_all_databases()
            with pytest.raises(t.MetaException, match="read-only"):
                c.drop_table(name, "orders", False)
            with pytest.raises(t.MetaException, match="there is no database 'nope' of the metastore at"):
                link(c, unique("nope"), uris=ops.uri, database="nope")
            c.drop_database(name, True, True)
        assert audit_count(ops, "get_table : db=sales tbl=orders") >= 1
    finally:
        proc.stop()


@pytest.mark.spark
def test_a_remote_table_under_a_local_name_from_spark_sql(remotes, analytics, tmp_path):
    name = unique("eu_daily")
    writes = audit_count(analytics, "add_partition") + audit_count(analytics, "drop_table")
    rows = spark_sql(
        remotes, tmp_path,
        f"CREATE TABLE default.{name} (ignored INT) TBLPROPERTIES ('waggle.remote.metastore'='analytics', "
        "'waggle.remote.database'='sales', 'waggle.remote.table'='daily')",
        f"SHOW PARTITIONS default.{name}",
        f"DESCRIBE TABLE default.{name}",
        f"SELECT COUNT(*) FROM default.{name}",
    )
    assert len(rows[1]) == 5  # the remote table's five partitions
    columns = [r[0] for r in rows[2]]
    assert "ignored" not in columns  # its schema is the remote table's, not the stub's
    with hive2_client(remotes.port) as c:
        table = c.get_table("default", name)
        assert (table.dbName, table.tableName) == ("default", name) and "sales.db/daily" in table.sd.location
        parts = c.get_partitions("default", name, -1)
        assert len(parts) == 5 and {(p.dbName, p.tableName) for p in parts} == {("default", name)}
        with pytest.raises(t.MetaException, match=rf"table 'default.{name}' is a link to table 'sales.daily' of "
                                                  r"metastore 'analytics', and links are read-only"):
            c.add_partition(parts[0])
        with pytest.raises(t.MetaException, match=r"there is no table 'sales[.]nope' of metastore 'analytics'"):
            c.create_table(t.Table(dbName="default", tableName=unique("nope"), sd=table.sd, partitionKeys=[],
                                   parameters={"waggle.remote.metastore": "analytics",
                                               "waggle.remote.database": "sales", "waggle.remote.table": "nope"}))
        c.drop_table("default", name, True)
        with pytest.raises(t.NoSuchObjectException):
            c.get_table("default", name)
        assert c.get_table("analytics_sales", "daily").tableName == "daily"
    assert audit_count(analytics, "add_partition") + audit_count(analytics, "drop_table") == writes


def test_an_iceberg_table_in_a_linked_database_reads_through_the_link(remotes, analytics, tmp_path):
    import pyarrow as pa
    from pyiceberg.catalog import load_catalog
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField

    namespace, name = unique("ice"), unique("ice_link")
    direct = load_catalog("analytics", type="hive", uri=analytics.uri, warehouse=f"file://{analytics.warehouse}")
    direct.create_namespace(namespace)
    table = direct.create_table(f"{namespace}.events", schema=Schema(NestedField(1, "id", LongType(),
                                                                                 required=False)))
    table.append(pa.table({"id": pa.array([1, 2, 3], pa.int64())}))
    with hive2_client(remotes.port) as c:
        link(c, name, metastore="analytics", database=namespace)
    through = load_catalog("waggle", type="hive", uri=f"thrift://127.0.0.1:{remotes.port}",
                           warehouse=f"file://{tmp_path}")
    assert (name, "events") in through.list_tables(name)
    linked = through.load_table(f"{name}.events")
    assert sorted(linked.scan().to_arrow().column("id").to_pylist()) == [1, 2, 3]
    assert linked.metadata_location == direct.load_table(f"{namespace}.events").metadata_location
