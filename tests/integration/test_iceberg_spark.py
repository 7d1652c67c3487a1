"""Spark with Apache Iceberg's runtime through waggle, in one Spark session (one JVM) for the whole module.

The Thrift door: Iceberg's Java ``HiveCatalog`` (catalog ``lake``) on the primary, on a writable member behind its
prefix, and refused on a read-only member before its metastore sees anything.

The REST door: Iceberg's own ``RESTCatalog`` (Java; over the JDK's HTTP client, see ``java/IcebergJdkRest.java``)
through waggle's Iceberg REST port: create, insert, select, evolve, create-as-select and drop, on the primary and on
a federated member (``ops_scratch``), and the Thrift door (Iceberg's Java ``HiveCatalog`` in the same Spark session)
reading the same rows of the same tables. Its catalogs: ``rest`` (the REST port, no warehouse: the whole
federation), ``opsrest`` (the REST port with ``warehouse=ops``: that member alone) and ``thrift`` (waggle's Thrift
port, like ``lake`` but reading the catalog on each query, so that one door sees the other's commits).

One waggle serves both doors (its Thrift port and its REST port), and one Spark session runs every step: a Spark
session's start is the longest part of these tests."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.clients import hive2_client
from tests.support.env import java_available, require
from tests.support.iceberg_rest import CLIENT_ID, CLIENT_SECRET, start_rest_waggle
from tests.support.proxy import WaggleProcess

pytestmark = [pytest.mark.integration, pytest.mark.spark]
TABLE = f"spark_ice_{uuid.uuid4().hex[:6]}"
#: the table the REST door's steps make
REST_TABLE = f"rest_spark_{uuid.uuid4().hex[:6]}"
#: the name prefix of the REST door's steps in the one session's results
REST = "rest/"


@pytest.fixture(scope="module")
def iceberg_waggle(primary: Any, analytics: Any, ops: Any, federation_data: dict[str, Any],
                   tmp_path_factory: pytest.TempPathFactory) -> Iterator[WaggleProcess]:
    """waggle in PREFIXED mode over the session's federation (and a member that never answers), with its Iceberg
    REST port and the REST client, logging every call (as the session's ``waggle`` does) and streaming its long
    replies (as that one does too)."""
    proc = start_rest_waggle(tmp_path_factory.mktemp("iceberg-spark-waggle"), primary.uri, analytics.uri, ops.uri,
                             extra="logging:\n  level: debug\nlimits:\n  stream-replies-after-bytes: 1024\n")
    yield proc
    proc.stop()


# -- the Thrift door's steps ------------------------------------------------------------------------------------
def _writes(db: str) -> list[tuple[str, str]]:
    t = f"lake.{db}.{TABLE}"
    return [
        (f"{db}:create", f"CREATE TABLE {t} (id bigint, name string, day date) USING iceberg PARTITIONED BY (day)"),
        (f"{db}:insert", f"INSERT INTO {t} VALUES (1, 'a', date'2026-11-01'), (2, 'b', date'2026-11-02'), "
                         "(3, 'c', date'2026-11-02')"),
        (f"{db}:update", f"UPDATE {t} SET name = 'B' WHERE id = 2"),
        (f"{db}:merge", f"MERGE INTO {t} t USING (SELECT 3L AS id, 'C' AS name, date'2026-11-02' AS day UNION ALL "
                        "SELECT 4L, 'd', date'2026-11-03') s ON t.id = s.id "
                        "WHEN MATCHED THEN UPDATE SET t.name = s.name WHEN NOT MATCHED THEN INSERT *"),
        (f"{db}:delete", f"DELETE FROM {t} WHERE id = 1"),
        (f"{db}:add_column", f"ALTER TABLE {t} ADD COLUMN score double"),
        (f"{db}:insert_more", f"INSERT INTO {t} VALUES (5, 'e', date'2026-11-03', 0.5)"),
        (f"{db}:select", f"SELECT id, name, score FROM {t} ORDER BY id"),
        (f"{db}:snapshots", f"SELECT operation FROM {t}.snapshots ORDER BY committed_at"),
        (f"{db}:files", f"SELECT file_path FROM {t}.files"),
        (f"{db}:history", f"SELECT count(*) FROM {t}.history"),
        (f"{db}:tables", f"SHOW TABLES IN lake.{db}"),
    ]


def _thrift_steps(db: str) -> list[tuple[str, str]]:
    return [("namespace", f"CREATE NAMESPACE lake.{db}"), *_writes(db), *_writes("ops_scratch"),
            ("read_only:select", f"SELECT count(*) FROM lake.analytics_sales.{TABLE}"),
            ("read_only:insert", f"INSERT INTO lake.analytics_sales.{TABLE} VALUES (9)"),
            ("read_only:create", f"CREATE TABLE lake.analytics_sales.{TABLE}_new (id bigint) USING iceberg"),
            ("read_only:namespace", "CREATE NAMESPACE lake.analytics_iceberg")]


# -- the REST door's steps --------------------------------------------------------------------------------------
def _rest_case(case: str, rest_cat: str, ns: str) -> list[tuple[str, str]]:
    t, thrift, ctas = f"{rest_cat}.{ns}.{REST_TABLE}", f"thrift.{ns}.{REST_TABLE}", f"{rest_cat}.{ns}.{REST_TABLE}_ctas"
    return [
        (f"{case}:create", f"CREATE TABLE {t} (id bigint, name string) USING iceberg"),
        (f"{case}:insert", f"INSERT INTO {t} VALUES (1, 'a'), (2, 'b')"),
        (f"{case}:add_column", f"ALTER TABLE {t} ADD COLUMN score double"),
        (f"{case}:insert_more", f"INSERT INTO {t} VALUES (3, 'c', 0.5)"),
        (f"{case}:select", f"SELECT id, name, score FROM {t} ORDER BY id"),
        (f"{case}:snapshots", f"SELECT operation FROM {t}.snapshots ORDER BY committed_at"),
        (f"{case}:tables", f"SHOW TABLES IN {rest_cat}.{ns}"),
        # the Thrift door, in the same session: the same rows, the same snapshots
        (f"{case}:thrift_select", f"SELECT id, name, score FROM {thrift} ORDER BY id"),
        (f"{case}:thrift_snapshots", f"SELECT snapshot_id FROM {thrift}.snapshots ORDER BY committed_at"),
        (f"{case}:rest_snapshot_ids", f"SELECT snapshot_id FROM {t}.snapshots ORDER BY committed_at"),
        # and a write through the Thrift door that the REST door then reads
        (f"{case}:thrift_insert", f"INSERT INTO {thrift} VALUES (4, 'd', 1.5)"),
        (f"{case}:select_after_thrift", f"SELECT count(*), sum(id) FROM {t}"),
        # create-as-select: Spark stages the create and commits it (``assert-create``) once the rows are written
        (f"{case}:ctas", f"CREATE TABLE {ctas} USING iceberg AS SELECT id, name FROM {t} WHERE id > 1"),
        (f"{case}:ctas_select", f"SELECT id FROM {ctas} ORDER BY id"),
        (f"{case}:ctas_thrift", f"SELECT count(*) FROM thrift.{ns}.{REST_TABLE}_ctas"),
        (f"{case}:drop_ctas", f"DROP TABLE {ctas}"),
        (f"{case}:tables_after_drop", f"SHOW TABLES IN {rest_cat}.{ns}"),
    ]


def _rest_steps(db: str) -> list[tuple[str, str]]:
    steps = [("namespace", f"CREATE NAMESPACE rest.{db}"), ("namespaces", "SHOW NAMESPACES IN rest"),
             ("ops_namespaces", "SHOW NAMESPACES IN opsrest"),
             *_rest_case("primary", "rest", db), *_rest_case("member", "opsrest", "ops_scratch"),
             ("primary:drop", f"DROP TABLE rest.{db}.{REST_TABLE}"),
             ("member:drop", f"DROP TABLE opsrest.ops_scratch.{REST_TABLE}"),
             ("primary:thrift_after_drop", f"SHOW TABLES IN thrift.{db}"),
             ("member:thrift_after_drop", "SHOW TABLES IN thrift.ops_scratch"),
             ("drop_namespace", f"DROP NAMESPACE rest.{db}")]
    return [(REST + name, sql) for name, sql in steps]


@pytest.fixture(scope="module")
def spark_session_run(iceberg_waggle: WaggleProcess, analytics: Any, tmp_path_factory: pytest.TempPathFactory
                      ) -> dict[str, Any]:
    """Every step of the module in one Spark session: the Thrift door's, then (when Iceberg's REST classes can be
    run) the REST door's, named ``rest/<step>``."""
    from tests.support import iceberg_spark

    require(java_available(), "Java 17 is needed for Spark")
    require(iceberg_spark.available(), "Spark with Iceberg's runtime is not prepared (scripts/iceberg_spark.sh)")
    db, rest_db = f"ice_{uuid.uuid4().hex[:6]}", f"rest_{uuid.uuid4().hex[:6]}"
    warehouse = tmp_path_factory.mktemp("iceberg-warehouse")
    _seed_read_only_iceberg_table(analytics)
    steps = _thrift_steps(db)
    catalogs: dict[str, dict[str, str]] = {}
    jars: tuple[Path, ...] = ()
    rest_ready = iceberg_spark.rest_jars() is not None
    if rest_ready:
        thrift_uri = f"thrift://127.0.0.1:{iceberg_waggle.port}"
        rest_warehouse = tmp_path_factory.mktemp("rest-spark-warehouse")
        uri = f"http://127.0.0.1:{iceberg_waggle.rest_port}"  # type: ignore[attr-defined]
        credential = f"{CLIENT_ID}:{CLIENT_SECRET}"
        no_cache = {"cache-enabled": "false"}  # each query reads the catalog, so one door sees the other's commits
        # Iceberg's RESTCatalog (``type=rest``) over the JDK's HTTP client: java/IcebergJdkRest.java says why
        jars = (iceberg_spark.compile_java(tmp_path_factory.mktemp("rest-spark-classes") / "classes"),)
        rest_props = {"catalog-impl": iceberg_spark.REST_CATALOG_IMPL, "uri": uri, "credential": credential,
                      **no_cache}
        catalogs = {"rest": rest_props, "opsrest": {**rest_props, "warehouse": "ops"},
                    "thrift": {"type": "hive", "uri": thrift_uri, "warehouse": f"file://{rest_warehouse}", **no_cache}}
        steps += _rest_steps(rest_db)
    since = len(iceberg_waggle.log())
    result = iceberg_spark.run_steps(f"thrift://127.0.0.1:{iceberg_waggle.port}", f"file://{warehouse}", steps,
                                     catalogs=catalogs, jars=jars)
    result["_db"], result["_rest_db"], result["_rest_ready"] = db, rest_db, rest_ready
    result["_analytics_calls"] = [e for e in iceberg_waggle.events("call", since) if e.get("metastore") == "analytics"]
    return result


