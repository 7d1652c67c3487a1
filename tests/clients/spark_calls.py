"""Run Spark SQL statements in a local Spark session whose Hive catalog is a metastore URI, and print, per
statement, where waggle's log stood before and after it (so a test can read the calls each statement sent).

    python spark_calls.py thrift://127.0.0.1:PORT WAREHOUSE_DIR WAGGLE_LOG '["SHOW DATABASES", ...]'

Prints one line ``MARKS <json>``: [[statement, log offset before, log offset after], ...]. Run with the Spark
release under test (``.venv-iceberg-spark``: pyspark 3.5).
"""

from __future__ import annotations

import json
import os
import sys
import time


def main(uri: str, warehouse: str, log: str, statements: list[str]) -> None:
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[1]").config("spark.sql.catalogImplementation", "hive")
             .config("spark.hadoop.hive.metastore.uris", uri).config("spark.sql.warehouse.dir", warehouse)
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             .enableHiveSupport().getOrCreate())
    try:
        spark.sql("SELECT 1").collect()  # the session's own start-up calls, before the first mark
        marks = []
        for statement in statements:
            time.sleep(0.15)  # waggle logs a call after answering it
            start = os.path.getsize(log)
            spark.sql(statement).collect()
            time.sleep(0.15)
            marks.append([statement, start, os.path.getsize(log)])
        print("MARKS " + json.dumps(marks), flush=True)
    finally:
        spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4]))
