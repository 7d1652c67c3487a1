"""Runs SQL steps in one local Spark 3.5 session on a metastore URI, and reports each step's rows or error.

One argument: a JSON file holding ``uri``, ``warehouse`` and ``steps`` (pairs of name and SQL), and optionally
``jars``. With ``jars`` (Apache Iceberg's runtime; run under ``.venv-iceberg-spark``'s Python by
``tests/support/iceberg_spark.py``) the metastore is Iceberg's catalog ``lake``; without, it is Spark's own Hive
catalog (``tests/support/spark_steps.py``). Prints ``RESULT`` and a JSON object: per step, its rows (as strings) or
its error (the exception and its Java causes), and its duration. A failed step does not stop the others. With
``gates`` (step name -> a file path), it prints ``GATE <name>`` before that step and waits (at most 120 s) for the
file, so that a test can act between two steps of one session. It imports nothing but pyspark: it runs under either
environment's Python.
"""

from __future__ import annotations

import json
import os
import sys
import time

from pyspark.sql import SparkSession


def _messages(exc: Exception) -> str:
    """The exception and, for a Java one, each cause in its chain (their messages, without the stack)."""
    found = [f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"]
    cause = getattr(exc, "java_exception", None)
    while cause is not None and len(found) < 12:
        found.append(str(cause.toString()))
        cause = cause.getCause()
    return " | caused by: ".join(found)[:8000]


def main(spec_file: str) -> None:
    with open(spec_file) as f:
        spec = json.load(f)
    builder = SparkSession.builder.master("local[1]").appName("waggle-tests")
    if spec.get("jars"):
        builder = (
            builder.config("spark.jars", ",".join(spec["jars"]))
            .config("spark.sql.extensions", "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
            .config("spark.sql.catalog.lake", "org.apache.iceberg.spark.SparkCatalog")
            .config("spark.sql.catalog.lake.type", "hive")
            .config("spark.sql.catalog.lake.uri", spec["uri"])
            .config("spark.sql.catalog.lake.warehouse", spec["warehouse"])
        )
    else:
        builder = (
            builder.config("spark.sql.catalogImplementation", "hive")
            .config("spark.hadoop.hive.metastore.uris", spec["uri"])
            .config("spark.sql.warehouse.dir", spec["warehouse"])
            .enableHiveSupport()
        )
    spark = (
        builder.config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    results: dict[str, object] = {}
    gates = spec.get("gates") or {}
    for name, sql in spec["steps"]:
        if name in gates:  # the test acts (outside Spark) before this step: it says so by making the file
            print(f"GATE {name}", flush=True)
            deadline = time.monotonic() + 120
            while not os.path.exists(gates[name]) and time.monotonic() < deadline:
                time.sleep(0.05)
        started = time.monotonic()
        try:
            rows = spark.sql(sql).collect()
            results[name] = {"rows": [[None if v is None else str(v) for v in row] for row in rows]}
        except Exception as exc:  # reported per step; the test asserts on it
            results[name] = {"error": _messages(exc)}
        results[name]["seconds"] = round(time.monotonic() - started, 3)
    print("RESULT " + json.dumps(results), flush=True)
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1])