@pytest.fixture(scope="module")
def spark_run(spark_session_run: dict[str, Any]) -> dict[str, Any]:
    """The Thrift door's steps."""
    return spark_session_run


@pytest.fixture(scope="module")
def rest_run(spark_session_run: dict[str, Any]) -> dict[str, Any]:
    """The REST door's steps, by their own names."""
    require(spark_session_run["_rest_ready"],
            "Iceberg's REST classes need HttpCore 5 (apt-get install libhttpcore5-java) and jarjar")
    run = {name[len(REST):]: value for name, value in spark_session_run.items() if name.startswith(REST)}
    run["_db"] = spark_session_run["_rest_db"]
    return run


def _seed_read_only_iceberg_table(analytics: Any) -> None:
    """An Iceberg table with one row, written straight into the read-only member."""
    import pyarrow as pa
    from pyiceberg.catalog import load_catalog

    cat = load_catalog("direct", type="hive", uri=analytics.uri, warehouse=f"file://{analytics.warehouse}")
    table = cat.create_table(f"sales.{TABLE}", schema=pa.schema([("id", pa.int64())]))
    table.append(pa.table({"id": pa.array([1], pa.int64())}))


def _ok(run: dict[str, Any], step: str) -> list[list[str | None]]:
    assert "error" not in run[step], (step, run[step])
    rows: list[list[str | None]] = run[step]["rows"]
    return rows


