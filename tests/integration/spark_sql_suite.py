"""The Spark SQL sequence that must give the same answers through waggle as direct.

Imported by the tests (run through waggle in-process) and run as a script for the direct side:
    python spark_sql_suite.py thrift://127.0.0.1:PORT DB WAREHOUSE_DIR
"""

from __future__ import annotations

import json
import sys
from typing import Any

VOLATILE = {"Created Time", "Last Access", "Location", "Created By", "Table Properties", "Statistics"}


def run_suite(spark: Any, db: str) -> dict[str, Any]:
    def rows(sql: str) -> list[list[Any]]:
        return [[str(v) for v in r] for r in spark.sql(sql).collect()]

    out: dict[str, Any] = {}
    spark.sql(f"CREATE DATABASE {db}")
    out["show_databases"] = sorted(r[0] for r in rows("SHOW DATABASES") if r[0] in (db, "default"))
    spark.sql(f"CREATE TABLE {db}.items (id INT, name STRING) USING parquet")
    spark.sql(f"INSERT INTO {db}.items VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    out["select"] = rows(f"SELECT id, name FROM {db}.items ORDER BY id")
    spark.sql(f"CREATE TABLE {db}.logs (msg STRING, day STRING) USING parquet PARTITIONED BY (day)")
    spark.sql(f"ALTER TABLE {db}.logs ADD PARTITION (day='2024-01-01')")
    spark.sql(f"INSERT INTO {db}.logs PARTITION (day='2024-01-02') VALUES ('hello'), ('world')")
    out["show_partitions"] = rows(f"SHOW PARTITIONS {db}.logs")
    out["select_partitioned"] = rows(f"SELECT msg, day FROM {db}.logs ORDER BY msg")
    out["pruned"] = rows(f"SELECT count(*) FROM {db}.logs WHERE day = '2024-01-02'")
    out["describe_extended"] = [r for r in rows(f"DESCRIBE EXTENDED {db}.items") if r[0] not in VOLATILE]
    out["show_tables"] = sorted(r[1] for r in rows(f"SHOW TABLES IN {db}"))
    spark.sql(f"DROP TABLE {db}.logs")
    out["after_drop_table"] = sorted(r[1] for r in rows(f"SHOW TABLES IN {db}"))
    spark.sql(f"DROP TABLE {db}.items")
    spark.sql(f"DROP DATABASE {db}")
    out["after_drop_database"] = sorted(r[0] for r in rows("SHOW DATABASES") if r[0] in (db, "default"))
    return out


def main() -> None:
    from spark_query import local_spark

    uri, db, warehouse = sys.argv[1:4]
    spark = local_spark(uri, warehouse)
    spark.sparkContext.setLogLevel("ERROR")
    try:
        print("RESULT " + json.dumps(run_suite(spark, db)))
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
