"""A real Spark session with its built-in Hive 2.3 client, pointed at waggle."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import hive2_client
from spark_sql_suite import run_suite

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