# -- the Thrift door ------------------------------------------------------------------------------------------
EXPECTED_ROWS = [["2", "B", None], ["3", "C", None], ["4", "d", None], ["5", "e", "0.5"]]


@pytest.mark.parametrize("where", ["primary", "member"])
def test_spark_iceberg_writes_merges_and_reads_through_waggle(spark_run: dict[str, Any], where: str) -> None:
    db = spark_run["_db"] if where == "primary" else "ops_scratch"
    for step in ("create", "insert", "update", "merge", "delete", "add_column", "insert_more"):
        assert "error" not in spark_run[f"{db}:{step}"], spark_run[f"{db}:{step}"]
    assert spark_run[f"{db}:select"]["rows"] == EXPECTED_ROWS
    operations = [r[0] for r in spark_run[f"{db}:snapshots"]["rows"]]
    assert operations == ["append", "overwrite", "overwrite", "delete", "append"], operations
    assert spark_run[f"{db}:files"]["rows"] and spark_run[f"{db}:history"]["rows"] == [["5"]]
    assert [TABLE] in [r[1:2] for r in spark_run[f"{db}:tables"]["rows"]]


def test_the_tables_live_where_their_database_does(spark_run: dict[str, Any], primary: Any, ops: Any) -> None:
    db = spark_run["_db"]
    files = {r[0] for r in spark_run[f"{db}:files"]["rows"] + spark_run["ops_scratch:files"]["rows"]}
    with hive2_client(primary.port) as c:
        own = c.get_table(db, TABLE).parameters
        assert TABLE not in c.get_all_tables("default")
    with hive2_client(ops.port) as c:
        member = c.get_table("scratch", TABLE).parameters  # under the member's own name, no prefix
    for params in (own, member):
        assert params["table_type"].upper() == "ICEBERG"
        assert params["metadata_location"].split("/")[-1].startswith("00006-")  # 7 commits, all relayed
    assert files


