"""Spark with Apache Iceberg's runtime (its Java HiveCatalog) through waggle: on the primary, on a writable
member behind its prefix, and refused on a read-only member before its metastore sees anything."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.support.clients import hive2_client
from tests.support.env import java_available, require
from tests.support.proxy import WaggleProcess

pytestmark = [pytest.mark.integration, pytest.mark.spark]
TABLE = f"spark_ice_{uuid.uuid4().hex[:6]}"


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


@pytest.fixture(scope="module")
def spark_run(waggle: WaggleProcess, primary: Any, analytics: Any, tmp_path_factory: pytest.TempPathFactory
              ) -> dict[str, Any]:
    from tests.support import iceberg_spark

    require(java_available(), "Java 17 is needed for Spark")
    require(iceberg_spark.available(), "Spark with Iceberg's runtime is not prepared (scripts/iceberg_spark.sh)")
    db = f"ice_{uuid.uuid4().hex[:6]}"
    warehouse = tmp_path_factory.mktemp("iceberg-warehouse")
    _seed_read_only_iceberg_table(analytics)
    since = len(waggle.log())
    steps = [("namespace", f"CREATE NAMESPACE lake.{db}"), *_writes(db), *_writes("ops_scratch"),
             ("read_only:select", f"SELECT count(*) FROM lake.analytics_sales.{TABLE}"),
             ("read_only:insert", f"INSERT INTO lake.analytics_sales.{TABLE} VALUES (9)"),
             ("read_only:create", f"CREATE TABLE lake.analytics_sales.{TABLE}_new (id bigint) USING iceberg"),
             ("read_only:namespace", "CREATE NAMESPACE lake.analytics_iceberg")]
    result = iceberg_spark.run_steps(f"thrift://127.0.0.1:{waggle.port}", f"file://{warehouse}", steps)
    result["_db"] = db
    result["_analytics_calls"] = [e for e in waggle.events("call", since) if e.get("metastore") == "analytics"]
    return result


def _seed_read_only_iceberg_table(analytics: Any) -> None:
    """An Iceberg table with one row, written straight into the read-only member."""
    import pyarrow as pa
    from pyiceberg.catalog import load_catalog

    cat = load_catalog("direct", type="hive", uri=analytics.uri, warehouse=f"file://{analytics.warehouse}")
    table = cat.create_table(f"sales.{TABLE}", schema=pa.schema([("id", pa.int64())]))
    table.append(pa.table({"id": pa.array([1], pa.int64())}))


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
