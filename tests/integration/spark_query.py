"""Run Spark SQL queries against a metastore URI in a fresh local Spark session and print their rows.

    python spark_query.py thrift://127.0.0.1:PORT WAREHOUSE_DIR "SELECT ..." ["SHOW ..." ...]

Prints one line ``RESULT <json>``: a list with each query's rows (values as strings). A separate process, so a
test can point Spark at a metastore other than the session's own.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def local_spark(uri: str, warehouse: str) -> Any:
    """A local Spark session whose Hive catalog is the metastore at ``uri``."""
    from pyspark.sql import SparkSession

    return (
        SparkSession.builder.master("local[1]")
        .config("spark.sql.catalogImplementation", "hive")
        .config("spark.hadoop.hive.metastore.uris", uri)
        .config("spark.sql.warehouse.dir", warehouse)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .enableHiveSupport()
        .getOrCreate()
    )


def main(uri: str, warehouse: str, queries: list[str]) -> None:
    spark = local_spark(uri, warehouse)
    try:
        results = [[[str(v) for v in row] for row in spark.sql(q).collect()] for q in queries]
    finally:
        spark.stop()
    print("RESULT " + json.dumps(results), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
