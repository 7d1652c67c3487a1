"""Spark with Apache Iceberg's runtime, as the Iceberg tests use it: ``scripts/iceberg_spark.sh`` prepares it in
``.venv-iceberg-spark`` (pyspark 3.5, Iceberg's runtime jar and Jackson relocated for it)."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".venv-iceberg-spark"
JARS = VENV / "iceberg-jars"
STEPS = ROOT / "tests" / "integration" / "spark_iceberg_steps.py"


def available() -> bool:
    return (JARS / "READY").exists() and (VENV / "bin" / "python").exists()


def run_steps(uri: str, warehouse: str, steps: list[tuple[str, str]], timeout: float = 900) -> dict[str, Any]:
    """Run SQL steps in one Spark session whose Iceberg catalog ``lake`` is the metastore at ``uri``."""
    spec = {"uri": uri, "warehouse": warehouse, "jars": [str(j) for j in sorted(JARS.glob("*.jar"))],
            "steps": steps}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(spec, f)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPARK_HOME", "VIRTUAL_ENV")}
    done = subprocess.run([str(VENV / "bin" / "python"), str(STEPS), f.name], capture_output=True, text=True,
                          timeout=timeout, env=env)
    line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        raise AssertionError(f"Spark exited with {done.returncode}:\n{done.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(line[len("RESULT "):])
    return result

