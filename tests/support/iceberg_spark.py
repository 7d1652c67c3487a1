"""Spark with Apache Iceberg's runtime, as the Iceberg tests use it: ``scripts/iceberg_spark.sh`` prepares it in
``.venv-iceberg-spark`` (pyspark 3.5, Iceberg's runtime jar and Jackson relocated for it)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tests.support import spark_steps

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".venv-iceberg-spark"
JARS = VENV / "iceberg-jars"


def available() -> bool:
    return (JARS / "READY").exists() and (VENV / "bin" / "python").exists()


def run_steps(uri: str, warehouse: str, steps: list[tuple[str, str]], timeout: float = 900) -> dict[str, Any]:
    """Run SQL steps in one Spark session whose Iceberg catalog ``lake`` is the metastore at ``uri``."""
    spec = {"uri": uri, "warehouse": warehouse, "jars": [str(j) for j in sorted(JARS.glob("*.jar"))],
            "steps": steps}
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPARK_HOME", "VIRTUAL_ENV")}
    return spark_steps.run(spec, str(VENV / "bin" / "python"), timeout, env)