def test_a_read_only_member_is_read_and_its_writes_fail_at_once(spark_run: dict[str, Any]) -> None:
    """Iceberg's Java client retries any error from ``lock`` for minutes; waggle answers a refused lock as one not
    acquired, so the commit fails at once and no write reaches the member."""
    assert spark_run["read_only:select"]["rows"] == [["1"]]
    insert = spark_run["read_only:insert"]
    assert "lock request ended in state NOT_ACQUIRED" in insert["error"], insert
    assert "analytics_sales" in insert["error"] and insert["seconds"] < 30
    # Iceberg reports any failed commit of a new table as "created concurrently"
    create = spark_run["read_only:create"]
    assert "already exists" in create["error"] and create["seconds"] < 30, create
    assert "databases can only be created in the primary metastore" in spark_run["read_only:namespace"]["error"]
    reached = {e["method"] for e in spark_run["_analytics_calls"]}
    assert reached and reached <= {"get_table", "get_database", "get_table_objects_by_name", "show_locks",
                                   "get_all_tables", "get_all_databases", "get_databases"}, reached


# -- the REST door ----------------------------------------------------------------------------------------------
def test_the_rest_catalogs_see_their_namespaces(rest_run: dict[str, Any]) -> None:
    _ok(rest_run, "namespace")
    everything = {r[0] for r in _ok(rest_run, "namespaces")}
    assert {rest_run["_db"], "ops_scratch", "analytics_sales"} <= everything, everything
    only_ops = {r[0] for r in _ok(rest_run, "ops_namespaces")}
    assert "ops_scratch" in only_ops and not any(str(n).startswith("analytics_") for n in only_ops), only_ops
    assert rest_run["_db"] not in only_ops


@pytest.mark.parametrize("case", ["primary", "member"])
def test_spark_writes_through_the_rest_port_and_the_thrift_door_agrees(rest_run: dict[str, Any], case: str) -> None:
    for step in ("create", "insert", "add_column", "insert_more"):
        _ok(rest_run, f"{case}:{step}")
    expected = [["1", "a", None], ["2", "b", None], ["3", "c", "0.5"]]
    assert _ok(rest_run, f"{case}:select") == expected
    assert [r[0] for r in _ok(rest_run, f"{case}:snapshots")] == ["append", "append"]
    assert [REST_TABLE] in [r[1:2] for r in _ok(rest_run, f"{case}:tables")]
    # the Thrift door reads the same table: its rows and its snapshots, one for one
    assert _ok(rest_run, f"{case}:thrift_select") == expected
    assert _ok(rest_run, f"{case}:thrift_snapshots") == _ok(rest_run, f"{case}:rest_snapshot_ids")
    _ok(rest_run, f"{case}:thrift_insert")
    assert _ok(rest_run, f"{case}:select_after_thrift") == [["4", "10"]]


@pytest.mark.parametrize("case", ["primary", "member"])
def test_create_as_select_and_drop_through_the_rest_port(rest_run: dict[str, Any], case: str) -> None:
    _ok(rest_run, f"{case}:ctas")
    assert _ok(rest_run, f"{case}:ctas_select") == [["2"], ["3"], ["4"]]
    assert _ok(rest_run, f"{case}:ctas_thrift") == [["3"]]
    _ok(rest_run, f"{case}:drop_ctas")
    assert [f"{REST_TABLE}_ctas"] not in [r[1:2] for r in _ok(rest_run, f"{case}:tables_after_drop")]
    _ok(rest_run, f"{case}:drop")
    assert [REST_TABLE] not in [r[1:2] for r in _ok(rest_run, f"{case}:thrift_after_drop")]


def test_the_tables_lived_in_their_own_metastores(rest_run: dict[str, Any], primary: Any, ops: Any) -> None:
    """Dropped through REST, each table is gone from the metastore that held it, under its own name."""
    _ok(rest_run, "drop_namespace")
    with hive2_client(primary.port) as c:
        assert rest_run["_db"] not in c.get_all_databases()
    with hive2_client(ops.port) as c:
        names = c.get_all_tables("scratch")
    assert REST_TABLE not in names and f"{REST_TABLE}_ctas" not in names
