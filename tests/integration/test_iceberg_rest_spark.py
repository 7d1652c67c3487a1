"""Spark SQL with Apache Iceberg's own ``RESTCatalog`` (Java; over the JDK's HTTP client, see
``java/IcebergJdkRest.java``) through waggle's Iceberg REST port: create, insert,
select, evolve, create-as-select and drop, on the primary and on a federated member (``ops_scratch``), and the Thrift
door (Iceberg's Java ``HiveCatalog`` in the same Spark session) reading the same rows of the same tables.

One Spark session holds three Iceberg catalogs: ``rest`` (the REST port, no warehouse: the whole federation),
``opsrest`` (the REST port with ``warehouse=ops``: that member alone) and ``lake`` (waggle's Thrift port)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.clients import hive2_client
from tests.support.env import java_available, require
from tests.support.iceberg_rest import CLIENT_ID, CLIENT_SECRET, start_rest_waggle
from tests.support.proxy import WaggleProcess

pytestmark = [pytest.mark.integration, pytest.mark.spark]
TABLE = f"rest_spark_{uuid.uuid4().hex[:6]}"
#: where each case writes: its REST catalog and namespace
WHERE = {"primary": "rest", "member": "opsrest"}


@pytest.fixture(scope="module")
def rest(primary: Any, analytics: Any, ops: Any, federation_data: dict[str, Any],
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[WaggleProcess]:
    proc = start_rest_waggle(tmp_path_factory.mktemp("rest-spark"), primary.uri, analytics.uri, ops.uri)
    yield proc
    proc.stop()


def _steps(case: str, rest_cat: str, ns: str) -> list[tuple[str, str]]:
    t, thrift, ctas = f"{rest_cat}.{ns}.{TABLE}", f"lake.{ns}.{TABLE}", f"{rest_cat}.{ns}.{TABLE}_ctas"
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
        (f"{case}:ctas_thrift", f"SELECT count(*) FROM lake.{ns}.{TABLE}_ctas"),
        (f"{case}:drop_ctas", f"DROP TABLE {ctas}"),
        (f"{case}:tables_after_drop", f"SHOW TABLES IN {rest_cat}.{ns}"),
    ]


@pytest.fixture(scope="module")
def spark_run(rest: WaggleProcess, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from tests.support import iceberg_spark

    require(java_available(), "Java 17 is needed for Spark")
    require(iceberg_spark.available(), "Spark with Iceberg's runtime is not prepared (scripts/iceberg_spark.sh)")
    require(iceberg_spark.rest_jars() is not None,
            "Iceberg's REST classes need HttpCore 5 (apt-get install libhttpcore5-java) and jarjar")
    db = f"rest_{uuid.uuid4().hex[:6]}"
    warehouse = tmp_path_factory.mktemp("rest-spark-warehouse")
    uri = f"http://127.0.0.1:{rest.rest_port}"  # type: ignore[attr-defined]
    credential = f"{CLIENT_ID}:{CLIENT_SECRET}"
    no_cache = {"cache-enabled": "false"}  # each query reads the catalog, so one door sees the other's commits
    # Iceberg's RESTCatalog (``type=rest``) over the JDK's HTTP client: java/IcebergJdkRest.java says why
    jar = iceberg_spark.compile_java(tmp_path_factory.mktemp("rest-spark-classes") / "classes")
    rest_props = {"catalog-impl": iceberg_spark.REST_CATALOG_IMPL, "uri": uri, "credential": credential, **no_cache}
    catalogs = {"rest": rest_props, "opsrest": {**rest_props, "warehouse": "ops"}, "lake": no_cache}
    steps = [("namespace", f"CREATE NAMESPACE rest.{db}"), ("namespaces", "SHOW NAMESPACES IN rest"),
             ("ops_namespaces", "SHOW NAMESPACES IN opsrest"),
             *_steps("primary", "rest", db), *_steps("member", "opsrest", "ops_scratch"),
             ("primary:drop", f"DROP TABLE rest.{db}.{TABLE}"),
             ("member:drop", f"DROP TABLE opsrest.ops_scratch.{TABLE}"),
             ("primary:thrift_after_drop", f"SHOW TABLES IN lake.{db}"),
             ("member:thrift_after_drop", "SHOW TABLES IN lake.ops_scratch"),
             ("drop_namespace", f"DROP NAMESPACE rest.{db}")]
    result = iceberg_spark.run_steps(f"thrift://127.0.0.1:{rest.port}", f"file://{warehouse}", steps,
                                     catalogs=catalogs, jars=(jar,))
    result["_db"] = db
    return result


def _ok(run: dict[str, Any], step: str) -> list[list[str | None]]:
    assert "error" not in run[step], (step, run[step])
    rows: list[list[str | None]] = run[step]["rows"]
    return rows


def test_the_rest_catalogs_see_their_namespaces(spark_run: dict[str, Any]) -> None:
    _ok(spark_run, "namespace")
    everything = {r[0] for r in _ok(spark_run, "namespaces")}
    assert {spark_run["_db"], "ops_scratch", "analytics_sales"} <= everything, everything
    only_ops = {r[0] for r in _ok(spark_run, "ops_namespaces")}
    assert "ops_scratch" in only_ops and not any(str(n).startswith("analytics_") for n in only_ops), only_ops
    assert spark_run["_db"] not in only_ops


@pytest.mark.parametrize("case", ["primary", "member"])
def test_spark_writes_through_the_rest_port_and_the_thrift_door_agrees(spark_run: dict[str, Any], case: str) -> None:
    for step in ("create", "insert", "add_column", "insert_more"):
        _ok(spark_run, f"{case}:{step}")
    expected = [["1", "a", None], ["2", "b", None], ["3", "c", "0.5"]]
    assert _ok(spark_run, f"{case}:select") == expected
    assert [r[0] for r in _ok(spark_run, f"{case}:snapshots")] == ["append", "append"]
    assert [TABLE] in [r[1:2] for r in _ok(spark_run, f"{case}:tables")]
    # the Thrift door reads the same table: its rows and its snapshots, one for one
    assert _ok(spark_run, f"{case}:thrift_select") == expected
    assert _ok(spark_run, f"{case}:thrift_snapshots") == _ok(spark_run, f"{case}:rest_snapshot_ids")
    _ok(spark_run, f"{case}:thrift_insert")
    assert _ok(spark_run, f"{case}:select_after_thrift") == [["4", "10"]]


@pytest.mark.parametrize("case", ["primary", "member"])
def test_create_as_select_and_drop_through_the_rest_port(spark_run: dict[str, Any], case: str) -> None:
    _ok(spark_run, f"{case}:ctas")
    assert _ok(spark_run, f"{case}:ctas_select") == [["2"], ["3"], ["4"]]
    assert _ok(spark_run, f"{case}:ctas_thrift") == [["3"]]
    _ok(spark_run, f"{case}:drop_ctas")
    assert [f"{TABLE}_ctas"] not in [r[1:2] for r in _ok(spark_run, f"{case}:tables_after_drop")]
    _ok(spark_run, f"{case}:drop")
    assert [TABLE] not in [r[1:2] for r in _ok(spark_run, f"{case}:thrift_after_drop")]


def test_the_tables_lived_in_their_own_metastores(spark_run: dict[str, Any], primary: Any, ops: Any) -> None:
    """Dropped through REST, each table is gone from the metastore that held it, under its own name."""
    _ok(spark_run, "drop_namespace")
    with hive2_client(primary.port) as c:
        assert spark_run["_db"] not in c.get_all_databases()
    with hive2_client(ops.port) as c:
        names = c.get_all_tables("scratch")
    assert TABLE not in names and f"{TABLE}_ctas" not in names
