"""Like spark_query.py, but a query that fails does not stop the others: each one's rows, or its error.

    python spark_grants_query.py [--conf KEY=VALUE ...] thrift://127.0.0.1:PORT WAREHOUSE_DIR "SELECT ..." [...]

Prints one line ``RESULT <json>``: a list with, for each query, ``{"rows": [[...], ...]}`` (values as strings) or
``{"error": "<the exception's class and message, Java stack frames left out>"}``.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from spark_query import local_spark, parse_args


def error_text(exc: BaseException) -> str:
    """The exception's class and message; of a Java exception its message and causes, without the stack frames."""
    lines = [line for line in str(exc).splitlines() if not line.lstrip().startswith(("at ", "..."))]
    return f"{type(exc).__name__}: " + "\n".join(lines)[:8000]


def run(spark: Any, query: str) -> dict[str, Any]:
    try:
        return {"rows": [[str(v) for v in row] for row in spark.sql(query).collect()]}
    except Exception as exc:  # recorded: the test decides what it means
        return {"error": error_text(exc)}


def main(uri: str, warehouse: str, queries: list[str], conf: dict[str, str]) -> None:
    spark = local_spark(uri, warehouse, conf)
    try:
        results = [run(spark, q) for q in queries]
    finally:
        spark.stop()
    print("RESULT " + json.dumps(results), flush=True)


if __name__ == "__main__":
    settings, args = parse_args(sys.argv[1:])
    main(args[0], args[1], args[2:], settings)
