"""A real Spark session with its built-in Hive 2.3 client, pointed at waggle."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.spark_sql_suite import run_suite
from tests.support.clients import hive2_client
from waggle.local.seed import ensure_database, ensure_table

pytestmark = [pytest.mark.integration, pytest.mark.spark]
HERE = Path(__file__).resolve().parent


def test_spark_sql_through_waggle_gives_the_same_answers_as_direct(primary, spark, tmp_path):
    db = "spark_suite"
    direct = subprocess.run(
        [sys.executable, str(HERE / "spark_sql_suite.py"), primary.uri, db, str(tmp_path / "wh")],
        capture_output=True, text=True, timeout=300,
    )
    assert direct.returncode == 0, direct.stderr[-3000:]
    expected = json.loads(next(line for line in direct.stdout.splitlines() if line.startswith("RESULT "))[7:])
    through_waggle = run_suite(spark, db)
    assert through_waggle == expected
    assert expected["select"] == [["1", "a"], ["2", "b"], ["3", "c"]]
    assert expected["show_partitions"] == [["day=2024-01-01"], ["day=2024-01-02"]]


def test_spark_reads_a_hive_text_table_through_waggle(primary, spark, unique_db):
    wh = primary.warehouse
    with hive2_client(primary.port) as c:
        ensure_database(c, unique_db, f"file://{wh}/{unique_db}.db")
        ensure_table(c, unique_db, "people", f"file://{wh}/{unique_db}.db/people",
                     [("id", "int"), ("name", "string")], rows=["1,alice", "2,bob"])
    got = [tuple(r) for r in spark.sql(f"SELECT id, name FROM {unique_db}.people ORDER BY id").collect()]
    assert got == [(1, "alice"), (2, "bob")]


def test_spark_joins_a_primary_table_with_a_federated_one_and_ctas_into_the_primary(primary, spark, unique_db,
                                                                                   federation_data):
    """One Spark session sees both metastores through waggle: analytics's sales.orders is analytics_sales.orders."""
    wh = primary.warehouse
    with hive2_client(primary.port) as c:
        ensure_database(c, unique_db, f"file://{wh}/{unique_db}.db")
        ensure_table(c, unique_db, "customers", f"file://{wh}/{unique_db}.db/customers",
                     [("name", "string"), ("country", "string")], rows=["alice,fr", "bob,de"])
    dbs = {r[0] for r in spark.sql("SHOW DATABASES").collect()}
    assert {"analytics_sales", "ops_telemetry", unique_db} <= dbs
    joined = spark.sql(
        f"SELECT o.id, c.country FROM analytics_sales.orders o JOIN {unique_db}.customers c "
        f"ON o.customer = c.name ORDER BY o.id").collect()
    assert [tuple(r) for r in joined] == [(1, "fr"), (2, "de"), (3, "fr")]
    spark.sql(f"CREATE TABLE {unique_db}.orders_by_country STORED AS PARQUET AS "
              f"SELECT c.country, count(*) AS n FROM analytics_sales.orders o JOIN {unique_db}.customers c "
              f"ON o.customer = c.name GROUP BY c.country")
    with hive2_client(primary.port) as c:  # the CTAS landed in the primary, straight from its own metastore
        assert c.get_table(unique_db, "orders_by_country").dbName == unique_db
    got = spark.sql(f"SELECT country, n FROM {unique_db}.orders_by_country ORDER BY country").collect()
    assert [tuple(r) for r in got] == [("de", 1), ("fr", 2)]


def test_spark_reads_a_view_over_a_federated_database(spark, federation_data):
    """The view's SQL names `sales`.`orders`; through waggle it reads `analytics_sales`.`orders`."""
    got = spark.sql("SELECT id, customer FROM analytics_sales.orders_view ORDER BY id").collect()
    assert [tuple(r) for r in got] == [(2, "bob"), (3, "alice")]


def test_spark_cannot_write_into_a_read_only_federated_database(spark):
    from pyspark.sql.utils import AnalysisException

    with pytest.raises(Exception) as info:
        spark.sql("CREATE TABLE analytics_sales.nope (id INT) STORED AS PARQUET")
    assert isinstance(info.value, AnalysisException) or "read-only" in str(info.value)
    assert "read-only" in str(info.value)
