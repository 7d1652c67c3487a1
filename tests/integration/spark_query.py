"""Run Spark SQL queries against a metastore URI in a fresh local Spark session and print their rows.

    python spark_query.py [--conf KEY=VALUE ...] thrift://127.0.0.1:PORT WAREHOUSE_DIR "SELECT ..." ["SHOW ..." ...]

Prints one line ``RESULT <json>``: a list with each query's rows (values as strings). A separate process, so a
test can point Spark at a metastore other than the session's own, or run it with other JVM options and
credentials (``PYSPARK_SUBMIT_ARGS``, ``HADOOP_CONF_DIR``). Each ``--conf`` is one more Spark setting.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def local_spark(uri: str, warehouse: str, conf: dict[str, str] | None = None) -> Any:
    """A local Spark session whose Hive catalog is the metastore at ``uri``."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    return (
        builder.master("local[1]")
        .config("spark.sql.catalogImplementation", "hive")
        .config("spark.hadoop.hive.metastore.uris", uri)
        .config("spark.sql.warehouse.dir", warehouse)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .enableHiveSupport()
        .getOrCreate()
    )


def main(uri: str, warehouse: str, queries: list[str], conf: dict[str, str] | None = None) -> None:
    spark = local_spark(uri, warehouse, conf)
    try:
        results = [[[str(v) for v in row] for row in spark.sql(q).collect()] for q in queries]
    finally:
        spark.stop()
    print("RESULT " + json.dumps(results), flush=True)


def parse_args(argv: list[str]) -> tuple[dict[str, str], list[str]]:
    """The leading ``--conf KEY=VALUE`` pairs, and the rest of the arguments."""
    conf: dict[str, str] = {}
    while len(argv) >= 2 and argv[0] == "--conf":
        key, _, value = argv[1].partition("=")
        conf[key] = value
        argv = argv[2:]
    return conf, argv


if __name__ == "__main__":
    settings, args = parse_args(sys.argv[1:])
    main(args[0], args[1], args[2:], settings)
