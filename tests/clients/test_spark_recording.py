"""The recorded Spark 3.5 sequences (tests/clients/spark_recording.py) stay true: a live Spark 3.5 session
(pyspark 3.5 from ``.venv-iceberg-spark``, a process of its own) sends the recorded methods, in order, for the
statements that cost little (the writes are replayed from the recording only)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.clients.conftest import ClientsFederation, drop_database, seed_database, unique
from tests.clients.spark_recording import RECORDED
from tests.support.env import require
from tests.support.iceberg_spark import VENV

pytestmark = [pytest.mark.integration, pytest.mark.spark]
LIVE = ["SHOW DATABASES", "SHOW TABLES IN DB", "DESCRIBE TABLE DB.parts", "DROP DATABASE DB CASCADE"]


def _calls(log: bytes, start: int, end: int) -> list[str]:
    out = []
    for line in log[start:end].decode(errors="replace").splitlines():
        if line.startswith("{"):
            entry: dict[str, Any] = json.loads(line)
            if entry.get("event") == "call":
                out.append(str(entry["method"]))
    return out


def test_a_live_spark_35_still_sends_the_recorded_calls(clients_fed: ClientsFederation, tmp_path: Path) -> None:
    python = VENV / "bin" / "python"
    require(python.exists(), f"pyspark 3.5 is needed in {VENV}")
    store = clients_fed.stores["primary"]
    db = unique("cs_spark")
    seed_database(store.port, store.warehouse, db)
    try:
        done = subprocess.run(
            [str(python), str(Path(__file__).with_name("spark_calls.py")), f"thrift://127.0.0.1:{clients_fed.waggle.port}",
             str(tmp_path / "warehouse"), str(clients_fed.waggle.log_path),
             json.dumps([s.replace("DB", db) for s in LIVE])], capture_output=True, text=True, timeout=300)
        marks = [line for line in done.stdout.splitlines() if line.startswith("MARKS ")]
        assert marks, f"Spark failed:\n{done.stderr[-4000:]}"
        log = clients_fed.waggle.log_path.read_bytes()
        for (statement, start, end), recorded in zip(json.loads(marks[0][len("MARKS "):]), LIVE, strict=True):
            expected = [method for method, _table in RECORDED[recorded][1]]
            assert _calls(log, start, end) == expected, statement
    finally:
        drop_database(store.port, db)
